// The ask/tell core over a real Dispatcher and SQLite store, on a fake clock.
#include "orchestrator/ask_tell/ask_tell.h"

#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/strategy_factory.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::SpecFromYaml;

constexpr const char* kYaml = R"(
name: asktell
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {mode: ask_tell, sampler: random, seed: 3, max_trials: 4, max_concurrent: 2, lease: 60s}
)";

constexpr const char* kAshaYaml = R"(
name: asktell-asha
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search:
  mode: ask_tell
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  max_trials: 9
  max_concurrent: 9
)";

constexpr const char* kTwoObjectives = R"(
name: asktell-mo
objectives:
  - {metric: loss, goal: minimize}
  - {metric: acc, goal: maximize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {mode: ask_tell, sampler: random, max_trials: 2, max_concurrent: 2}
)";

// What the store holds, to check that a refused call stored nothing.
struct Snapshot {
  size_t measurements = 0;
  size_t events = 0;
  std::vector<std::string> states;
  bool operator==(const Snapshot&) const = default;
};

class AskTellTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("ask_tell"); }

  // Builds the store, dispatcher and core as a process would (the lease record included).
  void Open(const std::string& yaml = kYaml) {
    core_.reset();
    dispatcher_.reset();
    store_.reset();
    spec_ = SpecFromYaml(yaml);
    store_ = *Store::Open(dir_ + "/state.db", true);
    DispatcherOptions options;
    options.lease_seconds = AskTellLeaseSeconds(spec_);
    options.checkpoints_dir = dir_ + "/checkpoints";
    auto held = LoadHeldLeases(*store_);
    ASSERT_TRUE(held.ok()) << held.status();
    options.held_leases = *held;
    auto d = Dispatcher::Create(spec_, store_.get(), *MakeSampler(spec_), &clock_, options,
                                MakeScheduler(spec_));
    ASSERT_TRUE(d.ok()) << d.status();
    dispatcher_ = *std::move(d);
    auto core = AskTell::Create(dispatcher_.get(), store_.get(), &clock_);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
  }

  std::vector<v1::AskedTrial> Ask(int count, const std::string& identity = "") {
    v1::AskRequest r;
    r.set_count(count);
    auto response = core_->Ask(r, identity);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    return {response->trials().begin(), response->trials().end()};
  }

  v1::TellRequest TellOf(const v1::AskedTrial& t, double loss) {
    v1::TellRequest r;
    r.set_run_id(t.run_id());
    r.set_trial_id(t.trial_id());
    r.set_attempt(t.attempt());
    r.add_values(loss);
    return r;
  }

  v1::ReportStepRequest StepOf(const v1::AskedTrial& t, int64_t sequence, double epoch,
                               double loss) {
    v1::ReportStepRequest r;
    r.set_run_id(t.run_id());
    r.set_trial_id(t.trial_id());
    r.set_attempt(t.attempt());
    r.set_sequence(sequence);
    (*r.mutable_metrics())["epoch"] = epoch;
    (*r.mutable_metrics())["loss"] = loss;
    return r;
  }

  Snapshot Stored() {
    Snapshot s;
    s.measurements = store_->LoadMeasurements()->size();
    s.events = store_->LoadEvents()->size();
    const std::vector<TrialRow> rows = *store_->LoadTrials();
    for (const TrialRow& row : rows) s.states.push_back(TrialStateName(row.state));
    return s;
  }

  std::string dir_;
  FakeClock clock_;
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<AskTell> core_;
};

TEST_F(AskTellTest, AskGivesDistinctTrialsUpToMaxConcurrent) {
  Open();
  std::vector<v1::AskedTrial> trials = Ask(5);
  ASSERT_EQ(trials.size(), 2u);  // max_concurrent
  EXPECT_NE(trials[0].trial_id(), trials[1].trial_id());
  EXPECT_NE(trials[0].params().at("x").number(), trials[1].params().at("x").number());
  EXPECT_EQ(trials[0].attempt(), 1);
  EXPECT_EQ(trials[0].lease_seconds(), 60);
  EXPECT_EQ(trials[0].run_id(), core_->run_id());
  EXPECT_THAT(trials[0].checkpoint_dir(), HasSubstr("trial-1"));
  EXPECT_TRUE(Ask(1).empty());  // every slot is asked
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::RUNNING);
}

