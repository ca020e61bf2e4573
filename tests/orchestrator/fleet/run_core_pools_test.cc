// The run core with pools: the real Fleet, driven by the real FleetDriver through RunCore, on a
// FakeClock and a provider whose instances exist only in the test.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/core/store.h"
#include "orchestrator/fleet/fleet.h"
#include "orchestrator/fleet/fleet_driver.h"
#include "tests/fakes/fake_provider.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::FakeProvider;
using ::testing::HasSubstr;

class RunCorePoolsTest : public ::testing::Test {
 protected:
  void Open(const std::string& budget, int max_instances) {
    spec_ = testing::SpecFromYaml(absl::StrCat(R"(name: pools
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: random, seed: 1, max_trials: 10, max_concurrent: 2}
trial: {command: [echo]}
)",
                                               budget, R"(resources:
  pools:
    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: )",
                                               max_instances, "}\n"));
    store_ = *Store::Open(":memory:", true);
    auto d = Dispatcher::Create(spec_, store_.get(), NewRandomSampler(ToSearchSpace(spec_), 1),
                                &clock_, DispatcherOptions{});
    ASSERT_TRUE(d.ok()) << d.status();
    FleetOptions o;
    o.connect = "127.0.0.1:1";
    o.logs_dir = "/tmp";
    auto fleet = Fleet::Create(spec_, Catalog::Default(), &provider_, &clock_, o);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
    core_ = std::make_unique<RunCore>(*std::move(d), &clock_, clock_.Now());
    core_->AttachPools(std::make_unique<FleetDriver>(fleet_.get(), store_.get(), &clock_));
  }

  // Steps once a second until the run ends (at most `seconds`).
  Ending StepUntilEnd(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      absl::StatusOr<Ending> e = core_->Step();
      EXPECT_TRUE(e.ok()) << e.status();
      if (!e.ok() || e->end != RunEnd::kGoesOn) return e.ok() ? *e : Ending{};
      clock_.Advance(absl::Seconds(1));
    }
    return Ending{};
  }

  FakeClock clock_;
  FakeProvider provider_;
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<RunCore> core_;
};

TEST_F(RunCorePoolsTest, PoolsThatCannotLaunchEndTheRunCannotRun) {
  Open("", 1);
  provider_.refuse_launches = 1000;
  Ending e = StepUntilEnd(120);
  EXPECT_EQ(e.end, RunEnd::kCannotRun);
  EXPECT_THAT(e.why, HasSubstr("every pool failed"));
}

TEST_F(RunCorePoolsTest, ABudgetThatPaysForNoInstanceWindsTheRunDown) {
  // One minimum bill of gpu.1x on demand is 60 s x 2.4/h = 0.04: the cap pays for one.
  Open("budget: {max_cost: 0.05}\n", 4);
  ASSERT_TRUE(core_->Step().ok());
  EXPECT_EQ(provider_.live.size(), 1u);
  provider_.live.clear();  // the instance is gone before a worker ever registered
  Ending e = StepUntilEnd(30);
  EXPECT_EQ(e.end, RunEnd::kOutOfBudget);
  EXPECT_THAT(e.why, HasSubstr("budget.max_cost reached"));
  EXPECT_EQ(e.raise, "--max-cost AMOUNT");
  // The pools' spend is in the core's statistics.
  ASSERT_TRUE(core_->Stats().spend.has_value());
  EXPECT_GT(*core_->Stats().spend, 0);
  ASSERT_TRUE(core_->BeginWindDown(e.why).ok());
  core_->TerminatePools();
  EXPECT_EQ(core_->ReapPools(/*force=*/true), 0);
  ASSERT_TRUE(core_->WritePoolCosts().ok());
  EXPECT_FALSE(store_->LoadCosts()->empty());
  ASSERT_TRUE(core_->End(v1::RUN_BUDGET_EXHAUSTED).ok());
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_BUDGET_EXHAUSTED);
}

}  // namespace
}  // namespace sextant
