// Crash safety of the orchestrator with real processes: `sextant run` is SIGKILLed at seeded
// random moments and `sextant resume` continues it; nothing committed (hence nothing
// acknowledged) is lost and no trial completes twice.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

// What the store held right after one kill.
struct Snapshot {
  std::vector<TrialRow> trials;
  std::vector<MeasurementRow> measurements;
  int running = 0;  // trials in flight at the kill
};

Snapshot TakeSnapshot(const std::string& run_dir) {
  Snapshot s;
  auto store = Store::Open(RunDir::DbPath(run_dir), /*create=*/false, /*read_only=*/true);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return s;
  auto trials = (*store)->LoadTrials();
  auto ms = (*store)->LoadMeasurements();
  EXPECT_TRUE(trials.ok() && ms.ok());
  if (!trials.ok() || !ms.ok()) return s;
  s.trials = *trials;
  s.measurements = *ms;
  for (const TrialRow& t : s.trials) s.running += t.state == v1::RUNNING;
  return s;
}

using MeasurementKey = std::tuple<int64_t, int, int64_t>;

std::map<MeasurementKey, std::string> ByKey(const std::vector<MeasurementRow>& ms) {
  std::map<MeasurementKey, std::string> out;
  for (const MeasurementRow& m : ms) out[{m.trial_id, m.attempt, m.sequence}] = m.metrics_json;
  return out;
}

TEST(CrashTest, TwentySigkillsOfTheOrchestratorLoseNothingAndCompleteEachTrialOnce) {
  constexpr int kTrials = 60;
  constexpr int kKills = 20;
  const std::string dir = MakeTempDir("crash");
  const std::string log = dir + "/evaluations.log";
  // Each evaluation reports a first metric, works a little, logs itself (one O_APPEND write of
  // one short line, so lines from concurrent trials never interleave) and reports the result.
  WriteFile(dir + "/objective.sh", absl::StrCat(R"SH(#!/bin/sh
echo "step=1 loss=$((SEXTANT_TRIAL_ID + 1000))"
sleep 0.4
echo "$SEXTANT_TRIAL_ID $SEXTANT_ATTEMPT" >> ")SH",
                                                log, R"SH("
echo "step=2 loss=$SEXTANT_TRIAL_ID"
)SH"));
  WriteFile(dir + "/exp.yaml", absl::StrCat(R"(name: crash
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 3, max_trials: )",
                                            kTrials, R"(, max_concurrent: 3}
trial:
  command: [sh, objective.sh]
)"));
  const std::string run_dir = dir + "/run";
  std::mt19937 rng(20240917);
  std::uniform_int_distribution<int> delay_ms(150, 1200);
  std::vector<Snapshot> snapshots;
  int in_flight_total = 0;
  bool finished = false;
  for (int kill = 0; kill < kKills && !finished; ++kill) {
    std::vector<std::string> argv =
        kill == 0
            ? std::vector<std::string>{kSextant,    "run", dir + "/exp.yaml", "--run-dir", run_dir,
                                       "--workers", "3"}
            : std::vector<std::string>{kSextant, "resume", run_dir, "--workers", "3"};
    BackgroundProcess run(argv);
    ASSERT_TRUE(run.WaitForOutput("listening on", 30)) << run.out() << run.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    run.Signal(SIGKILL);
    int rc = run.Wait(30);
    if (rc == 0) {
      finished = true;  // it ended before the kill landed
      break;
    }
    ASSERT_EQ(rc, -SIGKILL) << run.out() << run.err();
    snapshots.push_back(TakeSnapshot(run_dir));
    in_flight_total += snapshots.back().running;
  }
  // A kill can land after the last trial completed, while the run writes its report; it
  // proves nothing about a running search, so only kills that found work left are counted.
  int mid_search_kills = 0;
  int completed_at_last_kill = 0;
  for (const Snapshot& s : snapshots) {
    completed_at_last_kill = 0;
    for (const TrialRow& t : s.trials) completed_at_last_kill += t.state == v1::COMPLETED;
    mid_search_kills += completed_at_last_kill < kTrials;
  }
  ASSERT_GE(mid_search_kills, 10) << "the search ended before most kills";
  auto last = RunProcess({kSextant, "resume", run_dir, "--workers", "3"}, 120);
  ASSERT_EQ(last.exit_code, 0) << last.out << last.err;

  // The final state: max_trials trials, each completed with its own value.
  auto results = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), static_cast<size_t>(kTrials));
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["value"], t["id"]) << t.dump();
  }
  Snapshot final_state = TakeSnapshot(run_dir);
  ASSERT_EQ(final_state.trials.size(), static_cast<size_t>(kTrials));
  std::map<MeasurementKey, std::string> final_ms = ByKey(final_state.measurements);

  // Everything stored at any kill (a superset of what was acknowledged) is still there, and a
  // trial that was complete at a kill was never run or completed again.
  for (size_t k = 0; k < snapshots.size(); ++k) {
    for (const auto& [key, metrics] : ByKey(snapshots[k].measurements)) {
      auto it = final_ms.find(key);
      ASSERT_NE(it, final_ms.end())
          << "kill " << k << ": measurement of trial " << std::get<0>(key) << " attempt "
          << std::get<1>(key) << " seq " << std::get<2>(key) << " was lost";
      EXPECT_EQ(it->second, metrics);
    }
    for (const TrialRow& t : snapshots[k].trials) {
      if (t.state != v1::COMPLETED) continue;
      const TrialRow& now = final_state.trials[t.id - 1];
      EXPECT_EQ(now.state, v1::COMPLETED);
      EXPECT_EQ(now.attempts, t.attempts) << "trial " << t.id << " ran again after completing";
      EXPECT_EQ(now.value, t.value);
    }
  }
  // Every trial's final step reached the store.
  std::map<int64_t, int> finals;
  for (const MeasurementRow& m : final_state.measurements) {
    if (m.metrics_json.find("\"step\":2") != std::string::npos) ++finals[m.trial_id];
  }
  for (int id = 1; id <= kTrials; ++id) {
    EXPECT_GE(finals[id], 1) << "trial " << id;
  }

  // The objective's own count: every trial evaluated, each attempt at most once, and the
  // re-executions bounded by what was in flight at the kills.
  std::istringstream lines(ReadFile(log));
  std::map<int64_t, int> evaluations;
  std::set<std::pair<int64_t, int>> seen;
  int64_t trial = 0;
  int attempt = 0, total = 0;
  while (lines >> trial >> attempt) {
    EXPECT_TRUE(seen.insert({trial, attempt}).second)
        << "trial " << trial << " attempt " << attempt << " evaluated twice";
    ++evaluations[trial];
    ++total;
  }
  for (int id = 1; id <= kTrials; ++id) EXPECT_GE(evaluations[id], 1) << "trial " << id;
  EXPECT_EQ(evaluations.size(), static_cast<size_t>(kTrials));
  int re_executions = total - kTrials;
  EXPECT_LE(re_executions, in_flight_total);
  RecordProperty("kills", static_cast<int>(snapshots.size()));
  RecordProperty("re_executions", re_executions);
  RecordProperty("in_flight_at_kills", in_flight_total);
  std::cout << "kills=" << snapshots.size() << " mid_search_kills=" << mid_search_kills
            << " evaluations=" << total << " re_executions=" << re_executions
            << " in_flight_at_kills=" << in_flight_total
            << " completed_at_last_kill=" << completed_at_last_kill << "\n";
}

}  // namespace
}  // namespace sextant
