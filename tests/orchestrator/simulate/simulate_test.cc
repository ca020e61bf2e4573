#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/trial_command.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/simulate/simulator.h"
#include "orchestrator/simulate/workload_model.h"

namespace sextant {
namespace {

v1::ExperimentSpec Spec(const std::string& yaml) {
  LoadResult r = LoadExperimentFromString(yaml, "sim.yaml");
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0].ToString());
  return r.spec;
}

std::string AshaYaml(const std::string& pools, int trials, int concurrent,
                     const std::string& extra = "") {
  return absl::StrCat(R"(name: sim
objective: {metric: loss}
parameters:
  x0: {type: float, min: -5, max: 10}
  x1: {type: float, min: 0, max: 15}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  seed: 5
  max_trials: )",
                      trials, "\n  max_concurrent: ", concurrent, R"(
trial: {command: [run]}
resources:
  provider: simulated
  pools:
)",
                      pools, extra);
}

SimulationResult Simulate(const v1::ExperimentSpec& spec, SimulationSettings settings = {}) {
  auto sim = Simulator::Create(spec, Catalog::Default(), settings);
  EXPECT_TRUE(sim.ok()) << sim.status();
  auto r = (*sim)->Run();
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sextant-sim-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes the simulation's run directory into dir and reads it back as `sextant results` does.
absl::StatusOr<nlohmann::json> WriteAndLoadResults(const Simulator& sim, const std::string& dir) {
  {
    absl::StatusOr<RunDir> lock = RunDir::Acquire(dir);
    if (!lock.ok()) return lock.status();
    auto store = Store::Open(lock->db_path(), true);
    if (!store.ok()) return store.status();
    if (absl::Status s = sim.WriteTo(store->get()); !s.ok()) return s;
  }
  return LoadResults(dir);
}

TEST(SimulatorTest, AshaRunCompletesAndWritesARunDirectoryThatResultsReads) {
  v1::ExperimentSpec spec =
      Spec(AshaYaml("    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, "
                    "max_instances: 4}\n",
                    27, 4));
  auto sim = Simulator::Create(spec, Catalog::Default());
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto r = (*sim)->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, v1::RUN_COMPLETED) << r->message;
  EXPECT_EQ(r->trials, 27);
  EXPECT_GT(r->completed, 0);
  EXPECT_LE(r->max_live_instances, 4);
  ASSERT_TRUE(r->best_value.has_value());
  EXPECT_GT(r->cost, 0);
  TempDir dir;
  absl::StatusOr<nlohmann::json> results = WriteAndLoadResults(**sim, dir.path());
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ((*results)["state"], "COMPLETED");
  EXPECT_EQ((*results)["trials"].size(), 27u);
  EXPECT_NEAR((*results)["cost"]["total"].get<double>(), r->cost, 1e-9);
  EXPECT_NEAR((*results)["cost"]["by_pool"]["od"].get<double>(), r->cost, 1e-9);
  EXPECT_NEAR((*results)["cost"]["by_region"]["us-east-1"].get<double>(), r->cost, 1e-9);
  EXPECT_NEAR((*results)["best"]["value"].get<double>(), *r->best_value, 1e-12);
  double trial_costs = 0;
  for (const auto& t : (*results)["trials"]) {
    EXPECT_GT(t["cost"].get<double>(), 0) << t.dump();
    trial_costs += t["cost"].get<double>();
  }
  EXPECT_LE(trial_costs, r->cost + 1e-9);  // idle time and minimums are nobody's
  EXPECT_THAT(ResultsToTable(*results), ::testing::HasSubstr("cost: "));
}

