// Multi-objective successive halving (MO-ASHA, Schmucker et al. 2021) in the ASHA, Hyperband
// and median-stopping schedulers, and the equivalence of OnReport with one-value
// OnReportValues.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategies/internal/rung_ladder.h"
#include "strategies/internal/splitmix.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr double kInf = std::numeric_limits<double>::infinity();

FidelitySpec Fidelity(double min, double max, double eta = 3) {
  FidelitySpec fidelity;
  fidelity.name = "epoch";
  fidelity.min = min;
  fidelity.max = max;
  fidelity.reduction_factor = eta;
  return fidelity;
}

std::unique_ptr<Scheduler> Asha(double min, double max, bool promotion = true) {
  AshaOptions options;
  options.fidelity = Fidelity(min, max);
  options.promotion = promotion;
  return NewAshaScheduler(options);
}

Job StartNext(Scheduler& scheduler, int64_t trial, bool new_allowed = true) {
  const Job job = scheduler.NextJob(new_allowed);
  if (job.kind == Job::Kind::kNew) scheduler.OnStart(trial, job);
  if (job.kind == Job::Kind::kPromote) scheduler.OnStart(job.trial, job);
  return job;
}

Decision ReportAndEnd(Scheduler& scheduler, int64_t trial, double fidelity,
                      const std::vector<double>& values, bool feasible = true) {
  const Decision decision = scheduler.OnReportValues(trial, fidelity, values, feasible);
  scheduler.OnEnd(trial, decision.kind != Decision::Kind::kStop);
  return decision;
}

// Nine points at a rung. The front is trials 1, 2, 3, 5, 6; over it (ranges 8 and 8) the
// crowding distances are 2 and 6: inf; 1 (5, 2): 6/8 + 4/8; 5 (3, 5): 3/8 + 4/8;
// 3 (2, 6): 2/8 + 4/8. Trials 0, 4, 7, 8 are dominated. So the order begins 2, 6, 1, 5, 3
// and the top floor(9/3) = 3 are 2, 6, 1 (by the first objective alone it would be 6, 3, 5).
const std::vector<std::vector<double>> kNinePoints = {{4, 8}, {5, 2}, {9, 1}, {2, 6}, {6, 6},
                                                      {3, 5}, {1, 9}, {8, 4}, {7, 9}};

// Promotes while NextJob() offers promotions; returns the promoted trials in order.
std::vector<int64_t> DrainPromotions(Scheduler& scheduler, double expected_target) {
  std::vector<int64_t> promoted;
  for (Job job = StartNext(scheduler, -1, false); job.kind == Job::Kind::kPromote;
       job = StartNext(scheduler, -1, false)) {
    EXPECT_EQ(job.target, expected_target);
    promoted.push_back(job.trial);
  }
  return promoted;
}

// ---------------------------------------------------------------------------------------------
// ASHA, promotion mode

TEST(MoAshaSchedulerTest, PromotesTheFrontByCrowdingDistance) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 9; ++t) ASSERT_EQ(StartNext(*asha, t).kind, Job::Kind::kNew);
  for (int64_t t = 0; t < 9; ++t) {
    EXPECT_EQ(ReportAndEnd(*asha, t, 1, kNinePoints[t]).kind, Decision::Kind::kPause);
  }
  EXPECT_THAT(DrainPromotions(*asha, 3), ElementsAre(2, 6, 1));
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kWait);
  // At rung 1, floor(3/3) = 1: both extremes have infinite crowding; the lower id wins.
  ReportAndEnd(*asha, 2, 3, {5, 5});
  ReportAndEnd(*asha, 6, 3, {1, 7});
  ReportAndEnd(*asha, 1, 3, {6, 1});
  EXPECT_THAT(DrainPromotions(*asha, 9), ElementsAre(1));
}

