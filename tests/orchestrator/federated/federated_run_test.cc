// End to end: `sextant run` on a 2-region x 3-client federated experiment on loopback, with real
// processes (aggregators and clients) and real Fashion-MNIST.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "federation/rdp_accountant.h"
#include "gtest/gtest.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/study_privacy.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts argv with stdout and stderr to out_file; returns the pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_file) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `seconds` for pid; its exit code, or -1 on timeout (the process is then killed).
int WaitExit(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

using sextant::testing::QueryRows;

// A catalog of regions a and b with one instance type `box`, billed per second with a 1 s
// minimum: on-demand at `on_demand` dollars a second, spot (when `spot` is not empty) with
// that offer's fields, and `per_gb` dollars per GB between the regions.
void WriteTwoRegionCatalog(const std::string& path, double on_demand, const std::string& spot,
                           double per_gb) {
  std::ofstream out(path);
  out << "regions: [a, b]\ninstances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 2}}\n"
      << "billing: {increment: 1s, minimum: 1s}\noffers:\n";
  for (const char* region : {"a", "b"}) {
    out << "  - {region: " << region
        << ", instance: box, market: on_demand, price_per_second: " << on_demand << "}\n";
    if (!spot.empty()) {
      out << "  - {region: " << region << ", instance: box, market: spot, " << spot << "}\n";
    }
  }
  out << "transfer: {between_regions_per_gb: " << per_gb << "}\n";
}

// The resources block of regions a and b on WriteTwoRegionCatalog's `box`: each region's 3
// clients on a pool of their own in the `clients` market, a's aggregator in `a_aggregator`'s,
// b's on demand.
std::string TwoRegionPools(const std::string& clients, const std::string& a_aggregator) {
  return "resources:\n  catalog: catalog.yaml\n  pools:\n"
         "    - {name: a-clients, region: a, instance: box, market: " +
         clients +
         ", hosts: clients, max_instances: 3}\n"
         "    - {name: a-agg, region: a, instance: box, market: " +
         a_aggregator +
         ", hosts: aggregator}\n"
         "    - {name: b-clients, region: b, instance: box, market: " +
         clients +
         ", hosts: clients, max_instances: 3}\n"
         "    - {name: b-agg, region: b, instance: box, hosts: aggregator}\n";
}

// Waits up to `seconds` until the global row of `round` is in the rounds table.
bool WaitForRound(const std::string& db, int round, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const std::string sql =
      "SELECT round FROM rounds WHERE region = '' AND round >= " + std::to_string(round);
  while (std::chrono::steady_clock::now() < until) {
    if (!QueryRows(db, sql).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string SmallExperiment(const std::string& name, const std::string& regions, int rounds,
                            int min_clients, const std::string& deadline) {
  return "name: " + name + R"(
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: )" +
         regions + R"(
  rounds: )" +
         std::to_string(rounds) + R"(
  local_lr: 0.05
  min_clients: )" +
         std::to_string(min_clients) + R"(
  round_deadline: )" +
         deadline + R"(
  seed: 5
  examples_per_client: 600
  validation_examples: 1000
  secure_aggregation: false
)";
}

TEST(FederatedRunTest, TwoRegionsOfThreeClientsLearnAndSendOnlyModelSizedUpdates) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-e2e";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string yaml = dir + "/exp.yaml";
  std::ofstream(yaml) << R"(name: fl-e2e
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "64"}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 3}]
  rounds: 3
  local_lr: 0.05
  min_clients: 6
  round_deadline: 60s
  seed: 3
  examples_per_client: 1000
  validation_examples: 2000
  secure_aggregation: false
)";
  const std::string bin = SEXTANT_BIN_DIR;
  const int rc = std::system(
      (bin + "/sextant run " + yaml + " --run-dir " + dir + "/run > " + dir + "/out.txt 2>&1")
          .c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0) << Read(dir + "/out.txt");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/run/state.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(
                db, "SELECT round, accuracy, clients FROM rounds WHERE region = '' ORDER BY round",
                -1, &st, nullptr),
            SQLITE_OK);
  int rounds = 0;
  double last = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    ++rounds;
    EXPECT_EQ(sqlite3_column_int64(st, 0), rounds);
    EXPECT_EQ(sqlite3_column_int64(st, 2), 6);
    last = sqlite3_column_double(st, 1);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  EXPECT_EQ(rounds, 3);
  // FedAvg of 6 x 1,000 examples, 3 rounds of 1 local epoch: 0.70 with seed 3 (chance is 0.10).
  EXPECT_GT(last, 0.65);
  // Raw data never leaves a client: it sends one model-sized update per round, plus headers.
  for (const char* region : {"east", "west"}) {
    for (int i = 0; i < 3; ++i) {
      const std::string log =
          Read(dir + "/run/logs/client-" + region + "-" + std::to_string(i) + ".log");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(
          log, m, std::regex("client_done rounds=(\\d+) bytes_sent=(\\d+) model_bytes=(\\d+)")))
          << log;
      const double sent = std::stod(m[2]), model = std::stod(m[3]), n = std::stod(m[1]);
      EXPECT_EQ(n, 3);
      EXPECT_LE(sent, n * model * 1.01 + 4096);
      EXPECT_GE(sent, n * model);
    }
  }
}

// A client SIGKILLed once round 1 is committed: the round open at the kill closes with the
// clients that reported (min_clients), and every later round goes on without it, each waiting
// out its deadline and no longer. (Rounds are short: the kill may land a round or two later
// than round 2 on a loaded machine, so the checks count from the round open at the kill.)
TEST(FederatedRunTest, KilledClientDoesNotBlockRoundsThatCloseWithMinClients) {
  // Rounds before the kill take tens of milliseconds: enough of them that the kill after round
  // 1 leaves rounds after it even when it lands late.
  constexpr int kRounds = 10;
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-kill-client";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml")
      << SmallExperiment("fl-kill-client", "[{name: east, clients: 3}]", kRounds, 2, "4s");
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string db = dir + "/run/state.db";
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_TRUE(WaitForRound(db, 1, 120)) << Read(dir + "/out.txt");
  auto launched = QueryRows(db,
                            "SELECT message FROM events WHERE kind = 'federation_launch' AND "
                            "message LIKE 'client east/1 pid=%'");
  ASSERT_EQ(launched.size(), 1u);
  const pid_t victim = std::stoi(launched[0][0].substr(launched[0][0].find("pid=") + 4));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const size_t committed_at_kill =
      QueryRows(db, "SELECT round FROM rounds WHERE region = ''").size();
  ASSERT_LE(committed_at_kill, static_cast<size_t>(kRounds - 2))
      << "the kill landed too late to leave rounds after it";
  ASSERT_EQ(WaitExit(run, 180), 0) << Read(dir + "/out.txt");
  const double after_kill =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  auto rounds = QueryRows(db, "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), static_cast<size_t>(kRounds)) << Read(dir + "/out.txt");
  // Under load a client may still be loading its data at round 1's deadline; min_clients is 2.
  // The round open at the kill may have had the client's update before the signal landed.
  for (size_t r = 0; r <= committed_at_kill; ++r) {
    EXPECT_TRUE(rounds[r][1] == "2" || rounds[r][1] == "3") << "round " << r + 1;
  }
  // Every later round went on without the dead client, each waiting out the 4 s deadline for
  // it, and no longer.
  const size_t later = rounds.size() - committed_at_kill - 1;
  for (size_t r = committed_at_kill + 1; r < rounds.size(); ++r) {
    EXPECT_EQ(rounds[r][1], "2") << "round " << r + 1;
  }
  EXPECT_GE(after_kill, 4.0 * static_cast<double>(later));
  EXPECT_LT(after_kill, 90.0);
  auto exits = QueryRows(db, "SELECT message FROM events WHERE kind = 'federation_exit'");
  bool seen = false;
  for (const auto& e : exits) seen = seen || e[0].rfind("client east/1 exited", 0) == 0;
  EXPECT_TRUE(seen);
  auto trial = QueryRows(db, "SELECT state FROM trials WHERE id = 1");
  ASSERT_EQ(trial.size(), 1u);
  EXPECT_EQ(trial[0][0], "COMPLETED");
}

