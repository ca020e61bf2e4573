#include "orchestrator/core/dispatcher.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::MakeTempDir;
using testing::SpecFromYaml;

constexpr const char* kYaml = R"(
name: unit
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: random, seed: 3, max_trials: 3, max_concurrent: 2}
trial:
  command: [echo, "x=${x}"]
  max_restarts: 1
)";

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("dispatcher");
    Open();
  }

  void Open(const std::string& yaml = kYaml) {
    dispatcher_.reset();
    store_.reset();
    spec_ = SpecFromYaml(yaml);
    store_ = *Store::Open(dir_ + "/state.db", true);
    DispatcherOptions options;
    options.lease_seconds = 10;
    auto d = Dispatcher::Create(spec_, store_.get(), NewRandomSampler(ToSearchSpace(spec_), 3),
                                &clock_, options);
    ASSERT_TRUE(d.ok()) << d.status();
    dispatcher_ = *std::move(d);
  }

  int64_t RegisterWorker() {
    v1::RegisterRequest req;
    req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    req.set_region("local");
    auto r = dispatcher_->Register(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->worker_id() : 0;
  }

  v1::Assignment MustLease(int64_t worker) {
    auto r = dispatcher_->Lease(worker);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->has_assignment()) << r->DebugString();
    return r->assignment();
  }

  static v1::Measurement M(const v1::Assignment& a, int64_t seq, double loss) {
    v1::Measurement m;
    m.set_trial_id(a.trial_id());
    m.set_attempt(a.attempt());
    m.set_sequence(seq);
    (*m.mutable_metrics())["loss"] = loss;
    return m;
  }

  absl::StatusOr<v1::CompleteResponse> Complete(int64_t worker, const v1::Assignment& a,
                                                int exit_code, double loss,
                                                bool lease_next = false) {
    v1::CompleteRequest req;
    req.set_worker_id(worker);
    req.set_trial_id(a.trial_id());
    req.set_attempt(a.attempt());
    req.set_exit_code(exit_code);
    req.set_lease_next(lease_next);
    if (!std::isnan(loss) || exit_code == 0) *req.add_measurements() = M(a, 1, loss);
    return dispatcher_->Complete(req);
  }

  TrialRow Row(int64_t id) {
    auto rows = *store_->LoadTrials();
    return rows.at(id - 1);
  }

  std::string dir_;
  FakeClock clock_;
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
};

TEST_F(DispatcherTest, LeasesSubstitutedCommandsWithTheSextantEnvironment) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  EXPECT_EQ(a.trial_id(), 1);
  EXPECT_EQ(a.attempt(), 1);
  ASSERT_EQ(a.argv_size(), 2);
  EXPECT_EQ(a.argv(1), "x=" + a.env().at("SEXTANT_PARAM_X"));
  EXPECT_EQ(a.env().at("SEXTANT_TRIAL_ID"), "1");
  EXPECT_NE(a.env().at("SEXTANT_PARAMS").find("\"x\":"), std::string::npos);
  EXPECT_EQ(Row(1).state, v1::RUNNING);
}

TEST_F(DispatcherTest, CompletesWithTheLastObjectiveValueAndEndsAfterMaxTrials) {
  int64_t w = RegisterWorker();
  for (int i = 0; i < 3; ++i) {
    v1::Assignment a = MustLease(w);
    ASSERT_TRUE(Complete(w, a, 0, 1.0 + i).ok());
  }
  EXPECT_TRUE(dispatcher_->Finished());
  auto r = dispatcher_->Lease(w);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->done());
  DispatchStats s = dispatcher_->Stats();
  EXPECT_EQ(s.by_state["COMPLETED"], 3);
  EXPECT_EQ(*s.best_value, 1.0);
  EXPECT_EQ(s.best_trial, 1);
  EXPECT_EQ(*Row(2).value, 2.0);
}

TEST_F(DispatcherTest, CompleteCanLeaseTheNextTrialInOneCall) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  auto r = Complete(w, a, 0, 0.5, /*lease_next=*/true);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->next().has_assignment());
  EXPECT_EQ(r->next().assignment().trial_id(), 2);
}

TEST_F(DispatcherTest, RespectsMaxConcurrent) {
  int64_t w1 = RegisterWorker(), w2 = RegisterWorker(), w3 = RegisterWorker();
  MustLease(w1);
  MustLease(w2);
  auto r = dispatcher_->Lease(w3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->retry());
}

