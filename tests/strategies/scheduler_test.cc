#include "strategies/scheduler.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategies/internal/rung_ladder.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

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

// Asks for a job and starts it as `trial`; returns the job.
Job StartNext(Scheduler& scheduler, int64_t trial, bool new_allowed = true) {
  const Job job = scheduler.NextJob(new_allowed);
  if (job.kind == Job::Kind::kNew) scheduler.OnStart(trial, job);
  if (job.kind == Job::Kind::kPromote) scheduler.OnStart(job.trial, job);
  return job;
}

// Reports `value` at `fidelity`; when the decision ends the attempt (pause, stop, or the top
// rung), ends it as the worker would.
Decision ReportAndEnd(Scheduler& scheduler, int64_t trial, double fidelity, double value) {
  const Decision decision = scheduler.OnReport(trial, fidelity, value);
  scheduler.OnEnd(trial, decision.kind != Decision::Kind::kStop);
  return decision;
}

// ---------------------------------------------------------------------------------------------
// HyperbandBrackets

TEST(HyperbandBracketsTest, MatchesThePaperTableForR81Eta3) {
  const std::vector<BracketPlan> brackets = HyperbandBrackets(Fidelity(1, 81, 3));
  ASSERT_EQ(brackets.size(), 5u);
  EXPECT_EQ(brackets[0].s, 4);
  EXPECT_THAT(brackets[0].n, ElementsAre(81, 27, 9, 3, 1));
  EXPECT_THAT(brackets[0].r, ElementsAre(1, 3, 9, 27, 81));
  EXPECT_EQ(brackets[1].s, 3);
  EXPECT_THAT(brackets[1].n, ElementsAre(34, 11, 3, 1));
  EXPECT_THAT(brackets[1].r, ElementsAre(3, 9, 27, 81));
  EXPECT_EQ(brackets[2].s, 2);
  EXPECT_THAT(brackets[2].n, ElementsAre(15, 5, 1));
  EXPECT_THAT(brackets[2].r, ElementsAre(9, 27, 81));
  EXPECT_EQ(brackets[3].s, 1);
  EXPECT_THAT(brackets[3].n, ElementsAre(8, 2));
  EXPECT_THAT(brackets[3].r, ElementsAre(27, 81));
  EXPECT_EQ(brackets[4].s, 0);
  EXPECT_THAT(brackets[4].n, ElementsAre(5));
  EXPECT_THAT(brackets[4].r, ElementsAre(81));
}

TEST(HyperbandBracketsTest, BudgetsAreFractionsOfMaxWhenRatioIsNotAPowerOfEta) {
  const std::vector<BracketPlan> brackets = HyperbandBrackets(Fidelity(1, 100, 3));
  ASSERT_EQ(brackets.size(), 5u);  // floor(log_3 100) = 4
  EXPECT_THAT(brackets[0].n, ElementsAre(81, 27, 9, 3, 1));
  EXPECT_DOUBLE_EQ(brackets[0].r.front(), 100.0 / 81);
  for (const BracketPlan& plan : brackets) EXPECT_EQ(plan.r.back(), 100);
}

TEST(HyperbandBracketsTest, SingleBracketWhenRangeIsBelowEta) {
  const std::vector<BracketPlan> brackets = HyperbandBrackets(Fidelity(1, 2, 3));
  ASSERT_EQ(brackets.size(), 1u);
  EXPECT_THAT(brackets[0].n, ElementsAre(1));
  EXPECT_THAT(brackets[0].r, ElementsAre(2));
}

// ---------------------------------------------------------------------------------------------
// Rungs

TEST(AshaRungsTest, AreMinTimesPowersOfEtaBelowMaxThenMax) {
  EXPECT_THAT(internal::AshaRungs(Fidelity(1, 27)), ElementsAre(1, 3, 9, 27));
  EXPECT_THAT(internal::AshaRungs(Fidelity(1, 30)), ElementsAre(1, 3, 9, 27, 30));
  EXPECT_THAT(internal::AshaRungs(Fidelity(2, 5)), ElementsAre(2, 5));
  // 0.1 * 3^3 is 2.7000000000000006; it is the max, not a rung below it.
  EXPECT_EQ(internal::AshaRungs(Fidelity(0.1, 2.7)).size(), 4u);
}