// SIGKILL of the orchestrator after round 2 (its aggregators and clients die with it); `sextant
// resume` continues after the last checkpointed round with the same federation, and the rounds
// table ends with every round exactly once.
TEST(FederatedRunTest, ResumeAfterOrchestratorKillContinuesFromTheLastCompletedRound) {
  // Rounds of this small model take tens of milliseconds: enough of them that the kill after
  // round 2 lands well before the end.
  constexpr int kRounds = 30;
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-kill-orchestrator";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << SmallExperiment(
      "fl-kill-orch", "[{name: east, clients: 2}, {name: west, clients: 2}]", kRounds, 4, "60s");
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string db = dir + "/run/state.db";
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out1.txt");
  ASSERT_TRUE(WaitForRound(db, 2, 180)) << Read(dir + "/out1.txt");
  ASSERT_EQ(kill(run, SIGKILL), 0);
  waitpid(run, nullptr, 0);
  auto before = QueryRows(db, "SELECT MAX(round) FROM rounds WHERE region = ''");
  ASSERT_EQ(before.size(), 1u);
  const int listed = std::stoi(before[0][0]);
  ASSERT_LT(listed, kRounds) << "the run finished before it was killed";
  auto id_before = QueryRows(db, "SELECT value FROM meta WHERE key = 'federation_id'");
  const double accuracy_before =
      std::stod(QueryRows(db, "SELECT accuracy FROM rounds WHERE region = '' AND round = " +
                                  std::to_string(listed))[0][0]);

  pid_t resumed = Spawn({bin + "/sextant", "resume", dir + "/run"}, dir + "/out2.txt");
  ASSERT_EQ(WaitExit(resumed, 240), 0) << Read(dir + "/out2.txt");
  const std::string out = Read(dir + "/out2.txt");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("resuming after round (\\d+)"))) << out;
  const int resumed_after = std::stoi(m[1]);
  // The checkpoint (which carries the round's rows) is written before the rows: the last
  // listed round, or (killed in between) the one after it, whose rows the resume restores.
  EXPECT_TRUE(resumed_after == listed || resumed_after == listed + 1) << out;
  EXPECT_GE(resumed_after, 1);
  for (int r = 1; r <= resumed_after; ++r) {
    EXPECT_EQ(out.find("round=" + std::to_string(r) + " "), std::string::npos) << out;
  }
  // Killed between the last round's checkpoint and its rows, the resume only restores those rows.
  if (resumed_after < kRounds) {
    EXPECT_NE(out.find("round=" + std::to_string(resumed_after + 1) + " "), std::string::npos)
        << out;
  }
  auto rounds =
      QueryRows(db, "SELECT round, clients, accuracy FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), static_cast<size_t>(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    EXPECT_EQ(rounds[r][0], std::to_string(r + 1));
    EXPECT_EQ(rounds[r][1], "4");
  }
  // Training went on from the restored model, not from a fresh one.
  EXPECT_GT(std::stod(rounds[kRounds - 1][2]), accuracy_before - 0.05);
  EXPECT_EQ(QueryRows(db, "SELECT value FROM meta WHERE key = 'federation_id'"), id_before);
  auto trial = QueryRows(db, "SELECT state FROM trials WHERE id = 1");
  ASSERT_EQ(trial.size(), 1u);
  EXPECT_EQ(trial[0][0], "COMPLETED");
}

// Federated tuning: with `search:` each trial is a whole federated run (its own run directory
// under the trial's checkpoint folder) with the trial's parameters in the federation block, and
// the trial's value is that run's final global validation accuracy.
// Federated tuning over TLS: each trial's inner federated run serves and dials over mTLS too,
// its participants with certificates of their own from the run's CA.
TEST(FederatedRunTest, SearchOverTlsRunsEveryInnerFederatedRunOverMutualTls) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-search-tls";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-search-tls
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.02, max: 0.1, log: true}
search: {sampler: random, seed: 4, max_trials: 2, max_concurrent: 1}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 2
  round_deadline: 60s
  seed: 2
  examples_per_client: 300
  validation_examples: 500
)";
  const std::string bin = SEXTANT_BIN_DIR;
  ASSERT_EQ(
      WaitExit(Spawn({bin + "/sextant", "certs", "init", dir + "/certs"}, dir + "/certs.txt"), 60),
      0)
      << Read(dir + "/certs.txt");
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
                     "--tls-dir", dir + "/certs"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 400), 0) << Read(dir + "/out.txt");
  auto trials = QueryRows(dir + "/run/state.db", "SELECT id, state FROM trials ORDER BY id");
  ASSERT_EQ(trials.size(), 2u) << Read(dir + "/out.txt");
  for (const auto& t : trials) {
    EXPECT_EQ(t[1], "COMPLETED") << t[0];
    const std::string inner = dir + "/run/artifacts/checkpoints/trial-" + t[0] + "/federation";
    auto rounds = QueryRows(inner + "/state.db",
                            "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
    ASSERT_EQ(rounds.size(), 2u) << inner;
    // The inner run issued its participants' certificates (it ran over mTLS) and wrote no
    // loopback secrets.
    EXPECT_TRUE(std::filesystem::exists(inner + "/federation/tls/west/client-1/1.pem")) << inner;
    EXPECT_FALSE(std::filesystem::exists(inner + "/secrets")) << inner;
  }
}

TEST(FederatedRunTest, SearchRunsEachTrialAsAFederatedRunWithItsParameters) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-search";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-search
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.02, max: 0.1, log: true}
  clients_per_round: {type: int, min: 2, max: 3}
search: {sampler: random, seed: 4, max_trials: 3, max_concurrent: 1}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 2
  round_deadline: 60s
  seed: 2
  examples_per_client: 400
  validation_examples: 1000
  secure_aggregation: false
)";
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 400), 0) << Read(dir + "/out.txt");
  auto trials =
      QueryRows(dir + "/run/state.db", "SELECT id, state, params, value FROM trials ORDER BY id");
  ASSERT_EQ(trials.size(), 3u) << Read(dir + "/out.txt");
  for (const auto& t : trials) {
    EXPECT_EQ(t[1], "COMPLETED") << t[0];
    const std::string nested =
        dir + "/run/artifacts/checkpoints/trial-" + t[0] + "/federation/state.db";
    auto rounds = QueryRows(nested,
                            "SELECT round, clients, accuracy FROM rounds WHERE region = '' "
                            "ORDER BY round");
    ASSERT_EQ(rounds.size(), 2u) << nested;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(t[2], m, std::regex("\"clients_per_round\":\\s*(\\d+)"))) << t[2];
    // The trial's clients_per_round reached its federation: that many clients per round.
    EXPECT_EQ(rounds[1][1], m[1].str()) << t[2];
    // The objective is the federated run's final global validation accuracy (printed to 4 places).
    EXPECT_NEAR(std::stod(t[3]), std::stod(rounds[1][2]), 1e-4) << t[2];
    EXPECT_GT(std::stod(t[3]), 0.3);
  }
}

// `sextant run DIR/exp.yaml --run-dir DIR/run`, its output in DIR/out.txt: its exit code.
int RunExperimentIn(const std::string& dir, int timeout_seconds) {
  const std::string bin = SEXTANT_BIN_DIR;
  return WaitExit(Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                        dir + "/out.txt"),
                  timeout_seconds);
}

// `sextant results DIR/run --format json` (kept in DIR/results.json), parsed; null when it
// fails.
nlohmann::json ResultsOf(const std::string& dir) {
  const std::string bin = SEXTANT_BIN_DIR;
  if (WaitExit(Spawn({bin + "/sextant", "results", dir + "/run", "--format", "json"},
                     dir + "/results.json"),
               60) != 0) {
    return nullptr;
  }
  return nlohmann::json::parse(Read(dir + "/results.json"), nullptr, false);
}

// examples/federated/pytorch-client: every client trains with its own PyTorch code through
// `federation.client_command`; the global model still learns.
// A DP federated search of 2-round trials on 3 clients, as a file: `extra` appended, `search` as its search block.
std::string DpStudyYaml(const std::string& name, const std::string& search,
                        const std::string& extra) {
  return absl::StrCat("name: ", name, R"(
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.02, max: 0.1, log: true}
search: )", search, R"(
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 2
  round_deadline: 60s
  seed: 2
  examples_per_client: 600
  validation_examples: 500
  dp: {noise_multiplier: 2.0, clip_norm: 1.0, delta: 1.0e-5}
)", extra);
}