TEST_F(DispatcherTest, ReportsAreStoredExactlyOnce) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  v1::ReportRequest report;
  report.set_worker_id(w);
  *report.add_measurements() = M(a, 1, 0.9);
  *report.add_measurements() = M(a, 2, 0.8);
  ASSERT_TRUE(dispatcher_->Report(report).ok());
  ASSERT_TRUE(dispatcher_->Report(report).ok());  // a retry after a lost reply
  EXPECT_EQ(store_->LoadMeasurements(a.trial_id())->size(), 2u);
}

TEST_F(DispatcherTest, LapsedLeaseRequeuesTheTrialAsANewAttemptAndRejectsTheOldOne) {
  int64_t w1 = RegisterWorker(), w2 = RegisterWorker();
  v1::Assignment a = MustLease(w1);
  clock_.Advance(absl::Seconds(5));
  v1::HeartbeatRequest hb;
  hb.set_worker_id(w1);
  hb.set_trial_id(a.trial_id());
  hb.set_attempt(a.attempt());
  ASSERT_TRUE(dispatcher_->Heartbeat(hb).ok());
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(*dispatcher_->Tick(), 0);  // the heartbeat renewed it
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(*dispatcher_->Tick(), 1);
  EXPECT_EQ(Row(1).state, v1::PENDING);
  v1::Assignment again = MustLease(w2);
  EXPECT_EQ(again.trial_id(), a.trial_id());
  EXPECT_EQ(again.attempt(), 2);
  // The first worker comes back late: everything it says is stale.
  EXPECT_EQ(Complete(w1, a, 0, 0.1).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(dispatcher_->Heartbeat(hb).status().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(Complete(w2, again, 0, 0.2).ok());
  EXPECT_EQ(Row(1).attempts, 2);
  EXPECT_EQ(*Row(1).value, 0.2);
}

TEST_F(DispatcherTest, NonFiniteObjectiveFailsTheTrialWithAReason) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  ASSERT_TRUE(Complete(w, a, 0, std::numeric_limits<double>::quiet_NaN()).ok());
  // max_restarts: 1 gives it one more attempt, which also reports NaN.
  v1::Assignment b = MustLease(w);
  EXPECT_EQ(b.trial_id(), a.trial_id());
  ASSERT_TRUE(Complete(w, b, 0, std::numeric_limits<double>::infinity()).ok());
  TrialRow row = Row(1);
  EXPECT_EQ(row.state, v1::FAILED);
  EXPECT_NE(row.error.find("'loss' is inf"), std::string::npos) << row.error;
  // The reported values are kept, not dropped.
  auto ms = *store_->LoadMeasurements(1);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_NE(ms[0].metrics_json.find("\"nan\""), std::string::npos);
}

TEST_F(DispatcherTest, ExitWithoutObjectiveIsAFailure) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  v1::CompleteRequest req;
  req.set_worker_id(w);
  req.set_trial_id(a.trial_id());
  req.set_attempt(a.attempt());
  ASSERT_TRUE(dispatcher_->Complete(req).ok());
  EXPECT_NE(Row(1).error.find("never reported the objective metric 'loss'"), std::string::npos);
}

TEST_F(DispatcherTest, RefusesAWorkerWithAnotherProtocolVersion) {
  v1::RegisterRequest req;
  req.set_protocol_version(99);
  auto r = dispatcher_->Register(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("protocol version 99"), std::string::npos);
}

TEST_F(DispatcherTest, ResumeRequeuesRunningAndCancelledTrialsKeepingTheirIds) {
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  ASSERT_TRUE(Complete(w, a, 0, 3.0).ok());
  v1::Assignment b = MustLease(w);  // trial 2 is running when the orchestrator dies
  Open();                           // a new process on the same store
  DispatchStats s = dispatcher_->Stats();
  EXPECT_EQ(s.by_state["COMPLETED"], 1);
  EXPECT_EQ(s.by_state["PENDING"], 1);
  int64_t w2 = RegisterWorker();
  EXPECT_GT(w2, w);  // worker ids are never reused
  v1::Assignment again = MustLease(w2);
  EXPECT_EQ(again.trial_id(), b.trial_id());
  EXPECT_EQ(again.attempt(), 2);
  EXPECT_EQ(again.env().at("SEXTANT_PARAM_X"), b.env().at("SEXTANT_PARAM_X"));
}

