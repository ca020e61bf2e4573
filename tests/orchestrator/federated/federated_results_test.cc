// A federated run's output reads as a federated run, through the binaries: `sextant validate`
// describes the federation (and a federated search as a search over federated runs), and
// `sextant results` gives the rounds, global and per region, in JSON, CSV and the table, with
// what the regional accuracy measures and the dollars of each round once it is billed. One real
// run (2 regions x 2 clients, 2 plaintext rounds, Fashion-MNIST; about 15 s) serves every test.
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/exact_number.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunProcess;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

constexpr char kExperiment[] = R"(name: fl-results
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 2
  min_clients: 2
  round_deadline: 2s
  secure_aggregation: false
  examples_per_client: 200
  validation_examples: 200
)";

constexpr char kSearchExperiment[] = R"(name: fl-search
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.02, max: 0.1, log: true}
search: {sampler: random, seed: 4, max_trials: 3, max_concurrent: 1}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 1}]
  rounds: 4
  secure_aggregation: false
  server_optimizer: fedadam
)";

bool HaveDataset() { return std::filesystem::exists("/usr/share/datasets/fashion-mnist"); }

// The experiment file and the run directory of the one federated run the tests share ("" when
// it failed; the first test to ask reports why).
struct SharedRun {
  std::string file, run_dir, why;
};

const SharedRun& TheRun() {
  static const SharedRun* run = [] {
    auto* r = new SharedRun;
    const std::string dir = testing::MakeTempDir("fl-results");
    r->file = dir + "/exp.yaml";
    testing::WriteFile(r->file, kExperiment);
    testing::CommandOutput out =
        RunProcess({kSextant, "run", r->file, "--run-dir", dir + "/run"}, 240);
    if (out.exit_code == 0) {
      r->run_dir = dir + "/run";
    } else {
      r->why = out.out + out.err;
    }
    return r;
  }();
  return *run;
}

#define REQUIRE_RUN()                                     \
  SEXTANT_REQUIRE_COMPONENT(HaveDataset(), "no dataset"); \
  ASSERT_FALSE(TheRun().run_dir.empty()) << "sextant run failed: " << TheRun().why

testing::CommandOutput Results(const std::string& run_dir, const std::string& format) {
  return RunProcess({kSextant, "results", run_dir, "--format", format});
}