// A federated search with DP: every trial spends privacy on the same clients, and results
// say what the study spent in all, RDP composed over every round of every trial (three
// trials of 2 rounds spend what one run of 6 rounds would), beside each trial's own epsilon.
TEST(FederatedRunTest, AFederatedSearchWithDpReportsThePrivacyTheWholeStudySpent) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-dp-study";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << DpStudyYaml(
      "fl-dp-study", "{sampler: random, seed: 4, max_trials: 3, max_concurrent: 1}", "");
  const std::string bin = SEXTANT_BIN_DIR;
  ASSERT_EQ(RunExperimentIn(dir, 300), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  sextant::RdpAccountantOptions a;
  a.noise_multiplier = 2.0;
  a.delta = 1e-5;
  const sextant::RdpAccountant one = *sextant::RdpAccountant::Create(a);
  ASSERT_TRUE(doc.contains("privacy")) << doc.dump(2);
  const nlohmann::json& p = doc["privacy"];
  EXPECT_EQ(p["method"], "rdp_composition");
  EXPECT_EQ(p["rounds"], 6);
  EXPECT_NEAR(p["study_epsilon"].get<double>(), one.EpsilonAfter(6), 1e-9);
  ASSERT_EQ(p["per_trial"].size(), 3u);
  for (const nlohmann::json& t : p["per_trial"]) {
    EXPECT_NEAR(t["epsilon"].get<double>(), one.EpsilonAfter(2), 1e-9) << t;
    EXPECT_EQ(t["rounds"], 2);
  }
  EXPECT_GT(p["study_epsilon"].get<double>(), one.EpsilonAfter(2) * 1.5);
  // The study's epsilon after each trial, in order: 2, 4 and 6 rounds composed.
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(p["per_trial"][i]["study_epsilon"].get<double>(), one.EpsilonAfter(2 * (i + 1)),
                1e-9);
  }
  ASSERT_EQ(WaitExit(Spawn({bin + "/sextant", "report", dir + "/run", "-o", dir + "/report.html"},
                           dir + "/report.txt"),
                     60),
            0)
      << Read(dir + "/report.txt");
  const std::string html = Read(dir + "/report.html");
  EXPECT_NE(html.find("id=\"section-study-privacy\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-study-privacy\" data-marks=\"4\""), std::string::npos);
  ASSERT_EQ(WaitExit(Spawn({bin + "/sextant", "results", dir + "/run"}, dir + "/table.txt"), 60),
            0);
  EXPECT_NE(Read(dir + "/table.txt").find("privacy: the study spent epsilon"), std::string::npos)
      << Read(dir + "/table.txt");
}

// budget.max_epsilon: no trial starts that could take the study past it. Trials of 2 rounds at
// sigma 2 spend 3.19 alone, 4.75 for two and 6.00 for three: a cap of 5 lets two run, and the
// run ends EPSILON_EXHAUSTED saying what one more would reach; a resume with the cap raised to
// 6.5 runs one more and ends there again.
TEST(FederatedRunTest, MaxEpsilonStopsTheStudyBeforeATrialThatWouldPassIt) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-dp-cap";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << DpStudyYaml(
      "fl-dp-cap", "{sampler: random, seed: 4, max_trials: 5, max_concurrent: 1}",
      "budget: {max_epsilon: 5}\n");
  const std::string bin = SEXTANT_BIN_DIR;
  ASSERT_EQ(RunExperimentIn(dir, 300), 0) << Read(dir + "/out.txt");
  EXPECT_NE(Read(dir + "/out.txt")
                .find("budget.max_epsilon 5 reached: the study has spent epsilon 4.753; one more "
                      "trial could bring it to 6.003"),
            std::string::npos)
      << Read(dir + "/out.txt");
  nlohmann::json doc = ResultsOf(dir);
  EXPECT_EQ(doc["state"], "EPSILON_EXHAUSTED");
  EXPECT_EQ(doc["trials"].size(), 2u);
  EXPECT_LE(doc["privacy"]["study_epsilon"].get<double>(), 5.0);
  ASSERT_EQ(WaitExit(Spawn({bin + "/sextant", "resume", dir + "/run", "--max-epsilon", "6.5"},
                           dir + "/resume.txt"),
                     300),
            0)
      << Read(dir + "/resume.txt");
  doc = ResultsOf(dir);
  EXPECT_EQ(doc["state"], "EPSILON_EXHAUSTED");
  EXPECT_EQ(doc["trials"].size(), 3u);
  EXPECT_NEAR(doc["privacy"]["study_epsilon"].get<double>(), 6.003, 1e-3);
  for (const nlohmann::json& t : doc["trials"]) EXPECT_EQ(t["state"], "COMPLETED") << t;
}

// privacy.selection: random_stopping draws the number of trials from the run's seed, reports the
// selection's epsilon (below composition's), and keeps only the best trial's model.
TEST(FederatedRunTest, RandomStoppingDrawsTheTrialsAndReleasesOnlyTheBestModel) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-dp-stopping";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << DpStudyYaml(
      "fl-dp-stopping", "{sampler: random, seed: 4, max_concurrent: 1}",
      "privacy: {selection: random_stopping, mean_trials: 4}\n");
  ASSERT_EQ(RunExperimentIn(dir, 300), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  sextant::RandomStopping r;
  r.gamma = 0.25;  // E[K] = 1 / gamma = 4 for the geometric distribution (eta 1)
  const int64_t k = sextant::DrawStudyTrials(r, 4);
  ASSERT_EQ(doc["trials"].size(), static_cast<size_t>(k));
  const nlohmann::json& p = doc["privacy"];
  EXPECT_EQ(p["method"], "random_stopping");
  EXPECT_EQ(p["trials_drawn"], k);
  EXPECT_NEAR(p["mean_trials"].get<double>(), 4, 1e-9);
  // One trial spends 3.19; the selection at most three times that, whatever K.
  EXPECT_GT(p["study_epsilon"].get<double>(), 3.19);
  EXPECT_LE(p["study_epsilon"].get<double>(), 3 * 3.1904);
  const int64_t best = doc["best"]["trial"].get<int64_t>();
  for (int64_t id = 1; id <= k; ++id) {
    const std::string trial_dir = sextant::RunDir::FederatedTrialDir(dir + "/run", id);
    EXPECT_EQ(std::filesystem::exists(trial_dir + "/model/final.safetensors"), id == best)
        << "trial " << id;
    EXPECT_EQ(std::filesystem::exists(trial_dir + "/federation"), id == best) << "trial " << id;
    EXPECT_TRUE(std::filesystem::exists(sextant::RunDir::DbPath(trial_dir)));  // its rounds stay
  }
  EXPECT_NE(Read(dir + "/out.txt").find(absl::StrCat("random stopping drew ", k, " trials")),
            std::string::npos)
      << Read(dir + "/out.txt");
}

// epsilon is a built-in metric of federated trials: an objective beside val_accuracy and a
// constraint. clients_per_round tunes the sampling rate, so trials of 2 of 4 clients spend less
// than trials of all 4; those over the cap are infeasible and the front holds feasible ones only.
TEST(FederatedRunTest, EpsilonIsAnObjectiveAndAConstraintOfFederatedTrials) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-dp-front";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-dp-front
objectives:
  - {metric: val_accuracy, goal: maximize}
  - {metric: epsilon, goal: minimize}
constraints:
  - {metric: epsilon, max: 4}
parameters:
  local_lr: {type: float, min: 0.02, max: 0.1, log: true}
  clients_per_round: {type: categorical, values: [2, 4]}
