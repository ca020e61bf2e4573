#include "orchestrator/report/plot_scale.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace sextant {
namespace {

void Widen(double* lo, double* hi) {
  if (!std::isfinite(*lo) || !std::isfinite(*hi)) {
    *lo = 0;
    *hi = 1;
  }
  if (*lo > *hi) std::swap(*lo, *hi);
  if (*lo == *hi) {
    double d = *lo == 0 ? 1 : std::abs(*lo) * 0.1;
    *lo -= d;
    *hi += d;
  }
}

}  // namespace

PlotScale PlotScale::Linear(double lo, double hi, double px0, double px1) {
  Widen(&lo, &hi);
  return PlotScale(Kind::kLinear, lo, hi, px0, px1);
}

PlotScale PlotScale::Whole(double lo, double hi, double px0, double px1) {
  PlotScale s = Linear(lo, hi, px0, px1);
  s.whole_ = true;
  return s;
}

PlotScale PlotScale::Log(double lo, double hi, double px0, double px1) {
  if (!(lo > 0) || !(hi > 0)) return Linear(lo, hi, px0, px1);
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    lo /= 2;
    hi *= 2;
  }
  return PlotScale(Kind::kLog, lo, hi, px0, px1);
}

PlotScale PlotScale::Category(std::vector<std::string> categories, double px0, double px1) {
  PlotScale s(Kind::kCategory, 0, std::max<double>(1, categories.size()), px0, px1);
  s.categories_ = std::move(categories);
  return s;
}

double PlotScale::operator()(double value) const {
  double t;
  switch (kind_) {
    case Kind::kLog:
      value = std::max(value, lo_);
      t = (std::log10(value) - std::log10(lo_)) / (std::log10(hi_) - std::log10(lo_));
      break;
    case Kind::kCategory:
      t = (value + 0.5) / hi_;
      break;
    default:
      t = (value - lo_) / (hi_ - lo_);
  }
  if (!std::isfinite(t)) t = 0;
  return px0_ + t * (px1_ - px0_);
}

std::string PlotScale::Label(double value) {
  if (value == 0) return "0";
  std::string s = absl::StrFormat("%.4g", value);
  return s;
}

std::vector<std::pair<double, std::string>> PlotScale::Ticks(int n) const {
  std::vector<std::pair<double, std::string>> out;
  n = std::max(n, 2);
  if (kind_ == Kind::kCategory) {
    size_t step = std::max<size_t>(1, (categories_.size() + n - 1) / n);
    for (size_t i = 0; i < categories_.size(); i += step) out.emplace_back(i, categories_[i]);
    return out;
  }
  if (kind_ == Kind::kLog) {
    int a = static_cast<int>(std::ceil(std::log10(lo_) - 1e-9));
    int b = static_cast<int>(std::floor(std::log10(hi_) + 1e-9));
    int step = std::max(1, (b - a + 1 + n - 1) / n);
    for (int k = a; k <= b; k += step)
      out.emplace_back(std::pow(10.0, k), Label(std::pow(10.0, k)));
    if (out.size() < 2) {
      out.clear();
      out.emplace_back(lo_, Label(lo_));
      out.emplace_back(hi_, Label(hi_));
    }
    return out;
  }
  double raw = (hi_ - lo_) / n;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  if (whole_) step = std::max(1.0, std::round(step));
  for (double v = std::ceil(lo_ / step) * step; v <= hi_ + step * 1e-9; v += step) {
    double clean = std::abs(v) < step * 1e-9 ? 0 : v;
    out.emplace_back(clean, Label(clean));
  }
  return out;
}

}  // namespace sextant