TEST_F(AskTellTest, AskCountIsBounded) {
  Open();
  v1::AskRequest r;
  r.set_count(kMaxAskCount + 1);
  EXPECT_EQ(core_->Ask(r, "").status().code(), absl::StatusCode::kInvalidArgument);
  r.set_count(-1);
  EXPECT_EQ(core_->Ask(r, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AskTellTest, TellCompletesAndTheSearchEnds) {
  Open();
  int told = 0;
  while (true) {
    v1::AskRequest r;
    auto response = core_->Ask(r, "");
    ASSERT_TRUE(response.ok()) << response.status();
    if (response->done()) break;
    ASSERT_EQ(response->trials_size(), 1);
    const v1::AskedTrial& t = response->trials(0);
    auto told_response = core_->Tell(TellOf(t, t.params().at("x").number()), "");
    ASSERT_TRUE(told_response.ok()) << told_response.status();
    EXPECT_EQ(told_response->state(), v1::COMPLETED);
    EXPECT_FALSE(told_response->already_told());
    EXPECT_DOUBLE_EQ(told_response->metrics().at("loss"), t.params().at("x").number());
    ++told;
  }
  EXPECT_EQ(told, 4);
  EXPECT_TRUE(dispatcher_->Finished());
  const std::vector<TrialRow> rows = *store_->LoadTrials();
  for (const TrialRow& row : rows) EXPECT_EQ(row.state, v1::COMPLETED);
}

TEST_F(AskTellTest, LapsedLeaseRequeuesTheTrial) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  clock_.Advance(absl::Seconds(30));
  v1::TouchRequest touch;
  touch.set_run_id(t.run_id());
  touch.set_trial_id(t.trial_id());
  auto touched = core_->Touch(touch, "");  // attempt 0: the current one
  ASSERT_TRUE(touched.ok()) << touched.status();
  EXPECT_EQ(touched->lease_seconds(), 60);
  clock_.Advance(absl::Seconds(45));  // 75 s after the ask, 45 s after the touch: still held
  EXPECT_EQ(*dispatcher_->Tick(), 0);
  clock_.Advance(absl::Seconds(16));
  EXPECT_EQ(*dispatcher_->Tick(), 1);
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::PENDING);

  const Snapshot before = Stored();
  auto late = core_->Tell(TellOf(t, 0.5), "");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(late.status().message(), HasSubstr("trial 1 attempt 1"));
  EXPECT_THAT(late.status().message(), HasSubstr("lapsed"));
  EXPECT_EQ(Stored(), before);

  v1::AskedTrial again = Ask(1).at(0);  // requeued work comes first
  EXPECT_EQ(again.trial_id(), t.trial_id());
  EXPECT_EQ(again.attempt(), 2);
  EXPECT_TRUE(again.resume());
}

TEST_F(AskTellTest, ReportStepRenewsTheLeaseAndCountsARetryOnce) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  clock_.Advance(absl::Seconds(50));
  ASSERT_TRUE(core_->ReportStep(StepOf(t, 1, 1, 0.9), "").ok());
  ASSERT_TRUE(core_->ReportStep(StepOf(t, 1, 1, 0.9), "").ok());  // a retry
  clock_.Advance(absl::Seconds(50));
  EXPECT_EQ(*dispatcher_->Tick(), 0);
  EXPECT_EQ(store_->LoadMeasurements(t.trial_id())->size(), 1u);
  // Sequence 0: numbered by the server after the largest so far.
  auto step = StepOf(t, 0, 2, 0.8);
  ASSERT_TRUE(core_->ReportStep(step, "").ok());
  auto ms = *store_->LoadMeasurements(t.trial_id());
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[1].sequence, 2);
}