search: {sampler: random, seed: 4, max_trials: 4, max_concurrent: 2}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 4}]
  rounds: 3
  round_deadline: 60s
  seed: 2
  examples_per_client: 600
  validation_examples: 500
  dp: {noise_multiplier: 2.0, clip_norm: 1.0, delta: 1.0e-5}
)";
  ASSERT_EQ(RunExperimentIn(dir, 300), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  auto epsilon_after_3 = [](double q) {
    sextant::RdpAccountantOptions a;
    a.noise_multiplier = 2.0;
    a.sampling_rate = q;
    a.delta = 1e-5;
    if (q < 1) a.orders = sextant::DefaultRdpOrders(true);
    return sextant::RdpAccountant::Create(a)->EpsilonAfter(3);
  };
  std::set<int64_t> feasible;
  int each[2] = {0, 0};
  for (const nlohmann::json& t : doc["trials"]) {
    ASSERT_EQ(t["state"], "COMPLETED") << t;
    const bool all = t["params"]["clients_per_round"] == "4";
    ++each[all];
    const double eps = t["values"][1].get<double>();
    EXPECT_NEAR(eps, epsilon_after_3(all ? 1.0 : 0.5), 1e-9) << t;
    EXPECT_EQ(t["feasible"].get<bool>(), eps <= 4) << t;
    if (eps <= 4) feasible.insert(t["id"].get<int64_t>());
  }
  ASSERT_GT(each[0], 0);
  ASSERT_GT(each[1], 0);
  EXPECT_GT(epsilon_after_3(1.0), 4);  // all four clients each round: over the cap
  ASSERT_FALSE(doc["pareto"].empty());
  for (const nlohmann::json& p : doc["pareto"]) {
    EXPECT_TRUE(feasible.contains(p["trial"].get<int64_t>())) << p;
  }
}

// Rounds as the fidelity: ASHA schedules federated trials by rounds. A trial paused at a rung
// resumes its own federated run from its checkpoint when promoted (never from round 1): each
// trial's rounds table holds rounds 1..its fidelity once each, and its log says where it
// resumed. Pruned trials spend fewer rounds than a full search would.
class RoundsFidelityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundsFidelityTest, AshaPausesFederatedTrialsAtRungsAndResumesThemFromTheirCheckpoint) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string mode = GetParam();
  const std::string dir = ::testing::TempDir() + "/fl-rounds-fidelity-" + mode;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string federation =
      mode == "buffered" ? "  mode: buffered\n  buffer_size: 2\n  secure_aggregation: false\n"
                         : absl::StrCat("  secure_aggregation: ", mode == "secure" ? "true" : "false", "\n");
  std::ofstream(dir + "/exp.yaml") << "name: fl-rounds-" << mode << R"(
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.005, max: 0.2, log: true}
search:
  sampler: random
  seed: 3
  max_trials: 4
  max_concurrent: 2
  scheduler: asha
  fidelity: {name: rounds, min: 1, max: 4, reduction_factor: 2}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 4
  seed: 2
  examples_per_client: 300
  validation_examples: 300
)" << federation << (mode == "buffered" ? "" : "  round_deadline: 60s\n");
  ASSERT_EQ(RunExperimentIn(dir, 400), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  ASSERT_EQ(doc["trials"].size(), 4u) << doc.dump(2);
  int completed = 0, pruned = 0;
  int64_t rounds_run = 0;
  for (const nlohmann::json& t : doc["trials"]) {
    const int64_t id = t["id"].get<int64_t>();
    const int64_t fidelity = static_cast<int64_t>(t["fidelity"].get<double>());
    completed += t["state"] == "COMPLETED";
    pruned += t["state"] == "PRUNED";
    if (t["state"] == "COMPLETED") {
      EXPECT_EQ(fidelity, 4) << t;
    }
    // Rounds 1..fidelity, each once: a promotion went on from the rung, it did not start over.
    std::vector<int64_t> rounds;
    for (const nlohmann::json& r : t["rounds"]) rounds.push_back(r["round"].get<int64_t>());
    std::vector<int64_t> want;
    for (int64_t r = 1; r <= fidelity; ++r) want.push_back(r);
    EXPECT_EQ(rounds, want) << "trial " << id;
    rounds_run += fidelity;
    // Every attempt after the first resumed after the round its predecessor paused at.
    const int attempts = t["attempts"].get<int>();
    for (int a = 2; a <= attempts; ++a) {
      const std::string log = Read(absl::StrCat(dir, "/run/logs/trial-", id, ".", a, ".out"));
      EXPECT_NE(log.find("sextant: resuming after round "), std::string::npos)
          << "trial " << id << " attempt " << a << ":\n" << log;
    }
  }
  EXPECT_GE(completed, 1);
  EXPECT_GE(pruned, 1);
  EXPECT_LT(rounds_run, 4 * 4);  // fewer rounds than four whole runs
}

INSTANTIATE_TEST_SUITE_P(SyncAndBuffered, RoundsFidelityTest,
                         ::testing::Values("plaintext", "secure", "buffered"));

// Bit-exact pause and resume: a federated search by rounds pauses each trial at round 4; ASHA
// promotes the better one, which resumes from its checkpoint (global model, server optimiser
// state, round index) to round 8. Its final model is byte for byte that of a plain 8-round
// run of the same configuration and seed, which never paused. A search by rounds makes its
// rounds reproducible by default (federation.reproducible); the plain run asks for it.
// fedadam has server state to carry over; the buffered runs apply every client's update at
// each step (buffer_size = all clients), so that what a step holds does not depend on timing.
// The BOHB and Hyperband runs check the other schedulers that pause (the median rule stops
// trials, it never pauses them): their promoted trial is found by its attempts.
class BitExactResumeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BitExactResumeTest, ATrialPausedAtRound4AndResumedTo8EqualsAnUninterruptedRun) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string mode = GetParam();
  const bool secure = absl::StrContains(mode, "secure");
  const bool buffered = absl::StrContains(mode, "buffered");
  const bool bohb = absl::StrContains(mode, "bohb");
  const bool hyperband = absl::StrContains(mode, "hyperband");
  const std::string dir = ::testing::TempDir() + "/fl-bit-exact-" + mode;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/plain");
  const std::string federation = absl::StrCat(R"(
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 8
  seed: 2
  server_optimizer: fedadam
  server_lr: 0.05
  examples_per_client: 300
  validation_examples: 300
)",
      "  secure_aggregation: ", secure ? "true" : "false", "\n",
      buffered ? "  mode: buffered\n  buffer_size: 4\n" : "  round_deadline: 60s\n");
  std::ofstream(dir + "/exp.yaml") << "name: bit-exact-" << mode << R"(
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: categorical, values: [0.02, 0.1]}
search:
  max_concurrent: 2
  fidelity: {name: rounds, min: 4, max: 8, reduction_factor: 2}
)" << (bohb        ? "  sampler: random\n  max_trials: 3\n  scheduler: bohb\n"
            : hyperband ? "  sampler: random\n  max_trials: 6\n  scheduler: hyperband\n"
                        : "  sampler: grid\n  max_trials: 2\n  scheduler: asha\n")
                                    << R"(trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:)" << federation;
  ASSERT_EQ(RunExperimentIn(dir, 400), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  const nlohmann::json* promoted = nullptr;
  for (const nlohmann::json& t : doc["trials"]) {
    if (t["state"] == "COMPLETED" && t["attempts"].get<int>() == 2) promoted = &t;
  }
  ASSERT_NE(promoted, nullptr) << doc.dump(2);
  const int64_t id = (*promoted)["id"].get<int64_t>();
  ASSERT_EQ((*promoted)["attempts"].get<int>(), 2) << *promoted;  // paused at 4, resumed
  const std::string resumed_log = Read(absl::StrCat(dir, "/run/logs/trial-", id, ".2.out"));
  EXPECT_NE(resumed_log.find("sextant: resuming after round 4"), std::string::npos)
      << resumed_log;
  const std::string lr = (*promoted)["params"]["local_lr"].get<std::string>();

  std::ofstream(dir + "/plain/exp.yaml") << "name: bit-exact-plain-" << mode << R"(
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  reproducible: true
  local_lr: )" << lr << federation;
  ASSERT_EQ(RunExperimentIn(dir + "/plain", 300), 0) << Read(dir + "/plain/out.txt");
  const std::string resumed_model =
      Read(sextant::RunDir::FederatedTrialDir(dir + "/run", id) + "/model/final.safetensors");
  const std::string plain_model = Read(dir + "/plain/run/model/final.safetensors");
  ASSERT_GT(plain_model.size(), 12730u * 4);
  EXPECT_TRUE(resumed_model == plain_model)
      << "trial " << id << " (local_lr " << lr << ") ends with another model than the plain run";
}

