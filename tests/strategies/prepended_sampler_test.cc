// NewEnqueuedSampler and NewWarmStartedSampler: what runs first, and what the model has seen
// before the first trial.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"
#include "tests/strategies/sampler_test_util.h"

namespace sextant {
namespace {

using ::sextant::testing::At;
using Outcome = Observation::Outcome;

// What a sampler was asked: each request's trial number and history size, and the history of
// the last request.
struct Asked {
  std::vector<int64_t> numbers;
  std::vector<size_t> history_sizes;
  std::vector<Observation> last_history;
};

// Answers {"x": trial_number} and records what it was asked.
class FakeRecordingSampler final : public Sampler {
 public:
  explicit FakeRecordingSampler(Asked* asked) : asked_(asked) {}
  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    asked_->numbers.push_back(request.trial_number);
    asked_->history_sizes.push_back(request.history.size());
    asked_->last_history.assign(request.history.begin(), request.history.end());
    return Params{{"x", static_cast<double>(request.trial_number)}};
  }

 private:
  Asked* asked_;
};

SearchSpace UnitSquare() {
  SearchSpace space;
  for (const char* name : {"x", "y"}) {
    ParamSpec p;
    p.name = name;
    p.min = 0;
    p.max = 1;
    space.params.push_back(p);
  }
  return space;
}

double X(const Params& p, const std::string& name) { return std::get<double>(p.at(name)); }

// A bowl in the unit square with its minimum 0 at (0.3, 0.7).
double Bowl(const Params& p) {
  const double dx = X(p, "x") - 0.3, dy = X(p, "y") - 0.7;
  return dx * dx + dy * dy;
}

double DistanceToOptimum(const Params& p) { return std::sqrt(Bowl(p)); }

// 60 completed observations of the bowl on a grid-like spread over the square.
std::vector<Observation> BowlPriors() {
  std::vector<Observation> priors;
  for (int i = 0; i < 60; ++i) {
    Observation o;
    o.params = {{"x", (i % 8 + 0.5) / 8.0}, {"y", (i * 3 % 7 + 0.5) / 7.0 * 0.98}};
    o.outcome = Outcome::kCompleted;
    o.value = Bowl(o.params);
    priors.push_back(std::move(o));
  }
  return priors;
}

TEST(EnqueuedSamplerTest, RunsTheEnqueuedConfigurationsFirstInOrder) {
  Asked asked;
  std::vector<Params> first = {{{"x", 7.0}}, {{"x", 8.0}}};
  std::unique_ptr<Sampler> s =
      NewEnqueuedSampler(first, std::make_unique<FakeRecordingSampler>(&asked), false);
  EXPECT_EQ(*s->Ask(At(0)), first[0]);
  EXPECT_EQ(*s->Ask(At(1)), first[1]);
  EXPECT_TRUE(asked.numbers.empty()) << "the enqueued trials do not ask the sampler";
  EXPECT_EQ(*s->Ask(At(2)), (Params{{"x", 2.0}}));
  EXPECT_EQ(asked.numbers, std::vector<int64_t>({2}));
}

TEST(EnqueuedSamplerTest, RenumberedSequenceStartsAtItsFirstPointAfterTheQueue) {
  const SearchSpace space = UnitSquare();
  std::unique_ptr<Sampler> plain = NewSobolSampler(space, 3);
  std::unique_ptr<Sampler> queued =
      NewEnqueuedSampler({{{"x", 0.5}, {"y", 0.5}}}, NewSobolSampler(space, 3), true);
  EXPECT_EQ(*queued->Ask(At(1)), *plain->Ask(At(0)));
  EXPECT_EQ(*queued->Ask(At(2)), *plain->Ask(At(1)));
}

TEST(EnqueuedSamplerTest, ResumedRunGetsTheRemainingQueueOnly) {
  Asked asked;
  std::vector<Params> first = {{{"x", 7.0}}, {{"x", 8.0}}, {{"x", 9.0}}};
  std::unique_ptr<Sampler> s =
      NewEnqueuedSampler(first, std::make_unique<FakeRecordingSampler>(&asked), false);
  // A resume asks from the number of trials already stored: 2 were created before.
  EXPECT_EQ(*s->Ask(At(2)), first[2]);
  EXPECT_EQ(*s->Ask(At(3)), (Params{{"x", 3.0}}));
}

TEST(EnqueuedSamplerTest, EmptyQueueReturnsTheSamplerItself) {
  Asked asked;
  auto inner = std::make_unique<FakeRecordingSampler>(&asked);
  Sampler* raw = inner.get();
  EXPECT_EQ(NewEnqueuedSampler({}, std::move(inner), true).get(), raw);
}

TEST(WarmStartedSamplerTest, PutsPriorsAheadOfTheHistoryAndMovesTheTrialNumberOn) {
  Asked asked;
  std::vector<Observation> priors = BowlPriors();
  std::unique_ptr<Sampler> s =
      NewWarmStartedSampler(priors, std::make_unique<FakeRecordingSampler>(&asked));
  std::vector<Observation> history(2);
  history[0].params = {{"x", 0.9}, {"y", 0.9}};
  history[0].outcome = Outcome::kCompleted;
  history[0].value = 1.0;
  history[1].params = {{"x", 0.1}, {"y", 0.1}};  // still running
  ASSERT_TRUE(s->Ask(At(2, history)).ok());
  ASSERT_TRUE(s->Ask(At(2, history)).ok());  // the same request twice gives the same view
  EXPECT_EQ(asked.numbers, std::vector<int64_t>({62, 62}));
  EXPECT_EQ(asked.history_sizes, std::vector<size_t>({62, 62}));
  EXPECT_EQ(asked.last_history[0].params, priors[0].params);
  EXPECT_EQ(asked.last_history[59].value, priors[59].value);
  EXPECT_EQ(asked.last_history[60].params, history[0].params);
  EXPECT_EQ(asked.last_history[61].outcome, Outcome::kPending);
  // Marked, so that the model-based samplers can tell them from this run's own trials.
  EXPECT_TRUE(asked.last_history[0].prior);
  EXPECT_TRUE(asked.last_history[59].prior);
  EXPECT_FALSE(asked.last_history[60].prior);
  EXPECT_FALSE(asked.last_history[61].prior);
}

TEST(WarmStartedSamplerTest, TpeSeededWithPriorsProposesNearThePriorOptimumFromTheFirstTrial) {
  TpeOptions options;
  options.seed = 5;
  std::unique_ptr<Sampler> warm =
      NewWarmStartedSampler(BowlPriors(), NewTpeSampler(UnitSquare(), options));
  std::unique_ptr<Sampler> cold = NewTpeSampler(UnitSquare(), options);
  double warm_sum = 0, cold_sum = 0;
  for (int n = 0; n < 5; ++n) {
    absl::StatusOr<Params> w = warm->Ask(At(n));
    absl::StatusOr<Params> c = cold->Ask(At(n));
    ASSERT_TRUE(w.ok() && c.ok());
    warm_sum += DistanceToOptimum(*w);
    cold_sum += DistanceToOptimum(*c);
  }
  // Cold TPE is still in its start-up design; warm TPE samples from l(x) around the priors' best.
  EXPECT_LT(warm_sum / 5, 0.15);
  EXPECT_GT(cold_sum / 5, 0.2);
}

TEST(WarmStartedSamplerTest, BayesianSeededWithPriorsSkipsItsDesignAndProposesNearTheOptimum) {
  BayesianOptions options;
  options.seed = 2;
  std::unique_ptr<Sampler> warm =
      NewWarmStartedSampler(BowlPriors(), NewBayesianSampler(UnitSquare(), options));
  std::unique_ptr<Sampler> cold = NewBayesianSampler(UnitSquare(), options);
  absl::StatusOr<Params> w = warm->Ask(At(0));
  absl::StatusOr<Params> c = cold->Ask(At(0));
  ASSERT_TRUE(w.ok() && c.ok());
  EXPECT_LT(DistanceToOptimum(*w), 0.05);
  // Cold: the first Sobol point of the design, which knows nothing of the bowl.
  EXPECT_EQ(*c, *NewSobolSampler(UnitSquare(), 2)->Ask(At(0)));
}

// 60 completed observations of the bowl moved by (0.1, -0.1): an earlier run of a related
// problem whose optimum, at (0.4, 0.6), is not this one's.
std::vector<Observation> ShiftedBowlPriors() {
  std::vector<Observation> priors = BowlPriors();
  for (Observation& o : priors) {
    Params at = {{"x", X(o.params, "x") - 0.1}, {"y", X(o.params, "y") + 0.1}};
    o.value = Bowl(at);
  }
  return priors;
}

// Runs `trials` trials one at a time on the bowl and returns the best distance to its optimum
// after each.
std::vector<double> BestDistances(Sampler& sampler, int trials) {
  std::vector<Observation> history;
  std::vector<double> best;
  for (int n = 0; n < trials; ++n) {
    absl::StatusOr<Params> p = sampler.Ask(At(n, history));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) break;
    Observation o;
    o.params = *p;
    o.outcome = Outcome::kCompleted;
    o.value = Bowl(*p);
    history.push_back(o);
    const double d = DistanceToOptimum(*p);
    best.push_back(best.empty() ? d : std::min(best.back(), d));
  }
  return best;
}