TEST_F(AskTellTest, SecondTellReturnsTheFirstResultUnchanged) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  auto first = core_->Tell(TellOf(t, 0.25), "");
  ASSERT_TRUE(first.ok()) << first.status();
  const Snapshot before = Stored();
  auto second = core_->Tell(TellOf(t, 0.75), "");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->already_told());
  EXPECT_EQ(second->state(), v1::COMPLETED);
  EXPECT_DOUBLE_EQ(second->metrics().at("loss"), 0.25);
  EXPECT_EQ(Stored(), before);
  // Attempt 0 names the last attempt of a finished trial: a repeat too.
  v1::TellRequest any = TellOf(t, 0.9);
  any.set_attempt(0);
  EXPECT_TRUE(core_->Tell(any, "")->already_told());
}

TEST_F(AskTellTest, RefusedTellsStoreNothing) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  const Snapshot before = Stored();
  auto expect_refused = [&](v1::TellRequest r, absl::StatusCode code, const std::string& says) {
    auto result = core_->Tell(r, "");
    EXPECT_EQ(result.status().code(), code) << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr(says));
    EXPECT_EQ(Stored(), before) << says;
  };
  v1::TellRequest unknown = TellOf(t, 0.5);
  unknown.set_trial_id(42);
  expect_refused(unknown, absl::StatusCode::kNotFound, "trial 42 is not in this run");
  v1::TellRequest other_run = TellOf(t, 0.5);
  other_run.set_run_id("another-run");
  expect_refused(other_run, absl::StatusCode::kInvalidArgument, "another run's");
  v1::TellRequest no_run = TellOf(t, 0.5);
  no_run.clear_run_id();
  expect_refused(no_run, absl::StatusCode::kInvalidArgument, "run_id is missing");
  expect_refused(TellOf(t, std::nan("")), absl::StatusCode::kInvalidArgument,
                 "trial 1: the value of objective 'loss' is nan");
  expect_refused(TellOf(t, std::numeric_limits<double>::infinity()),
                 absl::StatusCode::kInvalidArgument, "trial 1: the value of objective 'loss' is inf");
  v1::TellRequest two = TellOf(t, 0.5);
  two.add_values(0.6);
  expect_refused(two, absl::StatusCode::kInvalidArgument,
                 "2 values told, but the experiment has 1");
  v1::TellRequest nothing = TellOf(t, 0.5);
  nothing.clear_values();
  expect_refused(nothing, absl::StatusCode::kInvalidArgument, "needs the objective loss");
  v1::TellRequest nan_metric = TellOf(t, 0.5);
  (*nan_metric.mutable_metrics())["acc"] = std::nan("");
  expect_refused(nan_metric, absl::StatusCode::kInvalidArgument, "trial 1: metric acc is nan");
  v1::TellRequest future = TellOf(t, 0.5);
  future.set_attempt(2);
  expect_refused(future, absl::StatusCode::kNotFound, "trial 1 has no attempt 2");
  v1::TellRequest many = TellOf(t, 0.5);
  for (int i = 0; i <= kMaxTellMetrics; ++i) (*many.mutable_metrics())[absl::StrCat("m", i)] = i;
  expect_refused(many, absl::StatusCode::kInvalidArgument, "at most 256");
  // The refusals left the trial held: the real tell still lands.
  EXPECT_TRUE(core_->Tell(TellOf(t, 0.5), "").ok());
}

TEST_F(AskTellTest, TellOfAFinishedTrialsEarlierAttemptIsRefused) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  clock_.Advance(absl::Seconds(61));
  ASSERT_EQ(*dispatcher_->Tick(), 1);
  v1::AskedTrial again = Ask(1).at(0);
  ASSERT_EQ(again.attempt(), 2);
  ASSERT_TRUE(core_->Tell(TellOf(again, 0.1), "").ok());
  const Snapshot before = Stored();
  auto stale = core_->Tell(TellOf(t, 0.2), "");
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(stale.status().message(),
              HasSubstr("trial 1 attempt 1 no longer holds its lease: the trial ended COMPLETED"));
  EXPECT_EQ(Stored(), before);
}