INSTANTIATE_TEST_SUITE_P(SyncAndBufferedPlainAndSecure, BitExactResumeTest,
                         ::testing::Values("plaintext", "secure", "buffered", "buffered-secure",
                                           "plaintext-bohb", "plaintext-hyperband"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The trial and federation blocks of the tests of federated searches on pools: two regions of
// the built-in catalog with 2 clients each, `rounds` rounds.
std::string TwoCloudRegions(int rounds) {
  return absl::StrCat(R"(trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: us-east-1, clients: 2}, {name: eu-west-1, clients: 2}]
  rounds: )", rounds, R"(
  seed: 1
  secure_aggregation: false
  round_deadline: 60s
  examples_per_client: 300
  validation_examples: 300
)");
}

// A federated search on pools: each trial's participants are placed and billed on the pools in
// their regions (the trials run at once are those max_instances holds), the search's cost is
// the sum of its trials' bills, and budget.max_cost covers them all: no trial starts, and no
// running trial goes on, past what the cap holds. A resume with a raised cap completes.
TEST(FederatedRunTest, AFederatedSearchOnPoolsBillsEveryTrialsParticipantsUnderOneBudget) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-search-on-pools";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-search-on-pools
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: categorical, values: [0.02, 0.05, 0.1]}
search: {sampler: grid, max_trials: 3, max_concurrent: 3, scheduler: asha,
         fidelity: {name: rounds, min: 2, max: 4}}
)" << TwoCloudRegions(4) << R"(resources:
  pools:
    - {name: us-gpu, region: us-east-1, instance: gpu.1x, hosts: clients, max_instances: 4}
    - {name: us-agg, region: us-east-1, instance: cpu.small, hosts: aggregator, max_instances: 2}
    - {name: eu-gpu, region: eu-west-1, instance: gpu.1x, hosts: clients, max_instances: 4}
    - {name: eu-agg, region: eu-west-1, instance: cpu.small, hosts: aggregator, max_instances: 2}
budget: {max_cost: 0.3}
)";
  ASSERT_EQ(RunExperimentIn(dir, 400), 0) << Read(dir + "/out.txt");
  const std::string out = Read(dir + "/out.txt");
  // max_instances holds two trials' participants (2 clients and an aggregator per region).
  EXPECT_NE(out.find("max_instances hold 2 trials' participants at once; running 2 of "
                     "search.max_concurrent 3"),
            std::string::npos)
      << out;
  nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  EXPECT_EQ(doc["state"], "BUDGET_EXHAUSTED") << out;
  const double capped = doc["cost"]["total"].get<double>();
  EXPECT_GT(capped, 0) << doc["cost"];
  EXPECT_LE(capped, 0.3) << doc["cost"];
  for (const char* pool : {"us-gpu", "us-agg", "eu-gpu", "eu-agg"}) {
    EXPECT_GT(doc["cost"]["by_pool"].value(pool, 0.0), 0) << pool << ": " << doc["cost"];
  }
  // Each trial's cost is its own run's bill.
  auto billed = [&](int64_t id) {
    const std::string db = sextant::RunDir::FederatedTrialDir(dir + "/run", id) + "/state.db";
    if (!std::filesystem::exists(db)) return 0.0;
    return std::stod(QueryRows(db, "SELECT COALESCE(SUM(cost), 0) FROM costs WHERE kind != "
                                   "'trial'")[0][0]);
  };
  double sum = 0;
  for (const nlohmann::json& t : doc["trials"]) {
    const double b = billed(t["id"].get<int64_t>());
    EXPECT_NEAR(t.value("cost", 0.0), b, 1e-9) << t;
    sum += b;
  }
  EXPECT_NEAR(sum, capped, 1e-9);
  // A raised cap: the study goes on and completes, its earlier bills counted.
  const std::string bin = SEXTANT_BIN_DIR;
  ASSERT_EQ(WaitExit(Spawn({bin + "/sextant", "resume", dir + "/run", "--max-cost", "10"},
                           dir + "/out2.txt"),
                     400),
            0)
      << Read(dir + "/out2.txt");
  doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null());
  EXPECT_EQ(doc["state"], "COMPLETED") << Read(dir + "/out2.txt");
  EXPECT_GT(doc["cost"]["total"].get<double>(), capped);
  EXPECT_LE(doc["cost"]["total"].get<double>(), 10);
  EXPECT_EQ(doc["trials"].size(), 3u);
}

// The dollars a federated trial's participants were billed are an objective: each trial's second
// value is its own run's bill, and the front is drawn from them.
TEST(FederatedRunTest, TheBilledDollarsOfFederatedTrialsAreAnObjective) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-cost-objective";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-cost-objective
objectives: [{metric: val_accuracy, goal: maximize}, {metric: cost, goal: minimize}]
parameters:
  local_lr: {type: float, min: 0.01, max: 0.2, log: true}
search: {sampler: nsga2, max_trials: 3, max_concurrent: 1}
)" << TwoCloudRegions(2) << R"(resources:
  pools:
    - {name: us, region: us-east-1, instance: gpu.1x, max_instances: 3}
    - {name: eu, region: eu-west-1, instance: gpu.1x, max_instances: 3}
)";
  ASSERT_EQ(RunExperimentIn(dir, 300), 0) << Read(dir + "/out.txt");
  const nlohmann::json doc = ResultsOf(dir);
  ASSERT_FALSE(doc.is_null()) << Read(dir + "/results.json");
  ASSERT_EQ(doc["trials"].size(), 3u);
  for (const nlohmann::json& t : doc["trials"]) {
    ASSERT_EQ(t["state"], "COMPLETED") << t;
    const std::string db =
        sextant::RunDir::FederatedTrialDir(dir + "/run", t["id"].get<int64_t>()) + "/state.db";
    const double bill = std::stod(
        QueryRows(db, "SELECT COALESCE(SUM(cost), 0) FROM costs WHERE kind != 'trial'")[0][0]);
    EXPECT_GT(bill, 0);
    EXPECT_NEAR(t["values"][1].get<double>(), bill, 1e-9) << t;
  }
  EXPECT_FALSE(doc["pareto"].empty());
}

TEST(FederatedRunTest, PytorchCommandClientExampleLearns) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  SEXTANT_REQUIRE_COMPONENT(
      std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") == 0,
      "python3-torch is not installed (scripts/install-deps --test)");
  const std::string dir = ::testing::TempDir() + "/fl-torch";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string example =
      std::string(SEXTANT_SOURCE_DIR) + "/examples/federated/pytorch-client/fedavg-pytorch.yaml";
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t run =
      Spawn({bin + "/sextant", "run", example, "--run-dir", dir + "/run"}, dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 600), 0) << Read(dir + "/out.txt");
  auto rounds =
      QueryRows(dir + "/run/state.db",
                "SELECT round, clients, accuracy FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), 3u) << Read(dir + "/out.txt");
  for (const auto& r : rounds) EXPECT_EQ(r[1], "3");
  // Three clients of 1,000 examples, three rounds of one local epoch of SGD in PyTorch.
  EXPECT_GT(std::stod(rounds[2][2]), 0.6) << Read(dir + "/out.txt");  // 0.68 when written
  EXPECT_GT(std::stod(rounds[2][2]), std::stod(rounds[0][2]) - 0.02);
  // The command really ran: its round outputs sit in the clients' exchange folders.
  const std::string out = Read(dir + "/run/federation/client-east-0/round-3.out");
  EXPECT_NE(out.find("num_examples=1000"), std::string::npos) << out;
}

}  // namespace

namespace secure {

// 2 regions x 5 clients, every client sampled; min_clients 8 lets each region close at the 10 s
// deadline with 3 of its 5, so a dead client costs each later round one deadline. The deadline
// leaves room for every client to start and make round 1 on a loaded machine: the runs compared
// must aggregate the same clients in every round, or their accuracies differ for that alone.
std::string TenClients(const std::string& name, bool secure, bool hide_region_sums = false) {
  return "name: " + name + R"(
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 5}, {name: west, clients: 5}]
  rounds: 4
  local_lr: 0.05
  min_clients: 8
  round_deadline: 10s
  seed: 5
  examples_per_client: 600
  validation_examples: 2000
  # Every client takes 30x its training time: a round lasts long enough for the test to kill
  # east/1 between rounds 1 and 2 (a plaintext round of this size is over in some 20 ms).
  stragglers:
    clients: [east/0, east/1, east/2, east/3, east/4, west/0, west/1, west/2, west/3, west/4]
    slowdown: 30
  secure_aggregation: )" +
         (secure ? "true" : "false") + "\n" +
         (hide_region_sums ? "  hide_region_sums: true\n" : "");
}