// ---------------------------------------------------------------------------------------------
// ASHA, promotion mode

TEST(AshaSchedulerTest, NewTrialsRunToTheFirstRung) {
  auto asha = Asha(1, 9);
  const Job job = asha->NextJob(true);
  EXPECT_EQ(job.kind, Job::Kind::kNew);
  EXPECT_EQ(job.target, 1);
  EXPECT_EQ(job.bracket, 0);
}

TEST(AshaSchedulerTest, PromotesTopThirdAtEachRung) {
  auto asha = Asha(1, 9);  // rungs 1, 3, 9
  const std::vector<double> values = {5, 3, 8, 1, 9, 2, 7, 4, 6};
  for (int64_t t = 0; t < 9; ++t) ASSERT_EQ(StartNext(*asha, t).kind, Job::Kind::kNew);
  for (int64_t t = 0; t < 9; ++t) {
    EXPECT_EQ(ReportAndEnd(*asha, t, 1, values[t]).kind, Decision::Kind::kPause);
  }

  // Exactly the three best (values 1, 2, 3: trials 3, 5, 1), best first.
  std::vector<int64_t> promoted;
  for (Job job = StartNext(*asha, -1, false); job.kind == Job::Kind::kPromote;
       job = StartNext(*asha, -1, false)) {
    EXPECT_EQ(job.target, 3);
    promoted.push_back(job.trial);
  }
  EXPECT_THAT(promoted, ElementsAre(3, 5, 1));
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kWait);

  EXPECT_EQ(ReportAndEnd(*asha, 3, 3, 0.5).kind, Decision::Kind::kPause);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kWait);  // 1 at rung 1: floor(1/3) = 0
  EXPECT_EQ(ReportAndEnd(*asha, 5, 3, 0.2).kind, Decision::Kind::kPause);
  EXPECT_EQ(ReportAndEnd(*asha, 1, 3, 0.9).kind, Decision::Kind::kPause);

  // Then exactly one of those three, the best at rung 1, to the top.
  const Job top = StartNext(*asha, -1, false);
  EXPECT_EQ(top.kind, Job::Kind::kPromote);
  EXPECT_EQ(top.trial, 5);
  EXPECT_EQ(top.target, 9);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kWait);
  EXPECT_EQ(ReportAndEnd(*asha, 5, 9, 0.1).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kDone);
}

TEST(AshaSchedulerTest, PromotesAsynchronouslyOnceARungHoldsEta) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 2; ++t) {
    StartNext(*asha, t);
    ReportAndEnd(*asha, t, 1, 10.0 - t);
  }
  EXPECT_EQ(asha->NextJob(true).kind, Job::Kind::kNew);  // floor(2/3) = 0
  StartNext(*asha, 2);
  ReportAndEnd(*asha, 2, 1, 4);
  const Job job = asha->NextJob(true);
  EXPECT_EQ(job.kind, Job::Kind::kPromote);
  EXPECT_EQ(job.trial, 2);
}

TEST(AshaSchedulerTest, PrefersTheHighestRung) {
  auto asha = Asha(1, 27);  // rungs 1, 3, 9, 27
  for (int64_t t = 0; t < 9; ++t) StartNext(*asha, t);
  for (int64_t t = 0; t < 9; ++t) ReportAndEnd(*asha, t, 1, static_cast<double>(t));
  for (int i = 0; i < 3; ++i) StartNext(*asha, -1, false);  // 0, 1, 2 to rung 1
  ASSERT_EQ(StartNext(*asha, 9).kind, Job::Kind::kNew);
  for (int64_t t = 0; t < 3; ++t) ReportAndEnd(*asha, t, 3, static_cast<double>(t));
  ReportAndEnd(*asha, 9, 1, -1);
  // Trial 0 may go from rung 1 to 9, and trial 9 (top 3 of 10 at rung 0) from rung 0 to 3.
  const Job job = asha->NextJob(true);
  EXPECT_EQ(job.kind, Job::Kind::kPromote);
  EXPECT_EQ(job.trial, 0);
  EXPECT_EQ(job.target, 9);
  asha->OnStart(job.trial, job);
  const Job second = asha->NextJob(true);
  EXPECT_EQ(second.trial, 9);
  EXPECT_EQ(second.target, 3);
}