TEST_F(AskTellTest, RepeatedFailedTellOfARequeuedTrialIsAlreadyTold) {
  Open(std::string(kYaml) + "trial: {max_restarts: 1}\n");
  v1::AskedTrial t = Ask(1).at(0);
  v1::TellRequest failed = TellOf(t, 0);
  failed.clear_values();
  failed.set_outcome(v1::TellRequest::FAILED);
  auto first = core_->Tell(failed, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(store_->LoadTrials()->at(0).state, v1::PENDING);  // requeued for attempt 2
  const Snapshot before = Stored();
  auto again = core_->Tell(failed, "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_told());
  EXPECT_EQ(again->state(), v1::FAILED);
  EXPECT_EQ(again->attempt(), 1);
  // A different payload for the same attempt is a repeat too: the first result stands.
  auto other = core_->Tell(TellOf(t, 0.5), "");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(other->already_told());
  EXPECT_EQ(other->state(), v1::FAILED);
  EXPECT_EQ(Stored(), before);
  // The requeued attempt is asked and told as usual.
  v1::AskedTrial retry = Ask(1).at(0);
  EXPECT_EQ(retry.trial_id(), t.trial_id());
  EXPECT_EQ(retry.attempt(), 2);
  EXPECT_EQ(core_->Tell(TellOf(retry, 0.5), "")->state(), v1::COMPLETED);
}

TEST_F(AskTellTest, TellOfATrialCancelledByAnInterruptSaysSo) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  ASSERT_TRUE(dispatcher_->Interrupt().ok());  // Ctrl-C in `sextant run`
  ASSERT_TRUE(dispatcher_->MarkRunState(v1::RUN_INTERRUPTED).ok());
  Open();  // `sextant tell` offline, or `sextant resume`
  const Snapshot before = Stored();
  auto late = core_->Tell(TellOf(t, 0.5), "");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(late.status().message(), HasSubstr("the run was interrupted while it ran"));
  EXPECT_THAT(late.status().message(), ::testing::Not(HasSubstr("lapsed")));
  EXPECT_EQ(Stored(), before);
}

TEST_F(AskTellTest, AnotherIdentityIsDenied) {
  Open();
  v1::AskedTrial t = Ask(1, "sextant://worker/-/alice").at(0);
  const Snapshot before = Stored();
  auto tell = core_->Tell(TellOf(t, 0.5), "sextant://worker/-/bob");
  EXPECT_EQ(tell.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(tell.status().message(), HasSubstr("sextant://worker/-/alice"));
  EXPECT_EQ(core_->ReportStep(StepOf(t, 1, 1, 0.5), "").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Stored(), before);
  EXPECT_TRUE(core_->Tell(TellOf(t, 0.5), "sextant://worker/-/alice").ok());
}

TEST_F(AskTellTest, PrunedAndFailedTells) {
  Open();
  std::vector<v1::AskedTrial> t = Ask(2);
  ASSERT_TRUE(core_->ReportStep(StepOf(t[0], 1, 1, 0.7), "").ok());
  v1::TellRequest pruned = TellOf(t[0], 0);
  pruned.clear_values();
  pruned.set_outcome(v1::TellRequest::PRUNED);
  auto p = core_->Tell(pruned, "");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->state(), v1::PRUNED);
  EXPECT_DOUBLE_EQ(p->metrics().at("loss"), 0.7);  // its last value
  v1::TellRequest failed = TellOf(t[1], 0);
  failed.clear_values();
  failed.set_outcome(v1::TellRequest::FAILED);
  failed.set_error("CUDA out of memory");
  auto f = core_->Tell(failed, "");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->state(), v1::FAILED);
  EXPECT_EQ(store_->LoadTrials()->at(1).error, "CUDA out of memory");
}

TEST_F(AskTellTest, SeveralObjectivesTakeOneValueEach) {
  Open(kTwoObjectives);
  v1::AskedTrial t = Ask(1).at(0);
  v1::TellRequest one = TellOf(t, 0.5);
  EXPECT_EQ(core_->Tell(one, "").status().code(), absl::StatusCode::kInvalidArgument);
  one.add_values(0.9);
  auto told = core_->Tell(one, "");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_DOUBLE_EQ(told->metrics().at("loss"), 0.5);
  EXPECT_DOUBLE_EQ(told->metrics().at("acc"), 0.9);
}