struct KilledRun {
  std::vector<std::vector<std::string>> rounds;  // round, clients, accuracy
  std::string out;
};

// Runs the experiment and SIGKILLs client east/1 once round 1 is in the rounds table.
KilledRun RunKillingEast1(const std::string& dir, const std::string& yaml) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/exp.yaml") << yaml;
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string db = dir + "/run/state.db";
  KilledRun r;
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  if (!WaitForRound(db, 1, 120)) {
    WaitExit(run, 0);
    r.out = Read(dir + "/out.txt");
    return r;
  }
  auto launched = QueryRows(db,
                            "SELECT message FROM events WHERE kind = 'federation_launch' AND "
                            "message LIKE 'client east/1 pid=%'");
  if (launched.size() == 1) {
    kill(std::stoi(launched[0][0].substr(launched[0][0].find("pid=") + 4)), SIGKILL);
  }
  const int rc = WaitExit(run, 180);
  r.out = "exit " + std::to_string(rc) + "\n" + Read(dir + "/out.txt");
  r.rounds =
      QueryRows(db, "SELECT round, clients, accuracy FROM rounds WHERE region = '' ORDER BY round");
  return r;
}

}  // namespace secure

// The acceptance run of secure aggregation: the same 2 x 5 federation, once in the clear and
// once under SecAgg+, with the same client SIGKILLed after round 1 in both. The secure run
// recovers the dropout in every later round (its region proceeds with the 4 survivors) and ends
// within 0.5% of the plaintext run's accuracy (the 16-bit quantisation moves the mean by at most
// 4/32767 per coordinate).
TEST(FederatedRunTest, SecureAggregationWithAKilledClientMatchesThePlaintextRun) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string base = ::testing::TempDir() + "/fl-secure";
  secure::KilledRun plain =
      secure::RunKillingEast1(base + "-plain", secure::TenClients("fl-plain", false));
  secure::KilledRun masked =
      secure::RunKillingEast1(base + "-masked", secure::TenClients("fl-masked", true));
  ASSERT_EQ(plain.rounds.size(), 4u) << plain.out;
  ASSERT_EQ(masked.rounds.size(), 4u) << masked.out;
  // After the kill east has 4 live clients: rounds 3 and 4 aggregate 9 clients in both runs.
  for (int r = 2; r < 4; ++r) {
    EXPECT_EQ(masked.rounds[r][1], "9") << masked.out;
    EXPECT_EQ(plain.rounds[r][1], "9") << plain.out;
  }
  const double a_plain = std::stod(plain.rounds[3][2]), a_masked = std::stod(masked.rounds[3][2]);
  EXPECT_GT(a_masked, 0.6);
  EXPECT_NEAR(a_masked, a_plain, 0.005) << plain.out << masked.out;
  // Each region's aggregator ran the protocol: no plaintext update reached it.
  const std::string east = Read(base + "-masked/run/logs/aggregator-east.log");
  EXPECT_NE(east.find("round=4 clients=4"), std::string::npos) << east;
  // A live client took part to the end (on a loaded machine it may miss round 1's first stage,
  // which closes at the deadline once the region has enough keys).
  const std::string client = Read(base + "-masked/run/logs/client-west-0.log");
  EXPECT_NE(client.find("client_done rounds="), std::string::npos) << client;
  EXPECT_NE(client.find("round=4 train_loss="), std::string::npos) << client;
  EXPECT_EQ(client.find("rejected=", client.find("round=4 train_loss=")), std::string::npos)
      << client;

  // Two levels (hide_region_sums): each region's sum goes on masked, in one more SecAgg round
  // among the regions, so the orchestrator decodes only the total; the run learns the same.
  secure::KilledRun hidden = secure::RunKillingEast1(
      base + "-hidden", secure::TenClients("fl-hidden", true, /*hide_region_sums=*/true));
  ASSERT_EQ(hidden.rounds.size(), 4u) << hidden.out;
  for (int r = 2; r < 4; ++r) EXPECT_EQ(hidden.rounds[r][1], "9") << hidden.out;
  EXPECT_NEAR(std::stod(hidden.rounds[3][2]), a_plain, 0.005) << plain.out << hidden.out;
  std::printf("round-4 val_accuracy: plaintext %s, secure %s, hide_region_sums %s\n",
              plain.rounds[3][2].c_str(), masked.rounds[3][2].c_str(), hidden.rounds[3][2].c_str());
  // No region pushed its mean: each took part in the regions' round instead, every round.
  for (const char* region : {"east", "west"}) {
    const std::string log = Read(base + "-hidden/run/logs/aggregator-" + region + ".log");
    EXPECT_EQ(log.find("pushed="), std::string::npos) << log;
    for (int r = 1; r <= 4; ++r) {
      EXPECT_NE(log.find("round=" + std::to_string(r) + " clients="), std::string::npos) << log;
    }
    int ok = 0;
    for (size_t at = log.find("regions_round=ok"); at != std::string::npos;
         at = log.find("regions_round=ok", at + 1)) {
      ++ok;
    }
    EXPECT_EQ(ok, 4) << log;
  }
  const std::string east_hidden = Read(base + "-hidden/run/logs/aggregator-east.log");
  EXPECT_NE(east_hidden.find("round=4 clients=4 regions_round=ok"), std::string::npos)
      << east_hidden;
}

// clients_per_round: 4 over 2 regions x 4 clients under secure aggregation samples 2 in each
// region every round (sampled across all clients, a round could take one region's single client,
// which its aggregator refuses), and the run completes every round with 4 clients.
TEST(FederatedRunTest, SecureSamplingTakesTwoClientsOfEachRegionEveryRound) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-secure-sampling";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string yaml = SmallExperiment(
      "fl-sampling", "[{name: east, clients: 4}, {name: west, clients: 4}]", 4, 4, "60s");
  yaml.replace(yaml.find("secure_aggregation: false"), 25,
               "secure_aggregation: true\n  clients_per_round: 4");
  std::ofstream(dir + "/exp.yaml") << yaml;
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 240), 0) << Read(dir + "/out.txt");
  const std::string db = dir + "/run/state.db";
  auto rounds = QueryRows(db, "SELECT round, clients FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), 4u) << Read(dir + "/out.txt");
  for (const auto& r : rounds) EXPECT_EQ(r[1], "4") << "round " << r[0];
  auto selections = QueryRows(db, "SELECT message FROM events WHERE kind = 'selection'");
  ASSERT_EQ(selections.size(), 4u);
  for (const auto& row : selections) {
    const std::string& m = row[0];
    int east = 0, west = 0;
    for (size_t at = m.find("east/"); at != std::string::npos; at = m.find("east/", at + 1)) ++east;
    for (size_t at = m.find("west/"); at != std::string::npos; at = m.find("west/", at + 1)) ++west;
    EXPECT_EQ(east, 2) << m;
    EXPECT_EQ(west, 2) << m;
  }
}

// A federated run on resources.pools is billed: each participant's instance per second, each
// region's bytes to and from the global tier at the catalog's transfer price. budget.max_cost
// stops it at a round boundary (BUDGET_EXHAUSTED, the last model kept), and `sextant resume
// --max-cost` continues to the end with the earlier bills counted.
TEST(FederatedRunTest, BilledRunStopsAtTheBudgetAndResumesWithAHigherCap) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-billed";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // $0.001 per instance-second (1 s minimum) and $10,000 per GB between a and b: the bytes,
  // which are the same every round, dominate, so that where the budget stops is known.
  WriteTwoRegionCatalog(dir + "/catalog.yaml", 0.001, "", 10000);
  std::string yaml =
      SmallExperiment("fl-billed", "[{name: a, clients: 2}, {name: b, clients: 2}]", 30, 4, "60s");
  yaml.replace(yaml.find("examples_per_client: 600"), 24, "examples_per_client: 2000");
  yaml += R"(resources:
  catalog: catalog.yaml
  pools: [{name: pa, region: a, instance: box, max_instances: 3},
          {name: pb, region: b, instance: box, max_instances: 3}]