TEST(MoAshaSchedulerTest, DominatedPointIsPromotedOnlyAfterTheFront) {
  auto asha = Asha(1, 9);
  // 18 trials, quota 6: the 5 of the front, then the first of rank 1 by crowding distance.
  for (int64_t t = 0; t < 18; ++t) StartNext(*asha, t);
  for (int64_t t = 0; t < 9; ++t) ReportAndEnd(*asha, t, 1, kNinePoints[t]);
  // Trials 9..17 are dominated by every point of the nine above (rank >= 1).
  for (int64_t t = 9; t < 18; ++t) ReportAndEnd(*asha, t, 1, {20.0 + t, 40.0 - t});
  const std::vector<int64_t> promoted = DrainPromotions(*asha, 3);
  ASSERT_EQ(promoted.size(), 6u);
  EXPECT_EQ(std::set<int64_t>(promoted.begin(), promoted.begin() + 5),
            (std::set<int64_t>{1, 2, 3, 5, 6}));
  // Rank 1 is {0, 4, 7, 8}; its extremes in either objective are 0 (4, 8) / 7 (8, 4) and
  // 8 (7, 9) / 7: 0, 7 and 8 are infinite, and of those the lowest id is 0.
  EXPECT_EQ(promoted[5], 0);
}

TEST(MoAshaSchedulerTest, InfeasibleTrialsRankAfterEveryFeasibleOne) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  ReportAndEnd(*asha, 0, 1, {0, 0}, /*feasible=*/false);  // would dominate everything
  ReportAndEnd(*asha, 1, 1, {5, 5});
  ReportAndEnd(*asha, 2, 1, {6, 6});
  EXPECT_THAT(DrainPromotions(*asha, 3), ElementsAre(1));
}

TEST(MoAshaSchedulerTest, OneObjectiveInfeasibleRanksLast) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  ReportAndEnd(*asha, 0, 1, {0}, /*feasible=*/false);
  ReportAndEnd(*asha, 1, 1, {5});
  ReportAndEnd(*asha, 2, 1, {6});
  EXPECT_THAT(DrainPromotions(*asha, 3), ElementsAre(1));
}

// ---------------------------------------------------------------------------------------------
// ASHA, stopping mode

TEST(MoAshaSchedulerTest, StoppingModeStopsTrialsOutsideTheTopByRankAndCrowding) {
  auto asha = Asha(1, 9, false);
  for (int64_t t = 0; t < 8; ++t) StartNext(*asha, t);
  // Fewer than eta entries: no judgement yet.
  EXPECT_EQ(asha->OnReportValues(0, 1, {1, 5}).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->OnReportValues(1, 1, {5, 1}).kind, Decision::Kind::kContinue);
  // Three on one front, quota 1: the extremes 0 and 1 are infinitely crowded; 2 is not.
  const Decision stop = asha->OnReportValues(2, 1, {3, 3});
  EXPECT_EQ(stop.kind, Decision::Kind::kStop);
  EXPECT_THAT(stop.reason, HasSubstr("rung 0"));
  EXPECT_THAT(stop.reason, HasSubstr("non-dominated rank 0"));
  EXPECT_EQ(asha->OnReportValues(3, 1, {6, 6}).kind, Decision::Kind::kStop);      // rank 1
  EXPECT_EQ(asha->OnReportValues(4, 1, {0, 0}).kind, Decision::Kind::kContinue);  // the front
  // Six entries, quota 2: 4 is rank 0, 5 alone is rank 1 (it dominates all others).
  EXPECT_EQ(asha->OnReportValues(5, 1, {0.5, 0.5}).kind, Decision::Kind::kContinue);
  const Decision third = asha->OnReportValues(6, 1, {0.7, 0.7});  // rank 2
  EXPECT_EQ(third.kind, Decision::Kind::kStop);
  EXPECT_THAT(third.reason, HasSubstr("rank 2"));
  const Decision infeasible = asha->OnReportValues(7, 1, {-1, -1}, /*feasible=*/false);
  EXPECT_EQ(infeasible.kind, Decision::Kind::kStop);
  EXPECT_THAT(infeasible.reason, HasSubstr("infeasible"));
  // Values between rungs are not judged, and the top rung never stops.
  EXPECT_EQ(asha->OnReportValues(0, 2, {100, 100}).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->OnReportValues(0, 9, {100, 100}).kind, Decision::Kind::kContinue);
}

TEST(MoAshaSchedulerTest, StoppingModeWithOneObjectiveStopsAnInfeasibleTrial) {
  auto asha = Asha(1, 9, false);
  for (int64_t t = 0; t < 4; ++t) StartNext(*asha, t);
  asha->OnReportValues(0, 1, {2});
  asha->OnReportValues(1, 1, {3});
  const Decision stop = asha->OnReportValues(2, 1, {1}, /*feasible=*/false);
  EXPECT_EQ(stop.kind, Decision::Kind::kStop);
  EXPECT_THAT(stop.reason, HasSubstr("infeasible"));
  EXPECT_EQ(asha->OnReportValues(3, 1, {2}).kind, Decision::Kind::kContinue);  // ties go on
}