TEST(WarmStartedSamplerTest, BayesianSeededWithAShiftedProblemLeavesTheOldOptimumForTheNewOne) {
  BayesianOptions options;
  options.seed = 3;
  std::unique_ptr<Sampler> warm =
      NewWarmStartedSampler(ShiftedBowlPriors(), NewBayesianSampler(UnitSquare(), options));
  const std::vector<double> warm_best = BestDistances(*warm, 12);
  ASSERT_EQ(warm_best.size(), 12u);
  // The first trial goes where the earlier run did best, 0.14 from this optimum...
  EXPECT_GT(warm_best[0], 0.08);
  // ...and this run's own results then move the search to the new optimum, which 60 priors
  // that disagree with them must not hold it away from.
  EXPECT_LT(warm_best[11], 0.02);
  std::unique_ptr<Sampler> cold = NewBayesianSampler(UnitSquare(), options);
  const std::vector<double> cold_best = BestDistances(*cold, 12);
  ASSERT_EQ(cold_best.size(), 12u);
  EXPECT_LT(warm_best[11], cold_best[11]);
}

TEST(WarmStartedSamplerTest, TpeKeepsItsOwnBestTrialInTheGoodSetWhenEveryPriorBeatsIt) {
  // This run's problem has its optimum at (0.8, 0.2), where the priors' bowl is poor; its
  // values all lie above the priors' (a related problem with another offset). Pooled with
  // the priors, every own trial would rank below them and sit in g(x); ranked among
  // themselves, the own best is in l(x) and draws suggestions to it.
  const auto own_value = [](double x, double y) { return 2 + std::hypot(x - 0.8, y - 0.2); };
  std::vector<Observation> history;
  for (int i = 0; i < 12; ++i) {
    Observation o;
    const double x = i == 0 ? 0.8 : (i % 4 + 0.5) / 4.0, y = i == 0 ? 0.2 : (i % 3 + 0.5) / 3.0;
    o.params = {{"x", x}, {"y", y}};
    o.outcome = Outcome::kCompleted;
    o.value = own_value(x, y);
    history.push_back(std::move(o));
  }
  TpeOptions options;
  options.seed = 4;
  std::unique_ptr<Sampler> warm =
      NewWarmStartedSampler(BowlPriors(), NewTpeSampler(UnitSquare(), options));
  int near_own_best = 0;
  for (int n = 12; n < 42; ++n) {
    absl::StatusOr<Params> p = warm->Ask(At(n, history));
    ASSERT_TRUE(p.ok()) << p.status();
    near_own_best += std::hypot(X(*p, "x") - 0.8, X(*p, "y") - 0.2) < 0.1;
  }
  EXPECT_GE(near_own_best, 5);
}

TEST(WarmStartedSamplerTest, NoPriorsReturnsTheSamplerItself) {
  Asked asked;
  auto inner = std::make_unique<FakeRecordingSampler>(&asked);
  Sampler* raw = inner.get();
  EXPECT_EQ(NewWarmStartedSampler({}, std::move(inner)).get(), raw);
}

}  // namespace
}  // namespace sextant
