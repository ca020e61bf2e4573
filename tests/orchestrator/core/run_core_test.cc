#include "orchestrator/core/run_core.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::SpecFromYaml;

std::string Yaml(const std::string& search, const std::string& extra = "") {
  return absl::StrCat(R"(
name: core
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: )",
                      search, R"(
trial:
  command: [echo, "x=${x}"]
)",
                      extra);
}

// A run core over a real dispatcher and store, on a FakeClock, with workers played by the test
// through the core's worker protocol.
class RunCoreTest : public ::testing::Test {
 protected:
  void Open(const std::string& yaml,
            std::function<int64_t(const TrialBook&)> create_limit = nullptr) {
    spec_ = SpecFromYaml(yaml);
    store_ = *Store::Open(":memory:", true);
    DispatcherOptions options;
    options.lease_seconds = 3600;  // no lease lapses within a test's virtual minutes
    auto d = Dispatcher::Create(spec_, store_.get(), NewRandomSampler(ToSearchSpace(spec_), 3),
                                &clock_, options);
    ASSERT_TRUE(d.ok()) << d.status();
    if (create_limit) (*d)->rules().create_limit = std::move(create_limit);
    core_ = std::make_unique<RunCore>(*std::move(d), &clock_, clock_.Now());
  }

  int64_t Register() {
    v1::RegisterRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_region("local");
    auto got = core_->Register(r);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->worker_id() : 0;
  }

  // Leases a trial and ends it with exit code `exit_code` (loss 0.5 when 0).
  void RunOne(int64_t worker, int exit_code = 0) {
    auto lease = core_->Lease(worker);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->has_assignment()) << lease->DebugString();
    Finish(worker, lease->assignment(), exit_code);
  }

  void Finish(int64_t worker, const v1::Assignment& a, int exit_code = 0) {
    v1::CompleteRequest done;
    done.set_worker_id(worker);
    done.set_trial_id(a.trial_id());
    done.set_attempt(a.attempt());
    done.set_exit_code(exit_code);
    if (exit_code == 0) {
      v1::Measurement* m = done.add_measurements();
      m->set_trial_id(a.trial_id());
      m->set_attempt(a.attempt());
      m->set_sequence(1);
      (*m->mutable_metrics())["loss"] = 0.5;
    } else {
      done.set_error("the trial crashed");
    }
    auto r = core_->Complete(done);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  RunEnd StepEnd() {
    auto e = core_->Step();
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->end : RunEnd::kGoesOn;
  }

  FakeClock clock_;
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RunCore> core_;
};

TEST_F(RunCoreTest, GoesOnUntilEveryTrialHasFinishedThenCompletes) {
  Open(Yaml("{sampler: random, seed: 3, max_trials: 2, max_concurrent: 1}"));
  EXPECT_EQ(StepEnd(), RunEnd::kGoesOn);
  const int64_t w = Register();
  RunOne(w);
  EXPECT_EQ(StepEnd(), RunEnd::kGoesOn);
  RunOne(w);
  absl::StatusOr<Ending> e = core_->Step();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->end, RunEnd::kCompleted);
  EXPECT_EQ(e->why, "every trial finished");
  ASSERT_TRUE(core_->End(v1::RUN_COMPLETED).ok());
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_COMPLETED);
  EXPECT_EQ(core_->Stats().finished, 2);
}

TEST_F(RunCoreTest, TheWallTimeBudgetWindsTheRunDownAndCancelsWhatStillRuns) {
  Open(Yaml("{sampler: random, seed: 3, max_trials: 5, max_concurrent: 1}",
            "budget: {max_wall_time: 60s}\n"));
  const int64_t w = Register();
  auto lease = core_->Lease(w);
  ASSERT_TRUE(lease.ok() && lease->has_assignment());
  clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(StepEnd(), RunEnd::kGoesOn);
  clock_.Advance(absl::Seconds(1));
  absl::StatusOr<Ending> e = core_->Step();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->end, RunEnd::kOutOfBudget);
  EXPECT_EQ(e->why, "budget.max_wall_time reached (60 s)");
  EXPECT_EQ(e->raise, "--max-wall-time DURATION");
  ASSERT_TRUE(core_->BeginWindDown(e->why).ok());
  // Nothing new starts while the running trial winds down.
  const int64_t late = Register();
  auto none = core_->Lease(late);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_assignment());
  EXPECT_EQ(core_->running(), 1);
  ASSERT_TRUE(core_->End(v1::RUN_BUDGET_EXHAUSTED).ok());
  EXPECT_EQ(core_->running(), 0);
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_BUDGET_EXHAUSTED);
  std::optional<TrialRow> row = core_->Trial(lease->assignment().trial_id());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, v1::CANCELLED);
}

TEST_F(RunCoreTest, TheFailurePolicyEndsTheRunFailedWithTheTrialsError) {
  Open(
      Yaml("{sampler: random, seed: 3, max_trials: 10, max_concurrent: 1, "
           "max_failed_trials: 2}"));
  const int64_t w = Register();
  RunOne(w, /*exit_code=*/1);
  EXPECT_EQ(StepEnd(), RunEnd::kGoesOn);
  RunOne(w, /*exit_code=*/1);
  absl::StatusOr<Ending> e = core_->Step();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->end, RunEnd::kFailed);
  EXPECT_THAT(e->why, HasSubstr("the trial crashed"));
}

TEST_F(RunCoreTest, APrivacyLimitOnNewTrialsEndsTheRunEpsilonExhaustedOnceTheyHaveEnded) {
  // The limit stands in for budget.max_epsilon's accountant: one trial, of the five asked.
  Open(Yaml("{sampler: random, seed: 3, max_trials: 5, max_concurrent: 1}"),
       [](const TrialBook&) { return int64_t{1}; });
  const int64_t w = Register();
  RunOne(w);
  EXPECT_EQ(StepEnd(), RunEnd::kEpsilonExhausted);
}

TEST_F(RunCoreTest, AfterRoundRunsBetweenTheRoundAndTheVerdict) {
  Open(Yaml("{sampler: random, seed: 3, max_trials: 1, max_concurrent: 1}"));
  const int64_t w = Register();
  // The last trial ends inside the step, after its round: the verdict already sees it.
  auto e = core_->Step([&] {
    RunOne(w);
    return absl::OkStatus();
  });
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->end, RunEnd::kCompleted);
  // Its error is the step's.
  auto failed = core_->Step([] { return absl::InternalError("the workers broke"); });
  EXPECT_EQ(failed.status(), absl::InternalError("the workers broke"));
}

TEST_F(RunCoreTest, WorkersOnOtherThreadsAndTheStepsShareTheOneLock) {
  Open(Yaml("{sampler: random, seed: 3, max_trials: 60, max_concurrent: 4}"));
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      const int64_t w = Register();
      for (;;) {
        auto lease = core_->Lease(w);
        if (!lease.ok() || lease->done()) return;
        if (lease->has_assignment()) Finish(w, lease->assignment());
      }
    });
  }
  RunEnd end = RunEnd::kGoesOn;
  for (int i = 0; i < 100000 && end == RunEnd::kGoesOn; ++i) {
    end = StepEnd();
    core_->Stats();
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(end, RunEnd::kCompleted);
  EXPECT_EQ(core_->Stats().finished, 60);
  EXPECT_EQ(core_->WorkerIds().size(), 4u);
}

}  // namespace
}  // namespace sextant
