#include "orchestrator/core/objectives.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ExperimentSpec Spec(const std::string& objectives, const std::string& constraints = "") {
  LoadResult r = LoadExperimentFromString(
      "name: o\n" + objectives + constraints +
          "parameters: {x: {type: float, min: 0, max: 1}}\ntrial: {command: [run]}\n"
          "resources: {provider: simulated, pools: [{name: p, region: us-east-1, instance: "
          "gpu.1x}]}\n",
      "o.yaml");
  EXPECT_TRUE(r.ok()) << r.errors[0].ToString();
  return r.spec;
}

TEST(ObjectiveSetTest, BuiltInMetricsComeFromTheLedgerAndTheClock) {
  ObjectiveSet o(
      Spec("objectives: [{metric: acc, goal: maximize}, {metric: cost}, "
           "{metric: trial_seconds}]\n"));
  ASSERT_TRUE(o.multi());
  TrialEvaluation e = o.Evaluate({{"acc", 0.9}}, 1.25, 30);
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_THAT(e.values, ElementsAre(0.9, 1.25, 30));
  EXPECT_THAT(o.Minimised(e.values), ElementsAre(-0.9, 1.25, 30));
  // A trial that prints its own `cost` overrides nothing: what it prints is what it reported.
  EXPECT_THAT(o.Evaluate({{"acc", 0.9}, {"cost", 7}}, 1.25, 30).values, ElementsAre(0.9, 7, 30));
}

TEST(ObjectiveSetTest, MissingOrNonFiniteObjectiveFailsTheTrialNamingTheMetric) {
  ObjectiveSet o(Spec("objectives: [{metric: acc, goal: maximize}, {metric: loss}]\n"));
  EXPECT_THAT(o.Evaluate({{"acc", 0.9}}, 0, 0).error,
              HasSubstr("never reported the objective metric 'loss'"));
  EXPECT_THAT(o.Evaluate({{"acc", std::nan("")}, {"loss", 1}}, 0, 0).error,
              HasSubstr("the objective metric 'acc' is nan; it must be a finite number"));
  EXPECT_THAT(
      o.Evaluate({{"acc", 1}, {"loss", -std::numeric_limits<double>::infinity()}}, 0, 0).error,
      HasSubstr("'loss' is -inf"));
}

TEST(ObjectiveSetTest, ConstraintsGiveViolationsAndAMissingMetricIsInfeasible) {
  ObjectiveSet o(
      Spec("objective: {metric: loss}\n",
           "constraints: [{metric: latency_ms, max: 20}, {metric: mb, min: 1, max: 50}]\n"));
  TrialEvaluation ok = o.Evaluate({{"loss", 1}, {"latency_ms", 12}, {"mb", 3}}, 0, 0);
  EXPECT_TRUE(ok.feasible());
  EXPECT_THAT(ok.violations, ElementsAre(-8, -2));
  TrialEvaluation slow = o.Evaluate({{"loss", 1}, {"latency_ms", 25}, {"mb", 0.5}}, 0, 0);
  EXPECT_FALSE(slow.feasible());
  EXPECT_THAT(slow.violations, ElementsAre(5, 0.5));
  TrialEvaluation missing = o.Evaluate({{"loss", 1}, {"latency_ms", 5}}, 0, 0);
  EXPECT_TRUE(missing.ok());
  EXPECT_FALSE(missing.feasible());
  EXPECT_THAT(missing.missing_constraints, ElementsAre("mb"));
  EXPECT_TRUE(std::isinf(missing.violations[1]));
  Observation obs = o.ToObservation({}, Observation::Outcome::kCompleted, missing, 2.5);
  EXPECT_FALSE(Feasible(obs));
  EXPECT_EQ(obs.value, 1);
  EXPECT_EQ(obs.cost, 2.5);
}

TEST(ObjectiveSetTest, ReferencePointIsGivenOrTheWorstPlusTenPercentOfTheRange) {
  ObjectiveSet o(
      Spec("objectives: [{metric: acc, goal: maximize, reference: 0.5}, {metric: loss}]\n"));
  bool derived = false;
  // Minimised points: acc negated.
  std::vector<double> ref = ReferencePoint(o, {{-0.9, 1}, {-0.8, 3}}, &derived);
  EXPECT_TRUE(derived);
  ASSERT_EQ(ref.size(), 2u);
  EXPECT_DOUBLE_EQ(ref[0], -0.5);
  EXPECT_DOUBLE_EQ(ref[1], 3.2);
  EXPECT_DOUBLE_EQ(ReferencePoint(o, {{-0.9, 1}}, &derived)[1], 2);  // no range: worst + 1
}

TEST(ObjectiveSetTest, BudgetUsedIsSpendOverTheCapElseTrialsOverMaxTrials) {
  v1::ExperimentSpec spec = Spec("objective: {metric: loss}\n");
  spec.mutable_search()->set_max_trials(20);
  EXPECT_DOUBLE_EQ(BudgetUsed(spec, 3, 5), 0.25);
  spec.mutable_budget()->set_max_cost(12);
  EXPECT_DOUBLE_EQ(BudgetUsed(spec, 3, 5), 0.25);
  EXPECT_DOUBLE_EQ(BudgetUsed(spec, 30, 5), 1);
}

}  // namespace
}  // namespace sextant
