#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strategies/internal/splitmix.h"
#include "strategies/pareto.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

// Keeps NSGA-II's random stream apart from the other samplers' under the same seed.
constexpr uint64_t kNsga2Stream = 0x6e736761322d7374ULL;
// On ZDT1 (10 variables) a population of 20 reached a higher hypervolume than 50 after both
// 100 and 200 trials: a budget of 50-100 trials leaves a 50-strong population too few
// generations to converge.
constexpr int kDefaultPopulation = 20;
constexpr double kSbxEta = 15;
constexpr double kMutationEta = 20;
// Redraws of a child that repeats an earlier or running trial before falling back to a
// uniform point.
constexpr int kMaxRedraws = 32;

// A finished trial that can be a parent: its unit coordinates (NaN where inactive), its
// objectives and its total constraint violation.
struct Individual {
  std::vector<double> unit;
  std::vector<double> values;
  double violation = 0;
  int rank = 0;
  double crowding = 0;
};

double TotalViolation(const Observation& o) {
  double total = 0;
  for (double v : o.violations) {
    if (!(v <= 0)) total += std::isnan(v) ? std::numeric_limits<double>::infinity() : v;
  }
  return total;
}

bool IsParent(const Observation& o, int objectives) {
  if (o.outcome != Observation::Outcome::kCompleted) return false;
  if (static_cast<int>(o.values.size()) != objectives) return false;
  return std::all_of(o.values.begin(), o.values.end(), [](double v) { return std::isfinite(v); });
}

// The elite: the population_size best by (constraint-domination rank, crowding distance),
// with each one's rank and crowding distance within its front filled in.
std::vector<Individual> SelectElite(std::vector<Individual> all, int population_size) {
  std::vector<std::vector<double>> points;
  std::vector<double> violations;
  for (const Individual& ind : all) {
    points.push_back(ind.values);
    violations.push_back(ind.violation);
  }
  std::vector<int> ranks = NonDominatedRanks(points, violations);
  const int fronts = all.empty() ? 0 : *std::max_element(ranks.begin(), ranks.end()) + 1;
  std::vector<std::vector<int>> members(fronts);
  for (int i = 0; i < static_cast<int>(all.size()); ++i) members[ranks[i]].push_back(i);
  for (int f = 0; f < fronts; ++f) {
    std::vector<double> crowding = CrowdingDistances(points, members[f]);
    for (size_t k = 0; k < members[f].size(); ++k) {
      all[members[f][k]].rank = f;
      all[members[f][k]].crowding = crowding[k];
    }
  }
  std::vector<int> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (all[a].rank != all[b].rank) return all[a].rank < all[b].rank;
    return all[a].crowding > all[b].crowding;
  });
  std::vector<Individual> elite;
  for (int i = 0; i < std::min<int>(population_size, static_cast<int>(order.size())); ++i) {
    elite.push_back(std::move(all[order[i]]));
  }
  return elite;
}

double Uniform(std::mt19937_64& engine) { return internal::UnitFromBits(engine()); }

// One bound side of Deb's bounded SBX spread factor for a uniform draw r.
double SbxBetaQ(double beta, double r) {
  const double alpha = 2 - std::pow(beta, -(kSbxEta + 1));
  if (r <= 1 / alpha) return std::pow(r * alpha, 1 / (kSbxEta + 1));
  return std::pow(1 / (2 - r * alpha), 1 / (kSbxEta + 1));
}

// Simulated binary crossover of two coordinates in [0, 1] (Deb & Agrawal 1995, with the
// bounded spread of Deb's NSGA-II code); returns one of the two children at random.
double Sbx(double x1, double x2, std::mt19937_64& engine) {
  const double lo = std::min(x1, x2), hi = std::max(x1, x2);
  if (hi - lo < 1e-14) return x1;
  const double r = Uniform(engine);
  const double c1 = 0.5 * (lo + hi - SbxBetaQ(1 + 2 * lo / (hi - lo), r) * (hi - lo));
  const double c2 = 0.5 * (lo + hi + SbxBetaQ(1 + 2 * (1 - hi) / (hi - lo), r) * (hi - lo));
  return std::clamp(Uniform(engine) < 0.5 ? c1 : c2, 0.0, 1.0);
}

// Deb's bounded polynomial mutation of a coordinate in [0, 1].
double PolynomialMutation(double x, std::mt19937_64& engine) {
  const double r = Uniform(engine), power = 1 / (kMutationEta + 1);
  double delta;
  if (r < 0.5) {
    const double v = 2 * r + (1 - 2 * r) * std::pow(1 - x, kMutationEta + 1);
    delta = std::pow(v, power) - 1;
  } else {
    const double v = 2 * (1 - r) + 2 * (r - 0.5) * std::pow(x, kMutationEta + 1);
    delta = 1 - std::pow(v, power);
  }
  return std::clamp(x + delta, 0.0, 1.0);
}