TEST_F(DispatcherTest, InterruptCancelsRunningTrialsAndLeasesNothingMore) {
  int64_t w = RegisterWorker();
  MustLease(w);
  ASSERT_TRUE(dispatcher_->Interrupt().ok());
  EXPECT_EQ(Row(1).state, v1::CANCELLED);
  EXPECT_TRUE(dispatcher_->Lease(w)->done());
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

constexpr const char* kAshaYaml = R"(
name: asha
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  max_trials: 3
  max_concurrent: 3
trial:
  command: [train]
)";

class ScheduledDispatcherTest : public DispatcherTest {
 protected:
  void OpenScheduled(const std::string& yaml, bool promotion = true) {
    dispatcher_.reset();
    store_.reset();
    spec_ = SpecFromYaml(yaml);
    store_ = *Store::Open(dir_ + "/sched.db", true);
    AshaOptions asha;
    asha.fidelity = FidelitySpec{"epoch", 1, 9, 3};
    asha.promotion = promotion;
    auto d = Dispatcher::Create(spec_, store_.get(), NewRandomSampler(ToSearchSpace(spec_), 3),
                                &clock_, DispatcherOptions{}, NewAshaScheduler(asha));
    ASSERT_TRUE(d.ok()) << d.status();
    dispatcher_ = *std::move(d);
  }

  // Reports (epoch, loss) and returns the action the dispatcher answers with.
  v1::TrialAction ReportEpoch(int64_t w, const v1::Assignment& a, int64_t seq, double epoch,
                              double loss) {
    v1::ReportRequest r;
    r.set_worker_id(w);
    v1::Measurement m = M(a, seq, loss);
    (*m.mutable_metrics())["epoch"] = epoch;
    *r.add_measurements() = m;
    auto action = dispatcher_->Report(r);
    EXPECT_TRUE(action.ok()) << action.status();
    return action.ok() ? *action : v1::ACTION_CONTINUE;
  }

  void ExitOk(int64_t w, const v1::Assignment& a) {
    v1::CompleteRequest req;
    req.set_worker_id(w);
    req.set_trial_id(a.trial_id());
    req.set_attempt(a.attempt());
    ASSERT_TRUE(dispatcher_->Complete(req).ok());
  }
};

TEST_F(ScheduledDispatcherTest, PausesAtTheRungAndPromotesTheBestWithItsTarget) {
  OpenScheduled(kAshaYaml);
  int64_t w = RegisterWorker();
  std::vector<v1::Assignment> first;
  for (int i = 0; i < 3; ++i) {
    v1::Assignment a = MustLease(w);
    EXPECT_EQ(a.fidelity_target(), 1);
    EXPECT_EQ(a.env().at("SEXTANT_FIDELITY"), "1");
    EXPECT_FALSE(a.resume());
    first.push_back(a);
  }
  const double losses[] = {0.5, 0.2, 0.9};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ReportEpoch(w, first[i], 1, 1, losses[i]), v1::ACTION_PAUSE);
    ExitOk(w, first[i]);
  }
  EXPECT_TRUE(Row(1).paused);
  EXPECT_EQ(Row(1).state, v1::PENDING);
  v1::Assignment promoted = MustLease(w);  // the best of three (trial 2) goes on to epoch 3
  EXPECT_EQ(promoted.trial_id(), 2);
  EXPECT_EQ(promoted.attempt(), 2);
  EXPECT_EQ(promoted.fidelity_target(), 3);
  EXPECT_TRUE(promoted.resume());
  EXPECT_EQ(ReportEpoch(w, promoted, 1, 2, 0.15), v1::ACTION_CONTINUE);
  EXPECT_EQ(ReportEpoch(w, promoted, 2, 3, 0.1), v1::ACTION_PAUSE);
  ExitOk(w, promoted);
  // Rung 3 holds one trial, fewer than eta: nothing more can be promoted, and no new trial may
  // be made, so the schedule ends and every paused trial is pruned where it stopped.
  auto done = dispatcher_->Lease(w);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->done());
  EXPECT_TRUE(dispatcher_->Finished());
  EXPECT_EQ(Row(2).state, v1::PRUNED);
  EXPECT_EQ(Row(2).fidelity, 3);
  EXPECT_EQ(*Row(2).value, 0.1);
  EXPECT_NE(Row(2).rungs_json.find("\"promoted\""), std::string::npos) << Row(2).rungs_json;
  EXPECT_EQ(Row(1).state, v1::PRUNED);
  EXPECT_EQ(Row(1).fidelity, 1);
  EXPECT_EQ(*Row(1).value, 0.5);
}

