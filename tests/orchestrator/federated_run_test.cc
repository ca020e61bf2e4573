// End to end: `sextant run` on a 2-region x 3-client federated experiment on loopback, with real
// processes (aggregators and clients) and real Fashion-MNIST.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FederatedRunTest, TwoRegionsOfThreeClientsLearnAndSendOnlyModelSizedUpdates) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "no dataset";
  const std::string dir = testing::TempDir() + "/fl-e2e";
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
  const int rc = std::system((bin + "/sextant run " + yaml + " --run-dir " + dir + "/run > " + dir +
                              "/out.txt 2>&1").c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0) << Read(dir + "/out.txt");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/run/state.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT round, accuracy, clients FROM rounds WHERE region = '' ORDER BY round",
                               -1, &st, nullptr), SQLITE_OK);
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
      const std::string log = Read(dir + "/run/logs/client-" + region + "-" + std::to_string(i) + ".log");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(log, m, std::regex("client_done rounds=(\\d+) bytes_sent=(\\d+) model_bytes=(\\d+)")))
          << log;
      const double sent = std::stod(m[2]), model = std::stod(m[3]), n = std::stod(m[1]);
      EXPECT_EQ(n, 3);
      EXPECT_LE(sent, n * model * 1.01 + 4096);
      EXPECT_GE(sent, n * model);
    }
  }
}

}  // namespace