TEST(SimulatorTest, PreemptedTrialsResumeFromCheckpointAndEndExactlyAtTheirTarget) {
  // 200 interruptions per instance-day: one every ~7 minutes, against 60 s epochs.
  v1::ExperimentSpec spec = Spec(AshaYaml(
      "    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 4}\n",
      27, 4, "simulate: {checkpoint_every: 1, seed: 3}\n"));
  SimulationSettings settings;
  settings.spot_rate_per_day = 200;
  settings.notice_probability = 0.5;
  auto sim = Simulator::Create(spec, Catalog::Default(), settings);
  ASSERT_TRUE(sim.ok());
  auto r = (*sim)->Run();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, v1::RUN_COMPLETED) << r->message;
  EXPECT_GT(r->preemptions, 3);
  EXPECT_GT(r->lost_seconds, 0);
  TempDir dir;
  {
    auto lock = RunDir::Acquire(dir.path());
    auto store = Store::Open(lock->db_path(), true);
    ASSERT_TRUE((*sim)->WriteTo(store->get()).ok());
  }
  auto store = Store::Open(RunDir::DbPath(dir.path()), false, true);
  ASSERT_TRUE(store.ok());
  auto trials = (*store)->LoadTrials();
  auto ms = (*store)->LoadMeasurements();
  ASSERT_TRUE(trials.ok() && ms.ok());
  std::map<int64_t, std::vector<double>> epochs;
  for (const MeasurementRow& m : *ms) {
    epochs[m.trial_id].push_back(nlohmann::json::parse(m.metrics_json)["epoch"].get<double>());
  }
  int preempted_completed = 0;
  for (const TrialRow& t : *trials) {
    const std::vector<double>& e = epochs[t.id];
    // Every step is reported exactly once, in order, whatever the preemptions.
    for (size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i], static_cast<double>(i + 1)) << t.id;
    if (t.state == v1::COMPLETED) {
      EXPECT_EQ(t.fidelity, 9);
      EXPECT_EQ(e.back(), 9);
      if (t.preemptions > 0) ++preempted_completed;
    }
    EXPECT_NE(t.state, v1::FAILED);
  }
  EXPECT_GT(preempted_completed, 0);
  // `results` counts them per trial (from the store) and per pool (the simulation's counters).
  auto results = LoadResults(dir.path());
  ASSERT_TRUE(results.ok()) << results.status();
  const nlohmann::json& pre = (*results)["preemptions"];
  int by_trial = 0;
  for (const TrialRow& t : *trials) by_trial += t.preemptions;
  EXPECT_EQ(pre["total"], by_trial);
  ASSERT_EQ(r->pools.size(), 1u);
  EXPECT_EQ(pre["by_pool"]["spot"], r->pools[0].preemptions) << pre.dump();
  EXPECT_GT(pre["by_pool"]["spot"].get<int>(), 0);
  EXPECT_THAT(ResultsToTable(*results), ::testing::HasSubstr("(by pool: spot "));
}

TEST(SimulatorTest, SameSpecGivesTheSameRun) {
  v1::ExperimentSpec spec = Spec(AshaYaml(
      "    - {name: spot, region: eu-west-1, instance: gpu.1x, market: spot, max_instances: 6}\n",
      40, 6));
  SimulationSettings s;
  s.spot_rate_per_day = 20;
  SimulationResult a = Simulate(spec, s), b = Simulate(spec, s);
  EXPECT_EQ(a.cost, b.cost);
  EXPECT_EQ(a.wall_seconds, b.wall_seconds);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.best_value, b.best_value);
}

TEST(SimulatorTest, SpotFirstCostsLessThanOnDemandForTheSameSearch) {
  const std::string pools =
      "    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: 8}\n"
      "    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 8}\n";
  v1::ExperimentSpec spec = Spec(AshaYaml(pools, 60, 8));
  SimulationSettings od, spot;
  od.placement = "on_demand";
  spot.placement = "spot_first";
  SimulationResult a = Simulate(spec, od), b = Simulate(spec, spot);
  EXPECT_LT(b.cost, 0.35 * a.cost);
  for (const PoolSummary& p : a.pools) {
    if (p.market == "spot") {
      EXPECT_EQ(p.launched, 0);
    }
  }
}

// The cap holds across many randomized runs: spend never exceeds max_cost by more than one
// billing increment per live instance.
TEST(SimulatorTest, BudgetIsNeverExceededAcrossRandomizedRuns) {
  std::mt19937_64 rng(2024);
  int exhausted = 0;
  for (int run = 0; run < 200; ++run) {
    std::uniform_int_distribution<int> instances(1, 12), trials(5, 60);
    std::uniform_real_distribution<double> budget(0.2, 6.0), rate(0, 50), unit(30, 300);
    const char* markets[] = {"spot", "on_demand", "reserved"};
    const char* regions[] = {"us-east-1", "eu-west-1", "ap-south-1"};
    const char* types[] = {"gpu.1x", "gpu.4x"};
    std::string pools;
    const int npools = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < npools; ++p) {
      pools += absl::StrFormat(
          "    - {name: p%d, region: %s, instance: %s, market: %s, max_instances: %d}\n", p,
          regions[rng() % 3], types[rng() % 2], markets[rng() % 3], instances(rng));
    }
    const double max_cost = budget(rng);
    const std::string extra =
        absl::StrFormat("budget: {max_cost: %.4f}\nsimulate: {seconds_per_unit: %.0f, seed: %d}\n",
                        max_cost, unit(rng), run + 1);
    std::string yaml = AshaYaml(pools, trials(rng), 1 + static_cast<int>(rng() % 12), extra);
    LoadResult loaded = LoadExperimentFromString(yaml, "sim.yaml");
    if (!loaded.ok()) continue;  // e.g. a budget below one increment: rejected up front
    SimulationSettings s;
    s.spot_rate_per_day = rate(rng);
    s.placement =
        std::vector<std::string>{"cheapest", "spot_first", "on_demand", "mixed"}[rng() % 4];
    SimulationResult r = Simulate(loaded.spec, s);
    ASSERT_NE(r.state, v1::RUN_FAILED) << yaml << r.message;
    EXPECT_LE(r.cost, max_cost + r.overshoot_allowance + 1e-9) << yaml;
    exhausted += r.state == v1::RUN_BUDGET_EXHAUSTED;
  }
  EXPECT_GT(exhausted, 20);  // the cap was actually reached in many runs
}