TEST_F(ScheduledDispatcherTest, TrialPromotedToTheMaximumCompletes) {
  OpenScheduled(absl::StrReplaceAll(
      kAshaYaml, {{"max_trials: 3", "max_trials: 9"}, {"max_concurrent: 3", "max_concurrent: 9"}}));
  int64_t w = RegisterWorker();
  // Each trial runs to the target it is given and reports value id / epoch there, so trial 1
  // is the best at every rung. Run the asynchronous schedule to its end.
  for (int step = 0; step < 100; ++step) {
    auto r = dispatcher_->Lease(w);
    ASSERT_TRUE(r.ok());
    if (r->done()) break;
    ASSERT_TRUE(r->has_assignment());
    const v1::Assignment& a = r->assignment();
    double target = a.fidelity_target();
    v1::TrialAction action = ReportEpoch(w, a, 1, target, a.trial_id() / target);
    EXPECT_EQ(action, target < 9 ? v1::ACTION_PAUSE : v1::ACTION_CONTINUE);
    ExitOk(w, a);
  }
  EXPECT_TRUE(dispatcher_->Lease(w)->done());
  EXPECT_EQ(Row(1).state, v1::COMPLETED);
  EXPECT_EQ(*Row(1).value, 1.0 / 9);
  EXPECT_EQ(Row(1).fidelity, 9);
  EXPECT_EQ(Row(1).attempts, 3);
  EXPECT_EQ(dispatcher_->Stats().by_state["PRUNED"], 8);
}

TEST_F(ScheduledDispatcherTest, StoppingModePrunesATrialOutsideTheTopThird) {
  OpenScheduled(kAshaYaml, /*promotion=*/false);
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w), b = MustLease(w), c = MustLease(w);
  EXPECT_EQ(a.fidelity_target(), 9);
  EXPECT_EQ(ReportEpoch(w, a, 1, 1, 0.1), v1::ACTION_CONTINUE);
  EXPECT_EQ(ReportEpoch(w, b, 1, 1, 0.2), v1::ACTION_CONTINUE);
  EXPECT_EQ(ReportEpoch(w, c, 1, 1, 0.9), v1::ACTION_STOP);
  v1::CompleteRequest req;
  req.set_worker_id(w);
  req.set_trial_id(c.trial_id());
  req.set_attempt(c.attempt());
  req.set_exit_code(-15);
  req.set_stopped_for(v1::ACTION_STOP);
  ASSERT_TRUE(dispatcher_->Complete(req).ok());
  EXPECT_EQ(Row(3).state, v1::PRUNED);
  EXPECT_EQ(Row(3).fidelity, 1);
}

TEST_F(ScheduledDispatcherTest, FidelityGoingBackwardsFailsTheTrialNamingTheKey) {
  OpenScheduled(kAshaYaml, /*promotion=*/false);
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  ReportEpoch(w, a, 1, 2, 0.5);
  EXPECT_EQ(ReportEpoch(w, a, 2, 1, 0.4), v1::ACTION_STOP);
  ExitOk(w, a);
  EXPECT_EQ(Row(1).state, v1::FAILED);
  EXPECT_NE(Row(1).error.find("fidelity 'epoch' went backwards"), std::string::npos)
      << Row(1).error;
}

TEST_F(ScheduledDispatcherTest, TrialThatNeverReportsTheFidelityIsFlagged) {
  OpenScheduled(kAshaYaml, /*promotion=*/false);
  int64_t w = RegisterWorker();
  v1::Assignment a = MustLease(w);
  ASSERT_TRUE(Complete(w, a, 0, 0.3).ok());
  auto events = *store_->LoadEvents();
  bool flagged = false;
  for (const auto& e : events) flagged |= e.kind == "fidelity_missing" && e.trial_id == 1;
  EXPECT_TRUE(flagged);
}

}  // namespace
}  // namespace sextant