budget: {max_cost: 20}
)";
  std::ofstream(dir + "/exp.yaml") << yaml;
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string run_dir = dir + "/run";
  pid_t run =
      Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", run_dir}, dir + "/out1.txt");
  ASSERT_EQ(WaitExit(run, 240), 0) << Read(dir + "/out1.txt");
  const std::string out1 = Read(dir + "/out1.txt");
  EXPECT_NE(out1.find("would pass max_cost 20"), std::string::npos) << out1;
  const std::string db = run_dir + "/state.db";
  EXPECT_EQ(QueryRows(db, "SELECT value FROM meta WHERE key = 'state'"),
            (std::vector<std::vector<std::string>>{{"BUDGET_EXHAUSTED"}}));
  const int stopped =
      std::stoi(QueryRows(db, "SELECT MAX(round) FROM rounds WHERE region = ''")[0][0]);
  // b's round moves its model down and its mean up: about 2 x 101,800 bytes, $2.04.
  const double model_bytes = 25450 * 4.0;
  const double round_dollars = 2 * model_bytes * 10000 / 1e9;
  EXPECT_GE(stopped, static_cast<int>(20 / (round_dollars * 1.05)) - 1) << out1;
  EXPECT_LE(stopped, static_cast<int>(20 / round_dollars)) << out1;
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/model/final.safetensors"));
  auto total = [&] {
    return std::stod(QueryRows(db, "SELECT SUM(cost) FROM costs WHERE kind != 'trial'")[0][0]);
  };
  const double spent = total();
  std::printf("budget 20: stopped after round %d at $%.4f\n", stopped, spent);
  EXPECT_LE(spent, 20.0);  // the projection held: no round was started that would pass it
  EXPECT_GT(spent, 20.0 - 2 * round_dollars);

  // Bytes billed: each region's aggregator fetched the model and sent its mean back once a
  // round, as the global tier's server counted them; a (the global region) moves them free.
  auto bytes = [&](const char* region) {
    return std::stod(QueryRows(db, std::string("SELECT COALESCE(SUM(ref), 0) FROM costs WHERE "
                                               "kind = 'transfer' AND region = '") +
                                       region + "'")[0][0]);
  };
  EXPECT_GE(bytes("b"), 2 * stopped * model_bytes);
  EXPECT_LE(bytes("b"), 2 * (stopped + 1) * model_bytes * 1.05 + 65536);
  EXPECT_EQ(QueryRows(db,
                      "SELECT COALESCE(SUM(cost), 0) FROM costs WHERE kind = 'transfer' AND "
                      "region = 'a'")[0][0],
            "0.0");
  const double b_dollars = std::stod(
      QueryRows(db, "SELECT SUM(cost) FROM costs WHERE kind = 'transfer' AND region = 'b'")[0][0]);
  EXPECT_NEAR(b_dollars, bytes("b") * 10000 / 1e9, 1e-9);

  pid_t resumed =
      Spawn({bin + "/sextant", "resume", run_dir, "--max-cost", "1000"}, dir + "/out2.txt");
  ASSERT_EQ(WaitExit(resumed, 240), 0) << Read(dir + "/out2.txt");
  auto rounds = QueryRows(db, "SELECT round FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), 30u) << Read(dir + "/out2.txt");
  EXPECT_EQ(QueryRows(db, "SELECT value FROM meta WHERE key = 'state'"),
            (std::vector<std::vector<std::string>>{{"COMPLETED"}}));
  // The first session's bills kept, the second's added.
  EXPECT_GE(total(), spent + (30 - stopped) * round_dollars);
  EXPECT_GE(bytes("b"), 2 * 30 * model_bytes);
}

// An orchestrator outside every region (global_region: internet): each region pays its egress
// for the aggregates it sends up, and the model it gets down is free (ingress), as the global
// tier's server counted the bytes.
TEST(FederatedRunTest, AnOrchestratorOnTheInternetBillsEachRegionsEgressOnly) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-internet";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/catalog.yaml")
      << "regions: [a, b]\ninstances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 2}}\n"
      << "billing: {increment: 1s, minimum: 1s}\noffers:\n"
      << "  - {region: a, instance: box, market: on_demand, price_per_second: 0.001}\n"
      << "  - {region: b, instance: box, market: on_demand, price_per_second: 0.001}\n"
      << "transfer: {between_regions_per_gb: 1, to_internet_per_gb: 10000}\n";
  std::string yaml =
      SmallExperiment("fl-internet", "[{name: a, clients: 2}, {name: b, clients: 2}]", 3, 4, "60s");
  yaml.replace(yaml.find("federation:\n"), 12, "federation:\n  global_region: internet\n");
  yaml += R"(resources:
  catalog: catalog.yaml
  pools: [{name: pa, region: a, instance: box}, {name: pb, region: b, instance: box}]
)";
  std::ofstream(dir + "/exp.yaml") << yaml;
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 240), 0) << Read(dir + "/out.txt");
  const std::string db = dir + "/run/state.db";
  const double model_bytes = 25450 * 4.0;  // the MLP of SmallExperiment
  for (const char* region : {"a", "b"}) {
    const std::string where =
        std::string("FROM costs WHERE kind = 'transfer' AND region = '") + region + "'";
    const double bytes = std::stod(QueryRows(db, "SELECT SUM(ref) " + where)[0][0]);
    const double dollars = std::stod(QueryRows(db, "SELECT SUM(cost) " + where)[0][0]);
    // Down and up were counted, 3 rounds of each; only up (about half the bytes) was billed.
    EXPECT_GE(bytes, 2 * 3 * model_bytes) << region;
    EXPECT_NEAR(dollars, 3 * model_bytes * 10000 / 1e9, 0.05 * dollars) << region;
    EXPECT_LT(dollars, 0.6 * bytes * 10000 / 1e9) << region;
  }
}