TEST(FederatedResultsTest, ValidateDescribesAFederatedRunAsOne) {
  const std::string dir = testing::MakeTempDir("fl-validate");
  testing::WriteFile(dir + "/exp.yaml", kExperiment);
  testing::CommandOutput v = RunProcess({kSextant, "validate", dir + "/exp.yaml"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_THAT(v.out, HasSubstr(": ok (federated: 2 regions x 2 clients, 2 rounds, plaintext "
                               "aggregation, FedAvg, built-in mlp)"));
  EXPECT_THAT(v.out, Not(HasSubstr("parameters")));
  EXPECT_THAT(v.out, Not(HasSubstr("trials")));
}

TEST(FederatedResultsTest, ValidateDescribesAFederatedSearchAsASearchOverFederatedRuns) {
  const std::string dir = testing::MakeTempDir("fl-validate-search");
  testing::WriteFile(dir + "/exp.yaml", kSearchExperiment);
  testing::CommandOutput v = RunProcess({kSextant, "validate", dir + "/exp.yaml"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_THAT(v.out, HasSubstr(": ok (search over federated runs: 1 parameters, 3 trials; each "
                               "run federated: 2 regions, 3 clients (east 2, west 1), 4 rounds, "
                               "plaintext aggregation, FedAdam"));
}

// JSON keeps the contract's keys and adds the federation and its rounds: a global entry and
// one per region for each round, with what each figure measures.
TEST(FederatedResultsTest, JsonHasEachRoundGlobalAndPerRegionBesideTheContractKeys) {
  REQUIRE_RUN();
  testing::CommandOutput r = Results(TheRun().run_dir, "json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key : {"experiment", "state", "objective", "best", "trials", "cost"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["state"], "COMPLETED");
  const nlohmann::json& fed = j["federation"];
  EXPECT_EQ(fed["rounds_planned"], 2);
  EXPECT_EQ(fed["rounds_completed"], 2);
  EXPECT_EQ(fed["mode"], "sync");
  EXPECT_THAT(fed["description"].get<std::string>(), HasSubstr("2 regions x 2 clients"));
  EXPECT_THAT(fed["metrics"]["global"].get<std::string>(),
              HasSubstr("after the round's server step, scored by the orchestrator on 200"));
  EXPECT_THAT(fed["metrics"]["regions"].get<std::string>(),
              HasSubstr("the global model they received at the start of the round"));
  EXPECT_THAT(fed["metrics"]["regions"].get<std::string>(), HasSubstr("untrained"));
  const nlohmann::json& rounds = j["rounds"];
  ASSERT_EQ(rounds.size(), 2u) << rounds.dump(2);
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& round = rounds[i];
    EXPECT_EQ(round["round"], i + 1);
    EXPECT_GE(round["accuracy"].get<double>(), 0);
    EXPECT_LE(round["accuracy"].get<double>(), 1);
    EXPECT_GT(round["loss"].get<double>(), 0);
    EXPECT_EQ(round["clients"], 4);
    EXPECT_EQ(round["rejected"], 0);
    EXPECT_TRUE(round["epsilon"].is_null());  // no DP
    EXPECT_TRUE(round["cost"].is_null());     // nothing billed on local processes
    EXPECT_GT(round["time"].get<double>(), 0);
    ASSERT_EQ(round["regions"].size(), 2u) << round.dump(2);
    for (const char* region : {"east", "west"}) {
      const nlohmann::json& reg = round["regions"][region];
      EXPECT_EQ(reg["clients"], 2) << region;
      EXPECT_EQ(reg["rejected"], 0) << region;
      EXPECT_GE(reg["accuracy"].get<double>(), 0) << region;
      EXPECT_GT(reg["loss"].get<double>(), 0) << region;
    }
  }
  EXPECT_GT(rounds[1]["time"].get<double>(), rounds[0]["time"].get<double>());
  // The run's value is its last round's global accuracy.
  EXPECT_EQ(j["best"]["value"], rounds[1]["accuracy"]);
}

// CSV: one row per round and scope, the global model first; the numbers read back exactly as
// JSON has them.
TEST(FederatedResultsTest, CsvHasARowPerRoundAndRegionThatReadsBackExactly) {
  REQUIRE_RUN();
  testing::CommandOutput csv = Results(TheRun().run_dir, "csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  nlohmann::json j = nlohmann::json::parse(Results(TheRun().run_dir, "json").out);
  std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u) << csv.out;
  EXPECT_EQ(lines[0], "round,scope,region,accuracy,loss,clients,rejected,epsilon,cost,time");
  std::vector<std::string> scopes;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(f.size(), 10u) << lines[i];
    scopes.push_back(f[0] + " " + f[1] + " " + f[2]);
    const nlohmann::json& round = j["rounds"][std::stoi(f[0]) - 1];
    const nlohmann::json& v = f[1] == "global" ? round : round["regions"][f[2]];
    EXPECT_EQ(f[3], ExactNumber(v["accuracy"].get<double>())) << lines[i];
    EXPECT_EQ(std::stod(f[3]), v["accuracy"].get<double>()) << lines[i];
    EXPECT_EQ(f[4], ExactNumber(v["loss"].get<double>())) << lines[i];
    EXPECT_EQ(f[5], v["clients"].dump()) << lines[i];
    EXPECT_EQ(f[6], "0") << lines[i];
    EXPECT_EQ(f[7], "") << lines[i];  // no DP
    EXPECT_EQ(f[8], "") << lines[i];  // nothing billed
  }
  EXPECT_THAT(scopes, ::testing::ElementsAre("1 global ", "1 region east", "1 region west",
                                             "2 global ", "2 region east", "2 region west"));
}

// The table lists the rounds instead of one trial with params {}, and says what the regional
// accuracy measures.
TEST(FederatedResultsTest, TableListsTheRoundsAndSaysWhatRegionalAccuracyMeasures) {
  REQUIRE_RUN();
  testing::CommandOutput t = Results(TheRun().run_dir, "table");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("experiment fl-results (COMPLETED): federated: 2 regions x 2 "
                               "clients, 2 rounds"));
  EXPECT_THAT(t.out, HasSubstr("2 of 2 rounds done"));
  EXPECT_THAT(t.out, HasSubstr("final global model: val_accuracy="));
  EXPECT_THAT(t.out, Not(HasSubstr("1 trials")));
  EXPECT_THAT(t.out, Not(HasSubstr("{}")));
  int global = 0, east = 0, west = 0;
  for (absl::string_view line : absl::StrSplit(t.out, '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() == 8 && words[1] == "global") ++global;
    if (words.size() == 7 && words[0] == "east") ++east;
    if (words.size() == 7 && words[0] == "west") ++west;
  }
  EXPECT_EQ(global, 2) << t.out;
  EXPECT_EQ(east, 2) << t.out;
  EXPECT_EQ(west, 2) << t.out;
  EXPECT_THAT(t.out, HasSubstr("regions: each region's clients scoring the global model they "
                               "received at the start of the round"));
  // `status` shows the newest rounds the same way.
  testing::CommandOutput s = RunProcess({kSextant, "status", TheRun().run_dir});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("2 of 2 rounds done"));
}

// Once instances are billed, each round carries the dollars accrued since the previous round
// closed, and each region its own instances' share.
TEST(FederatedResultsTest, BilledRoundsCarryTheirDollarsInEveryFormat) {
  REQUIRE_RUN();
  const std::string copy = testing::MakeTempDir("fl-results-billed") + "/run";
  std::filesystem::copy(TheRun().run_dir, copy, std::filesystem::copy_options::recursive);
  nlohmann::json before = nlohmann::json::parse(Results(copy, "json").out);
  const double t1 = before["rounds"][0]["time"].get<double>();
  const double t2 = before["rounds"][1]["time"].get<double>();
  // One east instance billed 1 dollar a second from the start to round 2's close.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((copy + "/state.db").c_str(), &db), SQLITE_OK);
  const std::string sql = absl::StrCat(
      "CREATE TABLE IF NOT EXISTS costs(kind TEXT NOT NULL, ref INTEGER NOT NULL, pool TEXT NOT "
      "NULL, region TEXT NOT NULL, market TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL, "
      "cost REAL NOT NULL);"
      "INSERT INTO costs (kind, ref, pool, region, market, start, end, cost) VALUES "
      "('instance', 1, 'east-od', 'east', 'on_demand', 0, ",
      ExactNumber(t2), ", ", ExactNumber(t2), ");");
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
  sqlite3_close(db);
  nlohmann::json j = nlohmann::json::parse(Results(copy, "json").out);
  EXPECT_NEAR(j["rounds"][0]["cost"].get<double>(), t1, 1e-6);
  EXPECT_NEAR(j["rounds"][1]["cost"].get<double>(), t2 - t1, 1e-6);
  EXPECT_NEAR(j["rounds"][1]["regions"]["east"]["cost"].get<double>(), t2 - t1, 1e-6);
  EXPECT_TRUE(j["rounds"][1]["regions"]["west"]["cost"].is_null());
  std::vector<std::string> lines =
      absl::StrSplit(Results(copy, "csv").out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u);
  std::vector<std::string> round2 = absl::StrSplit(lines[4], ',');
  EXPECT_NEAR(std::stod(round2[8]), t2 - t1, 1e-6) << lines[4];
  EXPECT_THAT(Results(copy, "table").out,
              HasSubstr(absl::StrFormat("%.4f", j["rounds"][1]["cost"].get<double>())));
}

// Each trial of a federated search is a federated run of its own (in its checkpoint folder):
// the trial lists that run's rounds, and the search stays a table of trials.
TEST(FederatedResultsTest, EachTrialOfAFederatedSearchListsItsOwnRunsRounds) {
  REQUIRE_RUN();
  const std::string outer = testing::MakeTempDir("fl-results-search");
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(outer + "/state.db", true);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)
                    ->PutMeta("spec", testing::SpecFromYaml(kSearchExperiment).SerializeAsString())
                    .ok());
    ASSERT_TRUE((*store)->PutMeta("state", "COMPLETED").ok());
    for (int64_t id : {1, 2}) {
      TrialRow t;
      t.id = id;
      t.state = v1::COMPLETED;
      t.params_json = R"({"local_lr": 0.05})";
      t.value = 0.5;
      ASSERT_TRUE((*store)->PutTrial(t).ok());
    }
  }
  std::filesystem::create_directories(outer + "/artifacts/checkpoints/trial-1");
  std::filesystem::copy(TheRun().run_dir, outer + "/artifacts/checkpoints/trial-1/federation",
                        std::filesystem::copy_options::recursive);
  testing::CommandOutput r = Results(outer, "json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_THAT(j["federation"]["description"].get<std::string>(),
              HasSubstr("federated: 2 regions, 3 clients (east 2, west 1)"));
  EXPECT_FALSE(j.contains("rounds"));
  ASSERT_EQ(j["trials"].size(), 2u);
  ASSERT_EQ(j["trials"][0]["rounds"].size(), 2u) << j["trials"][0].dump(2);
  EXPECT_EQ(j["trials"][0]["rounds"][1]["regions"]["west"]["clients"], 2);
  EXPECT_FALSE(j["trials"][1].contains("rounds"));  // its run has not started
  EXPECT_THAT(Results(outer, "csv").out, ::testing::StartsWith("id,state,"));
}

