// The quick end-to-end check of a federated run in the default suite: `sextant run` on 2 regions
// x 2 clients for 2 rounds with secure aggregation (the default), real processes and
// Fashion-MNIST. The slow suite (federated_run_test) covers the rest.
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::ReadFile;

TEST(FederatedSmokeTest, TwoRegionsOfTwoClientsRunTwoSecureRoundsWithEveryClientInEachRound) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = testing::MakeTempDir("fl-smoke");
  testing::WriteFile(dir + "/exp.yaml", R"(name: fl-smoke
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 2
  min_clients: 2
  round_deadline: 2s
  examples_per_client: 200
  validation_examples: 200
)");
  const std::string bin = SEXTANT_BIN_DIR;
  testing::CommandOutput run =
      testing::RunProcess({bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 240);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // A 2 s deadline is shorter than the clients take to start on a loaded machine; the deadline
  // starts only once they are up, so each round still has all four.
  for (const char* round : {"round=1 ", "round=2 "}) {
    const size_t at = run.out.find(std::string("sextant: ") + round);
    ASSERT_NE(at, std::string::npos) << run.out;
    EXPECT_NE(run.out.substr(at, run.out.find('\n', at) - at).find("clients=4"), std::string::npos)
        << run.out;
  }
  for (const char* region : {"east", "west"}) {
    const std::string log = ReadFile(dir + "/run/logs/aggregator-" + std::string(region) + ".log");
    EXPECT_NE(log.find("clients_connected=2/2"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace sextant