// Two regions on spot pools whose market takes instances back every few seconds (clients and
// one aggregator; with a notice or without): each taken participant is replaced in its place
// (same region, index and data), the run completes every round, and it learns as its on-demand
// twin with the same seeds does, within 0.01. Each preemption is counted by pool and billed at
// spot rates.
TEST(FederatedRunTest, SpotInterruptionsReplaceParticipantsAndTheRunLearnsAsItsOnDemandTwin) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-spot";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Spot is taken back about every 10 s per instance, half the time after a 2 s notice: a
  // region's aggregator is replaced every few rounds, and its clients wait for the replacement.
  WriteTwoRegionCatalog(dir + "/catalog.yaml", 0.01,
                        "price_per_second: 0.003, interruption: {rate_per_day: 8640, notice: "
                        "2s, notice_probability: 0.5}",
                        0.02);
  auto experiment = [&](const std::string& name, const std::string& market) {
    std::string yaml =
        SmallExperiment(name, "[{name: a, clients: 3}, {name: b, clients: 3}]", 12, 4, "20s");
    yaml.replace(yaml.find("examples_per_client: 600"), 24, "examples_per_client: 2000");
    return yaml + TwoRegionPools(market, market);
  };
  std::ofstream(dir + "/spot.yaml") << experiment("fl-spot", "spot");
  std::ofstream(dir + "/od.yaml") << experiment("fl-od", "on_demand");
  const std::string bin = SEXTANT_BIN_DIR;
  auto run = [&](const std::string& which) {
    pid_t pid = Spawn(
        {bin + "/sextant", "run", dir + "/" + which + ".yaml", "--run-dir", dir + "/" + which},
        dir + "/" + which + ".txt");
    return WaitExit(pid, 240);
  };
  ASSERT_EQ(run("spot"), 0) << Read(dir + "/spot.txt");
  ASSERT_EQ(run("od"), 0) << Read(dir + "/od.txt");
  const std::string spot_db = dir + "/spot/state.db", od_db = dir + "/od/state.db";
  const std::string last = "SELECT accuracy FROM rounds WHERE region = '' AND round = 12";
  ASSERT_EQ(QueryRows(spot_db, last).size(), 1u) << Read(dir + "/spot.txt");
  const double spot = std::stod(QueryRows(spot_db, last)[0][0]);
  const double od = std::stod(QueryRows(od_db, last)[0][0]);
  std::printf("round 12 val_accuracy: spot %.4f, on-demand %.4f\n", spot, od);
  EXPECT_NEAR(spot, od, 0.01);
  auto preempted = QueryRows(spot_db,
                             "SELECT message FROM events WHERE kind = "
                             "'federation_preempted'");
  EXPECT_GE(preempted.size(), 1u);
  std::map<std::string, int> by_pool;
  for (const auto& row : preempted) {
    const size_t at = row[0].find("spot pool ");
    ASSERT_NE(at, std::string::npos) << row[0];
    ++by_pool[row[0].substr(at + 10, row[0].find(' ', at + 10) - at - 10)];
    EXPECT_EQ(row[0].find("b-agg"), std::string::npos) << "an on-demand pool: " << row[0];
  }
  // Each replacement wrote its own log beside the one it replaced.
  int replacement_logs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/spot/logs")) {
    const std::string f = e.path().filename().string();
    if (f.find(".2.log") != std::string::npos) ++replacement_logs;
  }
  EXPECT_GE(replacement_logs, 1);
  EXPECT_TRUE(QueryRows(od_db, "SELECT 1 FROM events WHERE kind = 'federation_preempted'").empty());
  // results: the preemptions by pool, the run's total, and spot's lower rates.
  const std::string results = dir + "/results.json";
  pid_t r = Spawn({bin + "/sextant", "results", dir + "/spot", "--format", "json"}, results);
  ASSERT_EQ(WaitExit(r, 30), 0);
  const nlohmann::json doc = nlohmann::json::parse(Read(results));
  EXPECT_EQ(doc["preemptions"]["total"].get<int>(), static_cast<int>(preempted.size()));
  for (const auto& [pool, n] : by_pool) EXPECT_EQ(doc["preemptions"]["by_pool"][pool], n) << pool;
  auto compute = [&](const std::string& db) {
    return std::stod(QueryRows(db, "SELECT SUM(cost) FROM costs WHERE kind = 'instance'")[0][0]);
  };
  std::printf("compute: spot $%.4f, on-demand $%.4f, %zu preemptions\n", compute(spot_db),
              compute(od_db), preempted.size());
  EXPECT_LT(compute(spot_db), compute(od_db));

  // The report leads with the federation and its dollars; a plain federated run has no search
  // sections.
  pid_t rep = Spawn({bin + "/sextant", "report", dir + "/spot", "-o", dir + "/report.html"},
                    dir + "/report.txt");
  ASSERT_EQ(WaitExit(rep, 60), 0) << Read(dir + "/report.txt");
  const std::string html = Read(dir + "/report.html");
  std::vector<std::string> sections;
  for (size_t at = html.find("id=\"section-"); at != std::string::npos;
       at = html.find("id=\"section-", at + 1)) {
    sections.push_back(html.substr(at + 12, html.find('"', at + 12) - at - 12));
  }
  EXPECT_EQ(sections,
            (std::vector<std::string>{"summary", "federated", "round-cost", "cost", "events"}));
  EXPECT_NE(html.find("id=\"summary-rounds\" data-value=\"12\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-federated-cost\" data-marks=\"12\""), std::string::npos);
  EXPECT_NE(html.find("<td id=\"summary-preemptions\""), std::string::npos);
  EXPECT_EQ(html.find("sampler random"), std::string::npos);
}

// Secure rounds on spot clients whose market always gives a notice, 1 s before it takes the
// instance back, while a round lasts about 2 s (every client a straggler): a client noticed while
// sampled for a round leaves it at once, mid-training or between its secure stages (its round
// failed, "stopped (a spot notice or a signal)"), so the round's stages go on without it instead of
// waiting out their 60 s timeout for a client killed halfway, and its replacement takes its place
// later. Every round closes well inside that timeout.
TEST(FederatedRunTest, SpotInterruptionsWithANoticeLeaveTheRoundAtOnceInsteadOfStallingIt) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-spot-notice";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A client instance is taken back about every 15 s, always after a 1 s notice.
  WriteTwoRegionCatalog(dir + "/catalog.yaml", 0.01,
                        "price_per_second: 0.003, interruption: {rate_per_day: 5760, notice: "
                        "1s, notice_probability: 1}",
                        0.02);
  std::string yaml = SmallExperiment(
      "fl-spot-notice", "[{name: a, clients: 3}, {name: b, clients: 3}]", 6, 4, "60s");
  yaml.replace(yaml.find("secure_aggregation: false"), 25,
               "secure_aggregation: true\n  stragglers: {clients: [a/0, a/1, a/2, b/0, b/1, "
               "b/2], slowdown: 400}");
  std::ofstream(dir + "/exp.yaml") << yaml + TwoRegionPools("spot", "on_demand");
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t pid = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(pid, 400), 0) << Read(dir + "/out.txt");
  const std::string db = dir + "/run/state.db";
  const auto times = QueryRows(db, "SELECT time FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(times.size(), 6u) << Read(dir + "/out.txt");
  for (size_t i = 1; i < times.size(); ++i) {
    EXPECT_LT(std::stod(times[i][0]) - std::stod(times[i - 1][0]), 30)
        << "round " << i + 1 << " waited out a stage\n"
        << Read(dir + "/out.txt");
  }
  EXPECT_FALSE(QueryRows(db, "SELECT 1 FROM events WHERE kind = 'federation_preempted'").empty());
  // Left from its training ("preempted: stopped ...") or between secure stages ("stopped (a
  // spot notice or a signal) before the ... stage").
  const auto left = QueryRows(db,
                              "SELECT message FROM events WHERE kind = 'client_failed' AND "
                              "message LIKE '%stopped (a spot notice or a signal)%'");
  EXPECT_FALSE(left.empty()) << Read(dir + "/out.txt");
  std::printf("%zu preemptions, %zu clients left their round at the notice\n",
              QueryRows(db, "SELECT 1 FROM events WHERE kind = 'federation_preempted'").size(),
              left.size());
}

// federation.dp with a target: the accountant's cumulative epsilon per round (the published RDP
// of the Gaussian mechanism, q = 1) lands in the rounds table and in `results --format json`,
// and the run stops, with its state recorded, before the round that would pass the target.
TEST(FederatedRunTest, DifferentialPrivacyRecordsEpsilonPerRoundAndStopsAtTheTarget) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = ::testing::TempDir() + "/fl-dp";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  sextant::RdpAccountantOptions a;
  a.noise_multiplier = 2.0;
  a.delta = 1e-5;
  sextant::RdpAccountant accountant = *sextant::RdpAccountant::Create(a);
  // A target between the epsilon of 3 and of 4 rounds: exactly 3 rounds may run.
  const double target = (accountant.EpsilonAfter(3) + accountant.EpsilonAfter(4)) / 2;
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-dp
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 10
  local_lr: 0.05
  min_clients: 3
  round_deadline: 60s
  seed: 5
  examples_per_client: 600
  validation_examples: 1000
  dp: {noise_multiplier: 2.0, clip_norm: 1.0, delta: 1.0e-5, target_epsilon: )"
                                   << target << R"(, noise: distributed}
)";
  const std::string bin = SEXTANT_BIN_DIR;
  pid_t run = Spawn({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"},
                    dir + "/out.txt");
  ASSERT_EQ(WaitExit(run, 180), 0) << Read(dir + "/out.txt");
  const std::string out = Read(dir + "/out.txt");
  EXPECT_NE(out.find("privacy budget is spent"), std::string::npos) << out;
  auto rounds = QueryRows(dir + "/run/state.db",
                          "SELECT round, epsilon FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), 3u) << out;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NEAR(std::stod(rounds[r][1]), accountant.EpsilonAfter(r + 1), 1e-9) << r;
  }
  auto state = QueryRows(dir + "/run/state.db", "SELECT value FROM meta WHERE key = 'state'");
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "EPSILON_EXHAUSTED");
  const int rc = std::system(
      (bin + "/sextant results " + dir + "/run --format json > " + dir + "/results.json 2>&1")
          .c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0);
  const std::string json = Read(dir + "/results.json");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      json, m, std::regex("\"privacy\":\\s*\\{[^}]*\"epsilon\":\\s*([0-9.eE+-]+)")))
      << json;
  EXPECT_NEAR(std::stod(m[1]), accountant.EpsilonAfter(3), 1e-9);
  EXPECT_NE(json.find("\"state\": \"EPSILON_EXHAUSTED\""), std::string::npos) << json;
}
