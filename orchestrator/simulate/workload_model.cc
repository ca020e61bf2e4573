#include "orchestrator/simulate/workload_model.h"

#include <cmath>
#include <numbers>

#include "orchestrator/core/experiment_loader.h"

namespace sextant {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double Unit(uint64_t bits) { return ((bits >> 11) + 0.5) * 0x1.0p-53; }

// A standard normal from two hashed uniforms (Box-Muller).
double Gaussian(uint64_t seed, int64_t trial, double fidelity) {
  uint64_t h = Mix(seed ^ Mix(static_cast<uint64_t>(trial)) ^
                   Mix(static_cast<uint64_t>(std::llround(fidelity * 1024))));
  double u = Unit(h), v = Unit(Mix(h));
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
}

double Number(const ParamValue& v) {
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return 0;
}

double Branin(double x0, double x1) {
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
  const double a = x1 - b * x0 * x0 + c * x0 - 6;
  return a * a + 10 * (1 - t) * std::cos(x0) + 10;
}

}  // namespace

WorkloadModel::WorkloadModel(const v1::ExperimentSpec& spec)
    : options_(spec.simulate()), space_(ToSearchSpace(spec)) {
  v1::Simulation& o = options_;
  if (o.seconds_per_unit() <= 0) o.set_seconds_per_unit(60);
  if (o.seconds_per_trial() <= 0) o.set_seconds_per_trial(600);
  if (!o.has_attempt_overhead_seconds()) o.set_attempt_overhead_seconds(30);
  if (!o.has_noise()) o.set_noise(0.01);
  if (!o.has_checkpoint_seconds()) o.set_checkpoint_seconds(20);
  if (!o.has_boot_seconds()) o.set_boot_seconds(60);
  if (o.checkpoint_every() <= 0) o.set_checkpoint_every(1);
  if (o.tick_seconds() <= 0) o.set_tick_seconds(10);
  if (o.seed() == 0) o.set_seed(spec.search().seed());
  if (o.objective().empty()) {
    const bool branin = space_.IndexOf("x0") >= 0 && space_.IndexOf("x1") >= 0 &&
                        space_.params[space_.IndexOf("x0")].kind != ParamSpec::Kind::kCategorical &&
                        space_.params[space_.IndexOf("x1")].kind != ParamSpec::Kind::kCategorical;
    o.set_objective(branin ? "branin" : "curve");
  }
  has_fidelity_ = spec.search().scheduler() != v1::Search::NONE &&
                  spec.search().scheduler() != v1::Search::SCHEDULER_UNSPECIFIED &&
                  spec.search().fidelity().max() > 0;
  max_fidelity_ = has_fidelity_ ? spec.search().fidelity().max() : 1;
  maximize_ = spec.objective().goal() == v1::Objective::MAXIMIZE;
  for (size_t i = 0; i < space_.params.size(); ++i) {
    centres_.push_back(0.1 + 0.8 * Unit(Mix(o.seed() * 31 + i)));
  }
  if (!o.seconds_per_unit_expression().empty()) {
    std::vector<std::string> names;
    for (const ParamSpec& p : space_.params) names.push_back(p.name);
    // The loader has checked it; a spec that bypassed the loader keeps the constant.
    auto e = ParamExpression::Parse(o.seconds_per_unit_expression(), names);
    if (e.ok()) time_expression_ = std::shared_ptr<ParamExpression>(std::move(*e));
  }
}

double WorkloadModel::seconds_per_unit(const Params& params) const {
  if (!time_expression_) return seconds_per_unit();
  std::map<std::string, double> values;
  for (const ParamSpec& p : space_.params) {
    auto it = params.find(p.name);
    if (it == params.end()) continue;
    if (const double* d = std::get_if<double>(&it->second)) {
      values[p.name] = *d;
    } else if (const int64_t* i = std::get_if<int64_t>(&it->second)) {
      values[p.name] = static_cast<double>(*i);
    } else if (const std::string* s = std::get_if<std::string>(&it->second)) {
      auto pos = std::find(p.values.begin(), p.values.end(), *s);
      values[p.name] = static_cast<double>(pos - p.values.begin());
    }
  }
  const double v = time_expression_->Evaluate(values);
  return v > 0 && std::isfinite(v) ? v : seconds_per_unit();
}

double WorkloadModel::seconds_per_unit() const {
  return has_fidelity_ ? options_.seconds_per_unit() : options_.seconds_per_trial();
}

double WorkloadModel::Final(const Params& params) const {
  if (options_.objective() == "branin") {
    auto x0 = params.find("x0"), x1 = params.find("x1");
    return Branin(x0 == params.end() ? 0 : Number(x0->second),
                  x1 == params.end() ? 0 : Number(x1->second));
  }
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < space_.params.size(); ++i) {
    auto it = params.find(space_.params[i].name);
    if (it == params.end()) continue;
    const double d = ToUnit(space_.params[i], it->second) - centres_[i];
    sum += d * d;
    ++n;
  }
  return n == 0 ? 0 : sum / n;
}

double WorkloadModel::Value(const Params& params, int64_t trial, double fidelity) const {
  const double scale = options_.objective() == "branin" ? 2.0 : 0.2;
  const double f = std::max(fidelity, 1e-9);
  double v = Final(params) + scale * (std::sqrt(max_fidelity_ / f) - 1) +
             options_.noise() * Gaussian(options_.seed(), trial, fidelity);
  return maximize_ ? -v : v;
}

}  // namespace sextant