TEST(AshaSchedulerTest, NextJobChangesNothingUntilOnStart) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  for (int64_t t = 0; t < 3; ++t) ReportAndEnd(*asha, t, 1, t);
  const Job first = asha->NextJob(true);
  const Job again = asha->NextJob(true);
  EXPECT_EQ(first.kind, Job::Kind::kPromote);
  EXPECT_EQ(again.kind, Job::Kind::kPromote);
  EXPECT_EQ(first.trial, again.trial);
  asha->OnStart(first.trial, first);
  EXPECT_EQ(asha->NextJob(true).kind, Job::Kind::kNew);
}

TEST(AshaSchedulerTest, RecordsTheFirstReportAtOrBeyondEachRungUpToTheTarget) {
  auto asha = Asha(1, 9);
  StartNext(*asha, 7);
  EXPECT_EQ(asha->OnReport(7, 0.5, 100).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->OnReport(7, 4, 2).kind, Decision::Kind::kPause);  // beyond rung 1 (3): ignored
  EXPECT_EQ(asha->OnReport(7, 5, 1).kind, Decision::Kind::kPause);
  asha->OnEnd(7, true);
  EXPECT_THAT(asha->ObservationsAtBestFidelity(1), ElementsAre(Pair(7, 2)));
}

TEST(AshaSchedulerTest, FailedTrialIsNeverPromoted) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  asha->OnReport(0, 1, 0);  // the best, but then lost
  asha->OnEnd(0, false);
  ReportAndEnd(*asha, 1, 1, 1);
  ReportAndEnd(*asha, 2, 1, 2);
  // The top third of rung 0 is trial 0 alone, and it cannot resume.
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kDone);
}

TEST(AshaSchedulerTest, TrialThatEndsWithoutReachingItsRungIsNotPaused) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  asha->OnEnd(0, true);  // exited "normally" without any report
  ReportAndEnd(*asha, 1, 1, 5);
  ReportAndEnd(*asha, 2, 1, 6);
  StartNext(*asha, 3);
  ReportAndEnd(*asha, 3, 1, 7);
  const Job job = asha->NextJob(false);  // 3 values: top 1 is trial 1
  EXPECT_EQ(job.kind, Job::Kind::kPromote);
  EXPECT_EQ(job.trial, 1);
}

TEST(AshaSchedulerTest, WaitsWhileRunningThenDone) {
  auto asha = Asha(1, 9);
  StartNext(*asha, 0);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kWait);
  ReportAndEnd(*asha, 0, 1, 3);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kDone);
}

TEST(AshaSchedulerTest, ObservationsComeFromTheHighestRungWithEnoughValues) {
  auto asha = Asha(1, 9);
  for (int64_t t = 0; t < 6; ++t) StartNext(*asha, t);
  for (int64_t t = 0; t < 6; ++t) ReportAndEnd(*asha, t, 1, 10 + t);
  for (int i = 0; i < 2; ++i) StartNext(*asha, -1, false);
  ReportAndEnd(*asha, 0, 3, 1);
  ReportAndEnd(*asha, 1, 3, 2);
  EXPECT_THAT(asha->ObservationsAtBestFidelity(2), ElementsAre(Pair(0, 1), Pair(1, 2)));
  EXPECT_EQ(asha->ObservationsAtBestFidelity(3).size(), 6u);
  EXPECT_TRUE(asha->ObservationsAtBestFidelity(7).empty());
}

TEST(AshaSchedulerTest, DescribeNamesModeAndRungs) {
  EXPECT_THAT(Asha(1, 9)->Describe(), HasSubstr("promotion"));
  EXPECT_THAT(Asha(1, 9)->Describe(), HasSubstr("1, 3, 9"));
  EXPECT_THAT(Asha(1, 9, false)->Describe(), HasSubstr("stopping"));
}

// ---------------------------------------------------------------------------------------------
// ASHA, stopping mode

TEST(AshaSchedulerTest, StoppingModeRunsNewTrialsToMax) {
  auto asha = Asha(1, 9, false);
  const Job job = asha->NextJob(true);
  EXPECT_EQ(job.kind, Job::Kind::kNew);
  EXPECT_EQ(job.target, 9);
}

