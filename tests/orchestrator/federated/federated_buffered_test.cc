// federation.mode: buffered end to end (real processes, Fashion-MNIST): two regions, one client
// made 20x slower (long enough over 1,200 examples that a loaded machine's noise cannot hide it).
// The orchestrator steps whenever buffer_size client updates are buffered,
// without waiting for the straggler, which the fast clients outpace; the model still learns.
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

// The updates a client's log says it delivered (a line per training; a refused push says
// rejected=).
int Delivered(const std::string& log) {
  int n = 0;
  const std::regex line("^round=\\d+ .*bytes_sent=[1-9]");
  for (size_t at = 0, end; at < log.size(); at = end + 1) {
    end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string l = log.substr(at, end - at);
    if (std::regex_search(l, line) && l.find("rejected=") == std::string::npos) ++n;
  }
  return n;
}

// Runs a buffered experiment on Fashion-MNIST whose federation block is `federation` (the
// shared keys below come first), checks that it finished and learned (chance is 0.10) and
// returns its directory.
std::string RunLearningBufferedExperiment(const std::string& name, const std::string& federation,
                                          int timeout_seconds, bool straggler = true) {
  const std::string dir = testing::MakeTempDir(name);
  testing::WriteFile(dir + "/exp.yaml",
                     absl::StrCat("name: ", name, R"(
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  mode: buffered
  max_staleness: 3
  local_lr: 0.05
  server_lr: 0.5
  examples_per_client: 1200
  validation_examples: 1000
  seed: 5
)",
                                  straggler ? "  stragglers: {clients: [east/0], "
                                              "slowdown: 100}\n"
                                            : "",
                                  federation));
  const std::string bin = SEXTANT_BIN_DIR;
  testing::CommandOutput run = testing::RunProcess(
      {bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, timeout_seconds);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch m;
  if (!std::regex_search(run.out, m, std::regex("finished: val_accuracy=([0-9.]+)"))) {
    ADD_FAILURE() << "no final line: " << run.out << run.err;
  } else {
    EXPECT_GT(std::stod(m[1]), 0.5) << run.out;
  }
  return dir;
}

TEST(FederatedBufferedTest, ServerStepsOnFullBuffersWhileTheStragglerTrailsAndTheModelLearns) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = RunLearningBufferedExperiment("fl-buffered", R"(
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  rounds: 10
  buffer_size: 3
  secure_aggregation: false
)",
                                                        240);

  // One global row per server step, each applying a full buffer: at least buffer_size client
  // updates, and no more than a buffer one short of full plus one region's push (2).
  const auto steps = testing::QueryRows(
      dir + "/run/state.db", "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(steps.size(), 10u);
  for (const auto& row : steps) {
    EXPECT_GE(std::stoi(row[1]), 3) << "step " << row[0];
    EXPECT_LE(std::stoi(row[1]), 4) << "step " << row[0];
  }
  // The regions' pushes add up to the step's count.
  const auto regions = testing::QueryRows(
      dir + "/run/state.db",
      "SELECT g.round FROM rounds g WHERE g.region = '' AND g.clients != "
      "(SELECT SUM(r.clients) FROM rounds r WHERE r.round = g.round AND r.region != '')");
  EXPECT_TRUE(regions.empty()) << "step " << regions[0][0];

  // Nobody waited for the straggler: had a step waited for it, a fast client would be at most
  // one delivery ahead. (A fast client trains once per model version, so the straggler must be
  // slow beside a step, not only beside a fast client's training: slowdown 100.) (Not a ratio: the
  // straggler's slowdown scales its training time, which on a fast machine is small beside the
  // protocol's, so its share varies with the machine.)
  const int slow = Delivered(testing::ReadFile(dir + "/run/logs/client-east-0.log"));
  const int fast = Delivered(testing::ReadFile(dir + "/run/logs/client-east-1.log"));
  EXPECT_GE(fast, slow + 3) << "fast " << fast << " slow " << slow;
  EXPECT_GE(fast, 4);
}

// clients_per_round under buffered rounds: at most that many clients (each region its share, 2
// of 4 here) start training on each model version, and a buffer of that many is computed from
// the version it is applied to. Every step still applies a full buffer, and the model learns.
TEST(FederatedBufferedTest, ClientsPerRoundCapsTheClientsThatStartOnEachVersion) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = RunLearningBufferedExperiment("fl-buffered-capped", R"(
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  rounds: 12
  buffer_size: 4
  clients_per_round: 4
  secure_aggregation: false
)",
                                                        240, /*straggler=*/false);
  const auto steps = testing::QueryRows(
      dir + "/run/state.db", "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(steps.size(), 12u);
  for (const auto& row : steps) EXPECT_EQ(std::stoi(row[1]), 4) << "step " << row[0];
  // Which clients of each region trained on each version (a client may train on one version
  // twice when no newer one comes in time; it holds one place).
  std::map<std::string, std::set<std::string>> on;  // "region/version" -> clients
  int trainings = 0;
  const std::regex line("^round=(\\d+) ");
  for (const std::string region : {"east", "west"}) {
    for (int i = 0; i < 4; ++i) {
      const std::string log =
          testing::ReadFile(absl::StrCat(dir, "/run/logs/client-", region, "-", i, ".log"));
      for (size_t at = 0, end; at < log.size(); at = end + 1) {
        end = log.find('\n', at);
        if (end == std::string::npos) end = log.size();
        const std::string l = log.substr(at, end - at);
        std::smatch m;
        if (!std::regex_search(l, m, line)) continue;
        on[absl::StrCat(region, "/", m[1].str())].insert(absl::StrCat(i));
        ++trainings;
      }
    }
  }
  for (const auto& [version, clients] : on) {
    EXPECT_LE(clients.size(), 2u) << version << ": " << clients.size() << " clients started";
  }
  EXPECT_GE(trainings, 12 * 4);
}