// As `sextant run` does at budget.max_wall_time: running trials get the notice, write their
// checkpoint and stop, within the wind-down (a round of 10 s plus the 20 s checkpoint write).
TEST(SimulatorTest, WallTimeLimitEndsTheRunWithinTheWindDownAfterTheDeadline) {
  v1::ExperimentSpec spec =
      Spec(AshaYaml("    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, "
                    "max_instances: 2}\n",
                    200, 2, "budget: {max_wall_time: 1h}\n"));
  SimulationResult r = Simulate(spec);
  EXPECT_EQ(r.state, v1::RUN_BUDGET_EXHAUSTED);
  EXPECT_GE(r.wall_seconds, 3600);
  EXPECT_LE(r.wall_seconds, 3600 + 10 + 20 + 5);
}

// The scheduler's side of a run, as stored: every trial's row and the decision events, in order.
struct Decisions {
  std::vector<TrialRow> trials;
  std::vector<std::string> events;  // "kind trial message" of promotions, prunes, the end
};

Decisions StoredDecisions(Store* store) {
  Decisions d;
  d.trials = *store->LoadTrials();
  const std::vector<EventRow> events = *store->LoadEvents();
  for (const EventRow& e : events) {
    if (e.kind == "trial_promoted" || e.kind == "trial_pruned" || e.kind == "schedule_finished") {
      d.events.push_back(absl::StrCat(e.kind, " ", e.trial_id, " ", e.message));
    }
  }
  return d;
}

// Drives the real Dispatcher (what `sextant run` serves) with one worker on a FakeClock that
// reports, epoch by epoch from where the trial stopped, what the workload model says.
Decisions DispatchWithModelWorker(const v1::ExperimentSpec& spec, const std::string& dir) {
  FakeClock clock;
  auto store = Store::Open(dir + "/run.db", true);
  EXPECT_TRUE(store.ok()) << store.status();
  auto sampler = MakeSampler(spec, {});
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  auto d = Dispatcher::Create(spec, store->get(), *std::move(sampler), &clock, DispatcherOptions{},
                              MakeScheduler(spec));
  EXPECT_TRUE(d.ok()) << d.status();
  Dispatcher& dispatcher = **d;
  const WorkloadModel model(spec);
  const SearchSpace space = ToSearchSpace(spec);
  v1::RegisterRequest reg;
  reg.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  reg.set_region("us-east-1");
  const int64_t w = dispatcher.Register(reg)->worker_id();
  std::map<int64_t, int> reached;  // trial -> last epoch reported (its checkpoint)
  for (int leases = 0; leases < 10000; ++leases) {
    auto lease = dispatcher.Lease(w);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok() || lease->done() || !lease->has_assignment()) break;
    const v1::Assignment& a = lease->assignment();
    auto parsed = ParamsFromJson(dispatcher.trials().row(a.trial_id())->params_json, space);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    const Params params = *parsed;
    int64_t seq = 0;
    for (int epoch = reached[a.trial_id()] + 1; epoch <= a.fidelity_target(); ++epoch) {
      clock.Advance(absl::Seconds(model.seconds_per_unit(params)));
      v1::ReportRequest r;
      r.set_worker_id(w);
      v1::Measurement* m = r.add_measurements();
      m->set_trial_id(a.trial_id());
      m->set_attempt(a.attempt());
      m->set_sequence(++seq);
      (*m->mutable_metrics())["loss"] = model.Value(params, a.trial_id(), epoch);
      (*m->mutable_metrics())["epoch"] = epoch;
      auto action = dispatcher.Report(r);
      EXPECT_TRUE(action.ok()) << action.status();
      reached[a.trial_id()] = epoch;
      if (!action.ok() || *action != v1::ACTION_CONTINUE) break;
    }
    v1::CompleteRequest done;
    done.set_worker_id(w);
    done.set_trial_id(a.trial_id());
    done.set_attempt(a.attempt());
    EXPECT_TRUE(dispatcher.Complete(done).ok());
  }
  EXPECT_TRUE(dispatcher.Finished());
  return StoredDecisions(store->get());
}