class Nsga2Sampler final : public Sampler {
 public:
  Nsga2Sampler(SearchSpace space, Nsga2Options options)
      : space_(std::move(space)), options_(options) {
    if (options_.population_size <= 0) options_.population_size = kDefaultPopulation;
    options_.population_size = std::max(options_.population_size, 2);
    if (options_.mutation_probability <= 0) {
      options_.mutation_probability = 1.0 / std::max<size_t>(space_.params.size(), 1);
    }
    startup_ = NewStartupSampler(space_, options_.seed);
  }

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    if (space_.params.empty()) return Params();
    int finished = 0;
    std::vector<Individual> parents;
    for (const Observation& o : request.history) {
      if (o.outcome != Observation::Outcome::kPending) ++finished;
      if (IsParent(o, options_.objectives)) parents.push_back(ToIndividual(o));
    }
    if (finished < options_.population_size || parents.size() < 2) {
      return startup_->Ask(request);
    }
    const std::vector<Individual> elite = SelectElite(std::move(parents), options_.population_size);
    std::set<Params> taken;
    for (const Observation& o : request.history) taken.insert(o.params);
    // A fresh engine per trial: the answer depends on (seed, trial, history) only.
    std::mt19937_64 engine(internal::StreamSeed(options_.seed ^ kNsga2Stream,
                                                static_cast<uint64_t>(request.trial_number)));
    for (int attempt = 0; attempt < kMaxRedraws; ++attempt) {
      Params child = FromUnitCube(space_, Child(elite, engine));
      if (!taken.contains(child)) return child;
    }
    std::vector<double> u(space_.params.size());
    for (double& x : u) x = Uniform(engine);
    return FromUnitCube(space_, u);
  }

 private:
  Individual ToIndividual(const Observation& o) const {
    Individual ind;
    ind.values = o.values;
    ind.violation = TotalViolation(o);
    for (const ParamSpec& spec : space_.params) {
      const auto it = o.params.find(spec.name);
      ind.unit.push_back(it == o.params.end() ? std::numeric_limits<double>::quiet_NaN()
                                              : ToUnit(spec, it->second));
    }
    return ind;
  }

  // Binary tournament: the lower rank wins (constraint domination comes first in the
  // ranks), then the larger crowding distance.
  const Individual& Tournament(const std::vector<Individual>& elite,
                               std::mt19937_64& engine) const {
    const Individual& a = elite[engine() % elite.size()];
    const Individual& b = elite[engine() % elite.size()];
    if (a.rank != b.rank) return a.rank < b.rank ? a : b;
    return a.crowding >= b.crowding ? a : b;
  }

  // A child's unit coordinates. A coordinate inactive in one parent comes from the other;
  // inactive in both, it is drawn uniformly, so that a child activating a branch neither
  // parent used still gets a valid value there.
  std::vector<double> Child(const std::vector<Individual>& elite, std::mt19937_64& engine) const {
    const Individual& p1 = Tournament(elite, engine);
    const Individual& p2 = Tournament(elite, engine);
    const bool cross = Uniform(engine) < options_.crossover_probability;
    std::vector<double> u(space_.params.size());
    for (size_t d = 0; d < u.size(); ++d) {
      double a = p1.unit[d], b = p2.unit[d];
      if (std::isnan(a)) std::swap(a, b);
      const bool categorical = space_.params[d].kind == ParamSpec::Kind::kCategorical;
      const bool swap_draw = Uniform(engine) < 0.5;
      if (std::isnan(a)) {
        u[d] = Uniform(engine);
      } else if (!cross || std::isnan(b)) {
        u[d] = a;
      } else if (categorical) {
        u[d] = swap_draw ? b : a;
      } else {
        u[d] = swap_draw ? Sbx(a, b, engine) : a;
      }
      if (Uniform(engine) < options_.mutation_probability) {
        u[d] = categorical ? Uniform(engine) : PolynomialMutation(u[d], engine);
      }
    }
    return u;
  }

  const SearchSpace space_;
  Nsga2Options options_;
  std::unique_ptr<Sampler> startup_;
};

}  // namespace

std::unique_ptr<Sampler> NewNsga2Sampler(SearchSpace space, Nsga2Options options) {
  return std::make_unique<Nsga2Sampler>(std::move(space), options);
}

}  // namespace sextant