// The same under secure aggregation: each region's buffer is one SecAgg instance among the
// clients whose updates fill it. The straggler does not hold the instances up, every server
// step still applies at least buffer_size updates, and the model learns from masked updates.
TEST(FederatedBufferedTest, SecureBuffersAreOneSecAggInstanceEachAndTheModelLearns) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = RunLearningBufferedExperiment("fl-buffered-secure", R"(
  regions: [{name: east, clients: 3}, {name: west, clients: 3}]
  rounds: 8
  buffer_size: 4
)",
                                                        300);
  const auto steps = testing::QueryRows(
      dir + "/run/state.db", "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(steps.size(), 8u);
  for (const auto& row : steps) EXPECT_GE(std::stoi(row[1]), 4) << "step " << row[0];
  // Each region pushed instances of 2 clients (its share of the buffer), numbered in order.
  const std::string east = testing::ReadFile(dir + "/run/logs/aggregator-east.log");
  std::regex pushed("instance=(\\d+) buffer clients=(\\d+) .* pushed=ok");
  int instances = 0;
  for (std::sregex_iterator it(east.begin(), east.end(), pushed), end; it != end; ++it) {
    EXPECT_EQ(std::stoi((*it)[2]), 2) << (*it)[0];
    ++instances;
  }
  EXPECT_GE(instances, 2) << east;
  // Nobody waited for the straggler: had each instance waited for it, a fast client would be
  // at most one delivery ahead. (The ratio itself shrinks on a loaded machine, where protocol
  // time weighs more beside the straggler's slowed training.)
  const int slow = Delivered(testing::ReadFile(dir + "/run/logs/client-east-0.log"));
  const int fast = Delivered(testing::ReadFile(dir + "/run/logs/client-east-1.log"));
  EXPECT_GE(fast, slow + 2) << "fast " << fast << " slow " << slow;
}

// Plaintext rounds time a client by its update's arrival, secure ones by its keys'.
class FederatedClientSelectionTest : public ::testing::TestWithParam<bool> {};

TEST_P(FederatedClientSelectionTest, FastestLeavesTheStragglerOutOnceItsSpeedIsKnown) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const bool secure = GetParam();
  const std::string dir = testing::MakeTempDir(secure ? "fl-selection-secure" : "fl-selection");
  testing::WriteFile(dir + "/exp.yaml", absl::StrCat(R"(name: fl-selection
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  rounds: 5
  clients_per_round: 6
  client_selection: fastest
  local_lr: 0.05
  examples_per_client: 1200
  validation_examples: 500
  seed: 3
  stragglers: {clients: [east/0], slowdown: 100}
  secure_aggregation: )",
                                                     secure ? "true" : "false", "\n"));
  const std::string bin = SEXTANT_BIN_DIR;
  testing::CommandOutput run = testing::RunProcess(
      {bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 240);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string db = dir + "/run/state.db";
  const auto events =
      testing::QueryRows(db, "SELECT message FROM events WHERE kind = 'selection' ORDER BY id");
  ASSERT_EQ(events.size(), 5u);
  // Rounds 1 and 2 try every client once (an unknown client counts as instant); from round 3
  // every client's time is known and the straggler is left out. Its training is long enough and
  // its slowdown large enough that scheduling noise on a loaded machine cannot hide it.
  std::string tried;
  for (int r = 0; r < 2; ++r) tried += events[r][0];
  EXPECT_NE(tried.find("east/0"), std::string::npos) << tried;
  for (size_t r = 2; r < events.size(); ++r) {
    EXPECT_EQ(events[r][0].find("east/0"), std::string::npos) << events[r][0];
    EXPECT_NE(events[r][0].find("policy=fastest"), std::string::npos) << events[r][0];
  }
  // `results` reports the policy, the rounds each client was selected for and its seconds.
  testing::CommandOutput results =
      testing::RunProcess({bin + "/sextant", "results", dir + "/run", "--format", "json"}, 60);
  ASSERT_EQ(results.exit_code, 0) << results.err;
  EXPECT_NE(results.out.find("\"client_selection\""), std::string::npos) << results.out;
  EXPECT_NE(results.out.find("\"east/0\": 1"), std::string::npos) << results.out;
  const auto speeds = testing::QueryRows(db, "SELECT value FROM meta WHERE key = 'client_speeds'");
  ASSERT_EQ(speeds.size(), 1u);
  EXPECT_NE(speeds[0][0].find("east/0"), std::string::npos) << speeds[0][0];
}

INSTANTIATE_TEST_SUITE_P(PlaintextAndSecure, FederatedClientSelectionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("Secure") : std::string("Plaintext");
                         });

}  // namespace
}  // namespace sextant