// One trial at a time, ASHA decides from the order of the reports alone, so `run`'s dispatcher
// and `simulate` must make the same decisions: the same trials, rungs (fidelity, value,
// decision, target), final states and values, attempts, and promotion and pruning events.
TEST(SimulatorTest, SimulateMakesTheSameSchedulerDecisionsAsTheDispatcher) {
  // ASHA promoting, ASHA stopping, Hyperband's brackets, and BOHB (its model is fitted on the
  // values at the best fidelity).
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"scheduler: asha\n", "scheduler: asha\n"},
      {"scheduler: asha\n", "scheduler: asha\n  asha_mode: stopping\n"},
      {"scheduler: asha\n", "scheduler: hyperband\n"},
      {"scheduler: asha\n", "scheduler: bohb\n"}};
  for (const auto& [from, to] : variants) {
    SCOPED_TRACE(to);
    std::string yaml = AshaYaml(
        "    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: "
        "1}\n",
        30, 1, "simulate: {seed: 7}\n");
    yaml.replace(yaml.find(from), from.size(), to);
    LoadResult loaded = LoadExperimentFromString(yaml, "sim.yaml");
    ASSERT_TRUE(loaded.ok()) << loaded.errors[0].ToString();
    const v1::ExperimentSpec& spec = loaded.spec;
    TempDir dir;
    const Decisions run = DispatchWithModelWorker(spec, dir.path());
    auto sim = Simulator::Create(spec, Catalog::Default());
    ASSERT_TRUE(sim.ok()) << sim.status();
    ASSERT_TRUE((*sim)->Run().ok());
    auto store = Store::Open(dir.path() + "/sim.db", true);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*sim)->WriteTo(store->get()).ok());
    const Decisions simulated = StoredDecisions(store->get());
    ASSERT_EQ(run.trials.size(), simulated.trials.size());
    int promoted = 0, pruned = 0, finalised = 0;
    for (size_t i = 0; i < run.trials.size(); ++i) {
      const TrialRow& a = run.trials[i];
      const TrialRow& b = simulated.trials[i];
      SCOPED_TRACE(absl::StrCat("trial ", a.id));
      EXPECT_EQ(a.params_json, b.params_json);
      EXPECT_EQ(a.state, b.state);
      EXPECT_EQ(a.attempts, b.attempts);
      EXPECT_EQ(a.fidelity, b.fidelity);
      EXPECT_EQ(a.target, b.target);
      EXPECT_EQ(a.value, b.value);
      EXPECT_EQ(a.paused, b.paused);
      EXPECT_EQ(a.rungs_json, b.rungs_json);
      promoted += a.attempts > 1;
      pruned += a.state == v1::PRUNED;
      finalised += a.state == v1::PRUNED && absl::StrContains(a.rungs_json, "\"paused\"");
    }
    EXPECT_EQ(run.events, simulated.events);
    // The comparison covered decisions past the first rung, not only first rungs.
    EXPECT_GT(to.find("stopping") == std::string::npos ? promoted : pruned, 3);
    // Trials still paused when the schedule ended were pruned there, on both sides alike.
    if (to.find("stopping") == std::string::npos) EXPECT_GT(finalised, 0);
  }
}