// ---------------------------------------------------------------------------------------------
// Hyperband

TEST(MoHyperbandSchedulerTest, BracketRoundPromotesTheFrontByCrowdingDistance) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  std::vector<int64_t> bracket2;
  for (int64_t t = 0; t < 17; ++t) {
    if (StartNext(*hyperband, t).bracket == 2) bracket2.push_back(t);
  }
  ASSERT_EQ(bracket2.size(), 9u);
  // Bracket 2's i-th trial gets the i-th of the nine points.
  for (size_t i = 0; i < 9; ++i) ReportAndEnd(*hyperband, bracket2[i], 1, kNinePoints[i]);
  EXPECT_THAT(DrainPromotions(*hyperband, 3), ElementsAre(bracket2[2], bracket2[6], bracket2[1]));
}

// ---------------------------------------------------------------------------------------------
// ValuesAtBestFidelity

TEST(MoSchedulerTest, ValuesAtBestFidelityReturnsEveryObjective) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  ReportAndEnd(*asha, 0, 1, {1, 2});
  ReportAndEnd(*asha, 1, 1, {3, std::nan("")});  // NaN is +inf
  ReportAndEnd(*asha, 2, 1, {5});                // a missing value is +inf
  EXPECT_THAT(asha->ValuesAtBestFidelity(3),
              ElementsAre(Pair(0, ElementsAre(1, 2)), Pair(1, ElementsAre(3, kInf)),
                          Pair(2, ElementsAre(5, kInf))));
  EXPECT_THAT(asha->ObservationsAtBestFidelity(3), ElementsAre(Pair(0, 1), Pair(1, 3), Pair(2, 5)));
  const Job promote = StartNext(*asha, -1, false);
  ASSERT_EQ(promote.kind, Job::Kind::kPromote);
  ReportAndEnd(*asha, promote.trial, 3, {0.5, 0.25, 7});  // an extra value is dropped
  EXPECT_THAT(asha->ValuesAtBestFidelity(1),
              ElementsAre(Pair(promote.trial, ElementsAre(0.5, 0.25))));
  EXPECT_TRUE(asha->ValuesAtBestFidelity(4).empty());
}

TEST(MoSchedulerTest, HyperbandAndMedianReturnVectorsToo) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  const Job job = StartNext(*hyperband, 0);
  ReportAndEnd(*hyperband, 0, job.target, {1, 2});
  EXPECT_THAT(hyperband->ValuesAtBestFidelity(1), ElementsAre(Pair(0, ElementsAre(1, 2))));

  MedianStoppingOptions options;
  options.fidelity = Fidelity(1, 9);
  auto median = NewMedianStoppingScheduler(options);
  StartNext(*median, 0);
  median->OnReportValues(0, 3, {4, 5});
  EXPECT_THAT(median->ValuesAtBestFidelity(1), ElementsAre(Pair(0, ElementsAre(4, 5))));
}

// ---------------------------------------------------------------------------------------------
// Median stopping

TEST(MoMedianStoppingSchedulerTest, JudgesTheFirstObjectiveOnly) {
  MedianStoppingOptions options;
  options.fidelity = Fidelity(1, 10);
  auto median = NewMedianStoppingScheduler(options);
  for (int64_t t = 0; t < 3; ++t) {
    StartNext(*median, t);
    ASSERT_EQ(median->OnReportValues(t, 1, {2.0 * (t + 1), 100}).kind, Decision::Kind::kContinue);
  }
  // The others' averages are 2, 4, 6 (first objective): 5 is worse however good the second.
  StartNext(*median, 3);
  EXPECT_EQ(median->OnReportValues(3, 1, {5, -100}).kind, Decision::Kind::kStop);
  StartNext(*median, 4);
  EXPECT_EQ(median->OnReportValues(4, 1, {3, 1000}).kind, Decision::Kind::kContinue);
  StartNext(*median, 5);
  EXPECT_EQ(median->OnReportValues(5, 1, {0, 0}, /*feasible=*/false).kind, Decision::Kind::kStop);
}