// The report of the real run labels what the regional lines measure.
TEST(FederatedResultsTest, ReportSaysTheRegionalAccuracyIsTheReceivedModelBeforeTraining) {
  REQUIRE_RUN();
  const std::string html = testing::MakeTempDir("fl-results-report") + "/report.html";
  testing::CommandOutput r = RunProcess({kSextant, "report", TheRun().run_dir, "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = testing::ReadFile(html);
  const size_t at = page.find("id=\"federated-accuracy-note\"");
  ASSERT_NE(at, std::string::npos);
  const std::string note = page.substr(at, page.find("</p>", at) - at);
  EXPECT_THAT(note, HasSubstr("scored by the orchestrator on 200 held-out validation examples"));
  EXPECT_THAT(note, HasSubstr("round 1 scores the initial, untrained model"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// A region that sat a round out has a row of no clients and no scores: stored as NULL, read
// back as NaN, and shown in results as "sat_out" with null scores.
TEST(FederatedResultsTest, ARegionThatSatARoundOutIsShownSo) {
  const std::string dir = testing::MakeTempDir("fl-sat-out");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  {
    absl::StatusOr<RoundsTable> table = RoundsTable::Open(dir + "/state.db");
    ASSERT_TRUE(table.ok()) << table.status();
    ASSERT_TRUE(table->Put({{1, "", 0.5, 1.2, 2, 0, std::nullopt, 3.0},
                            {1, "east", 0.4, 1.3, 2, 0, std::nullopt, 3.0},
                            {1, "west", nan, nan, 0, 0, std::nullopt, 3.0}})
                    .ok());
  }
  absl::StatusOr<RoundsTable> table = RoundsTable::OpenReadOnly(dir + "/state.db");
  ASSERT_TRUE(table.ok()) << table.status();
  absl::StatusOr<std::vector<RoundRow>> rows = table->Load();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 3u);
  nlohmann::json doc;
  AddFederatedRounds(testing::SpecFromYaml(kExperiment), *rows, {}, &doc);
  const nlohmann::json& regions = doc["rounds"][0]["regions"];
  EXPECT_TRUE(regions["west"]["sat_out"].get<bool>()) << regions.dump();
  EXPECT_TRUE(regions["west"]["accuracy"].is_null());
  EXPECT_EQ(regions["west"]["clients"], 0);
  EXPECT_FALSE(regions["east"].contains("sat_out"));
  EXPECT_EQ(regions["east"]["accuracy"], 0.4);
}

}  // namespace
}  // namespace sextant
