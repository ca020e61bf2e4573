#ifndef SEXTANT_ORCHESTRATOR_REPORT_PLOT_SCALE_H_
#define SEXTANT_ORCHESTRATOR_REPORT_PLOT_SCALE_H_

#include <string>
#include <utility>
#include <vector>

namespace sextant {

// Maps data values onto a pixel range: linear, logarithmic (base 10) or categorical (category
// i at the centre of the i-th of n equal bands). Immutable; thread-compatible.
class PlotScale {
 public:
  // [lo, hi] onto [px0, px1]; px1 < px0 is fine (a y axis grows upwards). A degenerate
  // domain (lo == hi, or not finite) is widened to lo +/- 1 (or +/- 10%) so that it still maps.
  static PlotScale Linear(double lo, double hi, double px0, double px1);
  // Like Linear, for whole quantities such as round numbers: its ticks fall on whole numbers
  // only (a step of at least 1), never at 0.5.
  static PlotScale Whole(double lo, double hi, double px0, double px1);
  // Like Linear on log10 of the values; values <= 0 are clamped to the smallest positive lo.
  // Falls back to Linear when lo <= 0.
  static PlotScale Log(double lo, double hi, double px0, double px1);
  static PlotScale Category(std::vector<std::string> categories, double px0, double px1);

  // The pixel for a value (for a category scale, the value is the index).
  double operator()(double value) const;
  // Up to about n "nice" ticks (1, 2, 5 x 10^k for linear; powers of ten for log; every
  // category, thinned to at most n) as (value, label).
  std::vector<std::pair<double, std::string>> Ticks(int n) const;

  bool is_log() const { return kind_ == Kind::kLog; }
  bool is_category() const { return kind_ == Kind::kCategory; }
  bool is_whole() const { return whole_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

  // A short label for a number: up to 4 significant digits, no trailing zeros.
  static std::string Label(double value);

 private:
  enum class Kind { kLinear, kLog, kCategory };
  PlotScale(Kind kind, double lo, double hi, double px0, double px1)
      : kind_(kind), lo_(lo), hi_(hi), px0_(px0), px1_(px1) {}

  Kind kind_;
  double lo_, hi_, px0_, px1_;
  std::vector<std::string> categories_;
  bool whole_ = false;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_REPORT_PLOT_SCALE_H_