// ---------------------------------------------------------------------------------------------
// RungLadder

TEST(MoRungLadderTest, OutsideTopAndParetoRankFollowTheRungOrder) {
  internal::RungLadder ladder({1, 3, 9}, 3);
  for (int64_t t = 0; t < 9; ++t) {
    ladder.StartNew(t, 1);
    ladder.Record(t, 1, kNinePoints[t]);
  }
  EXPECT_EQ(ladder.objectives(), 2);
  std::vector<int64_t> outside;
  for (int64_t t = 0; t < 9; ++t) {
    if (ladder.OutsideTop(0, t)) outside.push_back(t);
  }
  EXPECT_THAT(outside, ElementsAre(0, 3, 4, 5, 7, 8));
  EXPECT_EQ(ladder.ParetoRank(0, 2), 0);
  EXPECT_EQ(ladder.ParetoRank(0, 0), 1);
  EXPECT_EQ(ladder.ParetoRank(1, 0), -1);  // nothing recorded there
  EXPECT_FALSE(ladder.OutsideTop(1, 0));
}

// ---------------------------------------------------------------------------------------------
// Simulated runs: W workers, reports at every rung fidelity up to the target.

// Up to three conflicting objectives: the trial's position x trades the first two off, its
// quality q shifts all, and a gap shrinks with fidelity.
std::vector<double> Objectives(int64_t trial, double fidelity, int objectives) {
  const uint64_t bits = internal::SplitMix64(static_cast<uint64_t>(trial));
  const double x = internal::UnitFromBits(bits);
  const double q = internal::UnitFromBits(internal::SplitMix64(bits));
  const double gap = internal::UnitFromBits(internal::SplitMix64(bits + 1)) / fidelity;
  std::vector<double> values = {x + q + gap, (1 - x) + q + gap, std::abs(x - 0.5) + q + gap};
  values.resize(objectives);
  return values;
}

struct SimulationResult {
  int created = 0;
  int ended = 0;
  int stopped = 0;
  int still_running = 0;
  std::map<double, int> reports;  // fidelity -> reports there
  std::vector<std::string> log;   // every job and decision, in order
};

// Runs `scheduler` with `workers` workers until kDone. The next report comes from the running
// trial chosen by a fixed pseudo-random stream; a trial reports at each fidelity of `grid` in
// turn, a promoted one from where it paused. `one_value` reports through OnReport().
SimulationResult Simulate(Scheduler& scheduler, const std::vector<double>& grid, int max_trials,
                          int workers, int objectives, bool one_value = false) {
  struct Running {
    int64_t trial;
    double target;
  };
  SimulationResult result;
  std::vector<Running> running;
  std::map<int64_t, size_t> next;  // trial -> index into grid of its next report
  uint64_t stream = 12345;
  for (int guard = 0; guard < 1000000; ++guard) {
    bool done = false;
    while (static_cast<int>(running.size()) < workers) {
      const Job job = scheduler.NextJob(result.created < max_trials);
      result.log.push_back(absl::StrCat("job ", static_cast<int>(job.kind), " ", job.trial, " ",
                                        job.target, " ", job.bracket));
      if (job.kind == Job::Kind::kWait) break;
      if (job.kind == Job::Kind::kDone) {
        done = true;
        break;
      }
      const int64_t trial = job.kind == Job::Kind::kNew ? result.created++ : job.trial;
      scheduler.OnStart(trial, job);
      running.push_back(Running{trial, job.target});
    }
    if (done) break;
    if (running.empty()) {
      ADD_FAILURE() << "kWait with nothing running";
      break;
    }
    stream = internal::SplitMix64(stream);
    const size_t pick = stream % running.size();
    const Running run = running[pick];
    const double fidelity = grid[next[run.trial]++];
    ++result.reports[fidelity];
    const std::vector<double> values = Objectives(run.trial, fidelity, objectives);
    const Decision decision = one_value ? scheduler.OnReport(run.trial, fidelity, values.front())
                                        : scheduler.OnReportValues(run.trial, fidelity, values);
    result.log.push_back(absl::StrCat("report ", run.trial, " ", fidelity, " ",
                                      static_cast<int>(decision.kind), " ", decision.reason));
    const bool at_end = fidelity >= run.target || next[run.trial] >= grid.size();
    if (decision.kind != Decision::Kind::kContinue || at_end) {
      scheduler.OnEnd(run.trial, decision.kind != Decision::Kind::kStop);
      ++result.ended;
      result.stopped += decision.kind == Decision::Kind::kStop;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }
  result.still_running = static_cast<int>(running.size());
  return result;
}

void ExpectEveryTrialDecided(const SimulationResult& result, int max_trials) {
  EXPECT_EQ(result.created, max_trials);
  EXPECT_EQ(result.still_running, 0);
  EXPECT_GE(result.ended, result.created);  // promoted trials end once per attempt
}

TEST(MoSchedulerSimulationTest, AshaPromotionModeWithTwoObjectivesDecidesEveryTrial) {
  auto asha = Asha(1, 27);
  const SimulationResult result = Simulate(*asha, {1, 3, 9, 27}, 1000, 8, 2);
  ExpectEveryTrialDecided(result, 1000);
  EXPECT_EQ(result.stopped, 0);
  EXPECT_EQ(result.reports.at(1), 1000);
  EXPECT_GE(result.reports.at(3), 1000 / 3);
  EXPECT_GE(result.reports.at(27), 1000 / 27);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kDone);
  const auto at_best = asha->ValuesAtBestFidelity(1);
  ASSERT_FALSE(at_best.empty());
  for (const auto& [trial, values] : at_best) EXPECT_EQ(values.size(), 2u);
}