TEST(AshaSchedulerTest, StoppingModeStopsTrialsOutsideTheTopThird) {
  auto asha = Asha(1, 9, false);
  for (int64_t t = 0; t < 5; ++t) StartNext(*asha, t);
  // Fewer than eta values at rung 0: no judgement yet.
  EXPECT_EQ(asha->OnReport(0, 1, 2).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->OnReport(1, 1, 5).kind, Decision::Kind::kContinue);
  // Three values: the cutoff is the best one, 2.
  const Decision stop = asha->OnReport(2, 1, 3);
  EXPECT_EQ(stop.kind, Decision::Kind::kStop);
  EXPECT_THAT(stop.reason, HasSubstr("rung 0"));
  EXPECT_THAT(stop.reason, HasSubstr("cutoff 2"));
  EXPECT_EQ(asha->OnReport(3, 1, 1).kind, Decision::Kind::kContinue);  // the new best
  EXPECT_EQ(asha->OnReport(4, 1, 2).kind, Decision::Kind::kStop);      // cutoff now 1
  // Values between rungs are not judged, and the top rung never stops.
  EXPECT_EQ(asha->OnReport(0, 2, 100).kind, Decision::Kind::kContinue);
  EXPECT_EQ(asha->OnReport(0, 9, 100).kind, Decision::Kind::kContinue);
}

TEST(AshaSchedulerTest, StoppingModeKeepsAValueEqualToTheCutoff) {
  auto asha = Asha(1, 9, false);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  asha->OnReport(0, 1, 4);
  asha->OnReport(1, 1, 4);
  EXPECT_EQ(asha->OnReport(2, 1, 4).kind, Decision::Kind::kContinue);
}

TEST(AshaSchedulerTest, StoppingModeNeverPromotes) {
  auto asha = Asha(1, 9, false);
  for (int64_t t = 0; t < 3; ++t) StartNext(*asha, t);
  for (int64_t t = 0; t < 3; ++t) ReportAndEnd(*asha, t, 9, t);
  EXPECT_EQ(asha->NextJob(false).kind, Job::Kind::kDone);
}

// ---------------------------------------------------------------------------------------------
// Hyperband

TEST(HyperbandSchedulerTest, AssignsNewTrialsToBracketsInProportionToN) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 81, 3));
  const std::map<int, double> first_rung = {{4, 1}, {3, 3}, {2, 9}, {1, 27}, {0, 81}};
  std::map<int, int> count;
  for (int64_t t = 0; t < 143; ++t) {  // 81 + 34 + 15 + 8 + 5
    const Job job = StartNext(*hyperband, t);
    ASSERT_EQ(job.kind, Job::Kind::kNew);
    if (t == 0) {
      EXPECT_EQ(job.bracket, 4);
    }
    EXPECT_EQ(job.target, first_rung.at(job.bracket));
    ++count[job.bracket];
  }
  EXPECT_THAT(count, ElementsAre(Pair(0, 5), Pair(1, 8), Pair(2, 15), Pair(3, 34), Pair(4, 81)));
}

// Runs the first round of every bracket with all trials started before any reports, so that
// rungs fill before any promotion, and returns bracket -> trials that ran at each rung.
std::map<int, std::vector<int>> RunOneRoundOfEachBracket(Scheduler& hyperband, int total) {
  std::map<int, std::vector<int>> reached;
  std::map<int64_t, int> bracket_of;
  std::vector<Job> running;
  const std::vector<BracketPlan> plans = HyperbandBrackets(Fidelity(1, 9, 3));
  for (int64_t t = 0; t < total; ++t) {
    Job job = StartNext(hyperband, t);
    job.trial = t;
    bracket_of[t] = job.bracket;
    running.push_back(job);
  }
  while (!running.empty()) {
    std::vector<Job> next;
    for (const Job& job : running) {
      const int bracket = bracket_of[job.trial];
      for (const BracketPlan& plan : plans) {
        if (plan.s != bracket) continue;
        auto& counts = reached[bracket];
        counts.resize(plan.r.size());
        for (size_t i = 0; i < plan.r.size(); ++i) counts[i] += plan.r[i] == job.target;
      }
      // Trial t's value is t at every fidelity, so lower ids are better.
      ReportAndEnd(hyperband, job.trial, job.target, static_cast<double>(job.trial));
    }
    for (Job job = StartNext(hyperband, -1, false); job.kind == Job::Kind::kPromote;
         job = StartNext(hyperband, -1, false)) {
      next.push_back(job);
    }
    running = next;
  }
  return reached;
}