TEST_F(AskTellTest, AnAskedTrialStaysHeldAcrossProcesses) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  ASSERT_TRUE(core_->ReportStep(StepOf(t, 1, 1, 0.6), "").ok());
  Open();  // another process loads the run
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::RUNNING);
  v1::AskedTrial next = Ask(1).at(0);  // the held trial is not handed out again
  EXPECT_EQ(next.trial_id(), 2);
  ASSERT_TRUE(core_->ReportStep(StepOf(t, 0, 2, 0.5), "").ok());
  EXPECT_EQ(store_->LoadMeasurements(1)->back().sequence, 2);  // numbering survives too
  auto told = core_->Tell(TellOf(t, 0.4), "");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->state(), v1::COMPLETED);

  // A lease that lapsed while no process held the run is requeued by the next one to load it.
  clock_.Advance(absl::Seconds(61));
  Open();
  auto rows = *store_->LoadTrials();
  EXPECT_EQ(rows[1].state, v1::PENDING);
  auto late = core_->Tell(TellOf(next, 0.3), "");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted);
}

TEST_F(AskTellTest, CommandTrialsAreStillRequeuedOnResume) {
  Open();
  v1::AskedTrial t = Ask(1).at(0);
  // A resume without the lease record (a run of commands) requeues its running trials.
  core_.reset();
  dispatcher_.reset();
  auto d = Dispatcher::Create(spec_, store_.get(), *MakeSampler(spec_), &clock_,
                              DispatcherOptions{}, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::PENDING);
}

TEST_F(AskTellTest, AshaDecidesThroughReportStep) {
  Open(kAshaYaml);
  std::vector<v1::AskedTrial> rung0 = Ask(3);
  ASSERT_EQ(rung0.size(), 3u);
  for (const v1::AskedTrial& t : rung0) {
    EXPECT_EQ(t.fidelity_target(), 1);
    EXPECT_EQ(t.fidelity_key(), "epoch");
  }
  // Each trains to its rung and reports; the rung's best goes on, the others pause.
  const double losses[] = {0.2, 0.5, 0.9};
  for (int i = 0; i < 3; ++i) {
    auto action = core_->ReportStep(StepOf(rung0[i], 1, 1, losses[i]), "");
    ASSERT_TRUE(action.ok()) << action.status();
    v1::TellRequest tell = TellOf(rung0[i], losses[i]);
    auto told = core_->Tell(tell, "");
    ASSERT_TRUE(told.ok()) << told.status();
    EXPECT_EQ(told->state(), v1::PENDING) << "paused at its rung";
  }
  // The best of the rung is promoted: the same trial comes back as its next attempt.
  bool promoted = false;
  for (const v1::AskedTrial& t : Ask(9)) {
    if (t.trial_id() == rung0[0].trial_id()) {
      promoted = true;
      EXPECT_EQ(t.attempt(), 2);
      EXPECT_TRUE(t.resume());
      EXPECT_EQ(t.fidelity_target(), 3);
    }
  }
  EXPECT_TRUE(promoted);
}

TEST_F(AskTellTest, AshaStopsAPoorTrialThroughReportStep) {
  Open(absl::StrCat(kAshaYaml, "  asha_mode: stopping\n"));
  std::vector<v1::AskedTrial> t = Ask(3);
  ASSERT_EQ(t.size(), 3u);
  // Stopping mode: trials run to the top and are stopped at a rung when not in its top third.
  v1::TrialAction last = v1::ACTION_CONTINUE;
  for (int i = 0; i < 3; ++i) {
    auto action = core_->ReportStep(StepOf(t[i], 1, 1, 0.1 + 0.4 * i), "");
    ASSERT_TRUE(action.ok()) << action.status();
    last = action->action();
  }
  EXPECT_EQ(last, v1::ACTION_STOP);
  auto told = core_->Tell(TellOf(t[2], 0.9), "");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->state(), v1::PRUNED);
}