TEST(MoSchedulerSimulationTest, AshaStoppingModeWithTwoObjectivesDecidesEveryTrial) {
  auto asha = Asha(1, 27, false);
  const SimulationResult result = Simulate(*asha, {1, 3, 9, 27}, 1000, 8, 2);
  ExpectEveryTrialDecided(result, 1000);
  EXPECT_EQ(result.ended, 1000);
  EXPECT_GT(result.stopped, 500);
  EXPECT_GT(result.reports.at(27), 0);
}

TEST(MoSchedulerSimulationTest, HyperbandWithTwoObjectivesDecidesEveryTrial) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 27, 3));
  const SimulationResult result = Simulate(*hyperband, {1, 3, 9, 27}, 1000, 8, 2);
  ExpectEveryTrialDecided(result, 1000);
  EXPECT_EQ(result.stopped, 0);
  EXPECT_GT(result.reports.at(27), 0);
  EXPECT_EQ(hyperband->NextJob(false).kind, Job::Kind::kDone);
  const auto at_27 = hyperband->ValuesAtBestFidelity(1);
  ASSERT_FALSE(at_27.empty());
  for (const auto& [trial, values] : at_27) EXPECT_EQ(values.size(), 2u);
}

TEST(MoSchedulerSimulationTest, AshaWithThreeObjectivesDecidesEveryTrial) {
  auto asha = Asha(1, 27);
  const SimulationResult result = Simulate(*asha, {1, 3, 9, 27}, 1000, 8, 3);
  ExpectEveryTrialDecided(result, 1000);
}

// ---------------------------------------------------------------------------------------------
// One value through OnReportValues is OnReport.

TEST(MoSchedulerTest, OneValueOnReportValuesIsOnReport) {
  const auto make = [](int which) -> std::unique_ptr<Scheduler> {
    MedianStoppingOptions median;
    median.fidelity = Fidelity(1, 27);
    switch (which) {
      case 0:
        return Asha(1, 27);
      case 1:
        return Asha(1, 27, false);
      case 2:
        return NewHyperbandScheduler(Fidelity(1, 27, 3));
      default:
        return NewMedianStoppingScheduler(median);
    }
  };
  for (int which = 0; which < 4; ++which) {
    auto by_report = make(which);
    auto by_values = make(which);
    const SimulationResult a = Simulate(*by_report, {1, 3, 9, 27}, 300, 5, 1, true);
    const SimulationResult b = Simulate(*by_values, {1, 3, 9, 27}, 300, 5, 1, false);
    EXPECT_EQ(a.log, b.log) << "scheduler " << which;
    EXPECT_EQ(by_report->ObservationsAtBestFidelity(10), by_values->ObservationsAtBestFidelity(10));
  }
}

}  // namespace
}  // namespace sextant