TEST(HyperbandSchedulerTest, CompleteRoundPromotesExactlyThePapersN) {
  // min 1, max 9, eta 3: s=2: n 9, 3, 1 at 1, 3, 9; s=1: n 5, 1 at 3, 9; s=0: n 3 at 9.
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  const std::map<int, std::vector<int>> reached = RunOneRoundOfEachBracket(*hyperband, 17);
  EXPECT_THAT(reached, ElementsAre(Pair(0, ElementsAre(3)), Pair(1, ElementsAre(5, 1)),
                                   Pair(2, ElementsAre(9, 3, 1))));
  EXPECT_EQ(hyperband->NextJob(false).kind, Job::Kind::kDone);
}

TEST(HyperbandSchedulerTest, RoundsRankTrialsOnlyAgainstTheirOwnRound) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  RunOneRoundOfEachBracket(*hyperband, 17);
  // The 18th new trial opens the second round of bracket 2. It beats everything in round 1,
  // but alone in its round, floor(1/3) = 0 trials are promoted.
  const Job job = StartNext(*hyperband, 100);
  ASSERT_EQ(job.kind, Job::Kind::kNew);
  EXPECT_EQ(job.bracket, 2);
  EXPECT_EQ(ReportAndEnd(*hyperband, 100, 1, -5).kind, Decision::Kind::kPause);
  EXPECT_EQ(hyperband->NextJob(false).kind, Job::Kind::kDone);
}

TEST(HyperbandSchedulerTest, PausesBelowTheTopAndContinuesAtIt) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  const Job job = StartNext(*hyperband, 0);
  ASSERT_EQ(job.bracket, 2);
  EXPECT_EQ(hyperband->OnReport(0, 0.5, 3).kind, Decision::Kind::kContinue);
  const Decision pause = hyperband->OnReport(0, 1, 3);
  EXPECT_EQ(pause.kind, Decision::Kind::kPause);
  EXPECT_THAT(pause.reason, HasSubstr("rung 0"));
}

TEST(HyperbandSchedulerTest, ObservationsPoolEqualBudgetsAcrossBrackets) {
  auto hyperband = NewHyperbandScheduler(Fidelity(1, 9, 3));
  std::map<int, std::vector<int64_t>> by_bracket;
  for (int64_t t = 0; t < 17; ++t) by_bracket[StartNext(*hyperband, t).bracket].push_back(t);
  for (int64_t t : by_bracket[2]) ReportAndEnd(*hyperband, t, 1, static_cast<double>(t));
  const Job promote = StartNext(*hyperband, -1, false);
  ASSERT_EQ(promote.kind, Job::Kind::kPromote);
  ASSERT_EQ(promote.bracket, 2);
  ASSERT_EQ(promote.target, 3);
  ReportAndEnd(*hyperband, promote.trial, 3, 0);
  // Bracket 1 starts at 3, the budget of bracket 2's second rung.
  for (int64_t t : by_bracket[1]) ReportAndEnd(*hyperband, t, 3, 1);
  const std::map<int64_t, double> at_3 = hyperband->ObservationsAtBestFidelity(6);
  EXPECT_EQ(at_3.size(), 6u);  // 5 from bracket 1, 1 from bracket 2
  EXPECT_EQ(at_3.at(promote.trial), 0);
}

TEST(HyperbandSchedulerTest, DescribeListsTheBrackets) {
  EXPECT_THAT(NewHyperbandScheduler(Fidelity(1, 9, 3))->Describe(),
              HasSubstr("[s=2 n=9, 3, 1 r=1, 3, 9]"));
}

// ---------------------------------------------------------------------------------------------
// Median stopping

std::unique_ptr<Scheduler> Median(int min_trials = 3, double grace = 0) {
  MedianStoppingOptions options;
  options.fidelity = Fidelity(1, 10);
  options.min_trials = min_trials;
  options.grace = grace;
  return NewMedianStoppingScheduler(options);
}

// Starts trials 0..count-1 and has each report values[t][i] at fidelity i + 1.
void RunCurves(Scheduler& scheduler, const std::vector<std::vector<double>>& values) {
  for (int64_t t = 0; t < static_cast<int64_t>(values.size()); ++t) {
    StartNext(scheduler, t);
    for (size_t i = 0; i < values[t].size(); ++i) {
      ASSERT_EQ(scheduler.OnReport(t, static_cast<double>(i + 1), values[t][i]).kind,
                Decision::Kind::kContinue);
    }
  }
}