// Every sampler under every scheduler: a client that reports each epoch and obeys the answer
// finishes the search, and no configuration is handed out twice.
class AskTellStrategiesTest
    : public AskTellTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(AskTellStrategiesTest, AClientThatObeysFinishesTheSearch) {
  const auto& [sampler, scheduler] = GetParam();
  Open(absl::StrCat(R"(
name: sweep
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
  k: {type: int, min: 1, max: 50}
search:
  mode: ask_tell
  sampler: )",
                    sampler, "\n  scheduler: ", scheduler, R"(
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  initial_design: 3
  seed: 4
  max_trials: 10
  max_concurrent: 3
)"));
  std::set<std::string> configurations;
  int calls = 0;
  while (++calls < 500) {
    v1::AskRequest r;
    r.set_count(3);
    auto asked = core_->Ask(r, "");
    ASSERT_TRUE(asked.ok()) << asked.status();
    if (asked->done()) break;
    ASSERT_GT(asked->trials_size(), 0) << "nothing to ask, nothing running";
    for (const v1::AskedTrial& t : asked->trials()) {
      if (t.attempt() == 1) {
        EXPECT_TRUE(configurations
                        .insert(absl::StrCat(t.params().at("x").number(), ",",
                                             t.params().at("k").integer()))
                        .second)
            << "trial " << t.trial_id();
      }
      const double x = t.params().at("x").number();
      const double target = t.fidelity_target() > 0 ? t.fidelity_target() : 9;
      double loss = 1;
      for (int epoch = 1; epoch <= target; ++epoch) {
        loss = (x - 0.3) * (x - 0.3) + 1.0 / epoch;
        auto step = core_->ReportStep(StepOf(t, epoch, epoch, loss), "");
        ASSERT_TRUE(step.ok()) << step.status();
        if (step->action() != v1::ACTION_CONTINUE) break;
      }
      auto told = core_->Tell(TellOf(t, loss), "");
      ASSERT_TRUE(told.ok()) << told.status();
    }
  }
  EXPECT_TRUE(dispatcher_->Finished());
  int final_states = 0;
  const std::vector<TrialRow> rows = *store_->LoadTrials();
  for (const TrialRow& row : rows) {
    final_states += row.state == v1::COMPLETED || row.state == v1::PRUNED;
  }
  EXPECT_EQ(final_states, static_cast<int>(rows.size()));
  EXPECT_EQ(rows.size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(
    EverySamplerAndScheduler, AskTellStrategiesTest,
    ::testing::Combine(::testing::Values("random", "sobol", "grid", "bayesian", "tpe"),
                       ::testing::Values("none", "asha", "hyperband", "bohb", "median")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

TEST(AskTellLoaderTest, ModeAndLeaseAreChecked) {
  const std::string head = R"(name: m
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1}
)";
  LoadResult ok =
      LoadExperimentFromString(head + "search: {mode: ask_tell, lease: 5m}\n", "f.yaml");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.spec.search().mode(), v1::Search::ASK_TELL);
  EXPECT_EQ(ok.spec.search().lease_seconds(), 300);
  EXPECT_EQ(AskTellLeaseSeconds(ok.spec), 300);
  auto first_error = [&](const std::string& yaml) {
    LoadResult r = LoadExperimentFromString(head + yaml, "f.yaml");
    return r.errors.empty() ? std::string("no error") : r.errors[0].ToString();
  };
  EXPECT_EQ(first_error("search: {lease: 5m}\ntrial: {command: [t]}\n"),
            "f.yaml:5:10: search.lease: only with mode: ask_tell (workers' leases are set by "
            "--lease-timeout)");
  EXPECT_THAT(first_error("search: {mode: ask, max_trials: 2}\ntrial: {command: [t]}\n"),
              HasSubstr("f.yaml:5:16: search.mode"));
  EXPECT_THAT(first_error("search: {mode: ask_tell, lease: 0s}\n"),
              HasSubstr("search.lease: must be a positive duration"));
  EXPECT_THAT(first_error("search: {mode: ask_tell}\ntrial: {builtin: {model: mlp}}\n"),
              HasSubstr("f.yaml:6:9: trial.builtin: search.mode is ask_tell"));
  EXPECT_THAT(first_error("search: {mode: ask_tell}\nresources:\n  pools:\n    - {name: a, region: "
                          "r, instance: gpu.1x}\n"),
              HasSubstr("f.yaml:7:3: resources.pools: search.mode is ask_tell"));
  // Without mode: ask_tell the trial block is required, as before.
  EXPECT_EQ(first_error("search: {max_trials: 2}\n"), "f.yaml:1:1: trial: required key is missing");
}

}  // namespace
}  // namespace sextant