TEST(SimulatorTest, ThousandInstancesTenThousandTrialsSimulateWithinAMinute) {
  v1::ExperimentSpec spec = Spec(AshaYaml(
      "    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 600}\n"
      "    - {name: od, region: eu-west-1, instance: gpu.1x, market: on_demand, max_instances: "
      "400}\n",
      10000, 1000));
  SimulationSettings s;
  s.spot_rate_per_day = 5;
  SimulationResult r = Simulate(spec, s);
  EXPECT_EQ(r.state, v1::RUN_COMPLETED) << r.message;
  EXPECT_EQ(r.trials, 10000);
  EXPECT_EQ(r.max_live_instances, 1000);
  EXPECT_LT(r.real_seconds, 60);
  RecordProperty("events", std::to_string(r.events));
  RecordProperty("us_per_event", std::to_string(1e6 * r.real_seconds / r.events));
  EXPECT_LT(r.real_seconds / r.events, 1e-3);
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// Branin against dollars, with a time per epoch that grows with x1: simulate shows the
// accuracy-versus-dollars front before anything is spent.
std::string CostFrontYaml(const std::string& sampler) {
  return absl::StrCat(R"(name: front
objectives: [{metric: loss}, {metric: cost}]
constraints: [{metric: trial_seconds, max: 600}]
parameters:
  x0: {type: float, min: -5, max: 10}
  x1: {type: float, min: 0, max: 15}
search: {sampler: )",
                      sampler, R"(, seed: 4, max_trials: 40, max_concurrent: 4}
trial: {command: [run]}
resources:
  provider: simulated
  pools:
    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 4}
simulate:
  seconds_per_trial: 600
  seconds_per_unit_expression: "60 + 60 * x1"
)");
}

TEST(SimulatorTest, SeveralObjectivesWithCostGiveAFrontAndCostFollowsTheTimeExpression) {
  v1::ExperimentSpec spec = Spec(CostFrontYaml("nsga2"));
  auto sim = Simulator::Create(spec, Catalog::Default());
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto r = (*sim)->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, v1::RUN_COMPLETED) << r->message;
  EXPECT_FALSE(r->best_value.has_value());  // several objectives: no single best
  TempDir dir;
  absl::StatusOr<nlohmann::json> results = WriteAndLoadResults(**sim, dir.path());
  ASSERT_TRUE(results.ok()) << results.status();
  const nlohmann::json& j = *results;
  EXPECT_TRUE(j["best"].is_null());
  ASSERT_EQ(j["objectives"].size(), 2u);
  double lo = 1e300, hi = 0;
  int infeasible = 0;
  for (const auto& t : j["trials"]) {
    if (t["state"] != "COMPLETED") continue;
    ASSERT_EQ(t["values"].size(), 2u) << t.dump();
    // The cost objective is the trial's share of the ledger, as in results' "cost".
    EXPECT_NEAR(t["values"][1].get<double>(), t["cost"].get<double>(), 1e-9) << t.dump();
    lo = std::min(lo, t["cost"].get<double>());
    hi = std::max(hi, t["cost"].get<double>());
    const bool slow = t["trial_seconds"].get<double>() > 600;
    EXPECT_EQ(t["feasible"].get<bool>(), !slow) << t.dump();
    infeasible += slow ? 1 : 0;
  }
  EXPECT_GT(hi / lo, 5) << "the expression makes cost vary about 16x across x1";
  EXPECT_GT(infeasible, 0) << "x1 above about 8.5 takes longer than 600 s";
  ASSERT_GE(j["pareto"].size(), 2u);
  for (const auto& p : j["pareto"]) {
    const auto& t = j["trials"][p["trial"].get<int>() - 1];
    EXPECT_TRUE(t["feasible"].get<bool>());
    EXPECT_EQ(p["values"], t["values"]);
  }
  EXPECT_GT(j["hypervolume"].get<double>(), 0);
  EXPECT_EQ(j["reference_point_source"], "derived");
  EXPECT_EQ(j["hypervolume_history"].size(), j["trials"].size());
  EXPECT_THAT(ResultsToTable(j), ::testing::HasSubstr("pareto front: "));
}

TEST(SimulatorTest, EverySamplerRunsSeveralObjectivesUnderSimulate) {
  for (const char* sampler : {"random", "sobol", "tpe", "bayesian", "nsga2"}) {
    v1::ExperimentSpec spec = Spec(CostFrontYaml(sampler));
    SimulationResult r = Simulate(spec);
    EXPECT_EQ(r.state, v1::RUN_COMPLETED) << sampler << ": " << r.message;
    EXPECT_EQ(r.trials, 40) << sampler;
  }
}

TEST(SimulatorTest, MoAshaRanksOnEveryObjective) {
  std::string yaml = AshaYaml(
      "    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: "
      "4}\n",
      30, 4, "simulate: {seconds_per_unit_expression: \"30 + 10 * x1\"}\n");
  yaml.replace(yaml.find("objective: {metric: loss}"), 25,
               "objectives: [{metric: loss}, {metric: cost}]");
  v1::ExperimentSpec spec = Spec(yaml);
  SimulationResult r = Simulate(spec);
  EXPECT_EQ(r.state, v1::RUN_COMPLETED) << r.message;
  EXPECT_EQ(r.trials, 30);
  EXPECT_GT(r.completed, 0);
}

}  // namespace
}  // namespace sextant