TEST(MedianStoppingSchedulerTest, NewTrialsRunToMax) {
  auto median = Median();
  const Job job = median->NextJob(true);
  EXPECT_EQ(job.kind, Job::Kind::kNew);
  EXPECT_EQ(job.target, 10);
  median->OnStart(0, job);
  EXPECT_EQ(median->NextJob(false).kind, Job::Kind::kWait);
  median->OnEnd(0, true);
  EXPECT_EQ(median->NextJob(false).kind, Job::Kind::kDone);
}

TEST(MedianStoppingSchedulerTest, StopsWhenBestIsWorseThanTheMedianOfRunningAverages) {
  auto median = Median();
  RunCurves(*median, {{2, 1}, {4, 3}, {6, 5}});
  StartNext(*median, 3);
  // At 1 the others' averages are 2, 4, 6: equal to the median is not worse.
  EXPECT_EQ(median->OnReport(3, 1, 4).kind, Decision::Kind::kContinue);
  // At 2 they are 1.5, 3.5, 5.5.
  const Decision stop = median->OnReport(3, 2, 4);
  EXPECT_EQ(stop.kind, Decision::Kind::kStop);
  EXPECT_THAT(stop.reason, HasSubstr("median 3.5"));
  // Trial 3 counts for others: at 1 the averages are 2, 4, 4, 6.
  StartNext(*median, 4);
  EXPECT_EQ(median->OnReport(4, 1, 4.5).kind, Decision::Kind::kStop);
}

TEST(MedianStoppingSchedulerTest, UsesTheBestValueSoFar) {
  auto median = Median();
  RunCurves(*median, {{2, 2}, {4, 4}, {6, 6}});
  StartNext(*median, 3);
  EXPECT_EQ(median->OnReport(3, 1, 1).kind, Decision::Kind::kContinue);
  EXPECT_EQ(median->OnReport(3, 2, 100).kind, Decision::Kind::kContinue);  // best is still 1
}

TEST(MedianStoppingSchedulerTest, RunningAveragesOnlyCountStepsUpToT) {
  auto median = Median();
  // At 1 the others' averages are 1, 1, 1; later values are huge but must not count.
  RunCurves(*median, {{1, 100, 100}, {1, 100, 100}, {1, 100, 100}});
  StartNext(*median, 3);
  EXPECT_EQ(median->OnReport(3, 1, 2).kind, Decision::Kind::kStop);
}

TEST(MedianStoppingSchedulerTest, NeedsMinTrialsOthersThatReachedTheStep) {
  for (int min_trials : {2, 3}) {
    auto median = Median(min_trials);
    RunCurves(*median, {{5, 0, 0}, {5, 0, 0}, {5}});
    StartNext(*median, 3);
    EXPECT_EQ(median->OnReport(3, 1, 5).kind, Decision::Kind::kContinue);
    // At 2 only trials 0 and 1 have reached the step; their averages are 2.5.
    EXPECT_EQ(median->OnReport(3, 2, 6).kind,
              min_trials == 2 ? Decision::Kind::kStop : Decision::Kind::kContinue)
        << "min_trials " << min_trials;
  }
}

TEST(MedianStoppingSchedulerTest, DoesNotStopBelowGrace) {
  auto median = Median(3, 3);
  RunCurves(*median, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}});
  StartNext(*median, 3);
  EXPECT_EQ(median->OnReport(3, 1, 5).kind, Decision::Kind::kContinue);
  EXPECT_EQ(median->OnReport(3, 2, 5).kind, Decision::Kind::kContinue);
  EXPECT_EQ(median->OnReport(3, 3, 5).kind, Decision::Kind::kStop);
}

TEST(MedianStoppingSchedulerTest, ObservationsAreRecordedAtAshaRungs) {
  auto median = Median();
  RunCurves(*median, {{5, 4, 3}, {6, 5, 4}});
  EXPECT_THAT(median->ObservationsAtBestFidelity(2), ElementsAre(Pair(0, 3), Pair(1, 4)));
}

}  // namespace
}  // namespace sextant
