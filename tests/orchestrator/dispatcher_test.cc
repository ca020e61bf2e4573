#include "orchestrator/dispatcher.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "orchestrator/experiment_loader.h"
#include "orchestrator/store.h"
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
  EXPECT_EQ(Row(1).state, "RUNNING");
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
  EXPECT_EQ(Row(1).state, "PENDING");
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
  EXPECT_EQ(row.state, "FAILED");
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
  EXPECT_EQ(Row(1).state, "CANCELLED");
  EXPECT_TRUE(dispatcher_->Lease(w)->done());
}

}  // namespace
}  // namespace sextant
