// The quick end-to-end check of a federated run in the default suite: `sextant run` on 2 regions
// x 2 clients for 2 rounds with secure aggregation (the default), real processes and
// Fashion-MNIST; then its model files, its events and its report (event times, participation).
// The slow suite (federated_run_test) covers the rest.
#include <cmath>
#include <filesystem>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tensors/safetensors.h"
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
  const double started = std::floor(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  testing::CommandOutput run = testing::RunProcess(
      {bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 240);
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
  const double finished = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  // The built-in model's files: its layers as named F32 tensors, weights [in, out].
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/model/round-0001.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/model/round-0002.safetensors"));
  absl::StatusOr<TensorFile> model = ReadSafetensors(dir + "/run/model/final.safetensors");
  ASSERT_TRUE(model.ok()) << model.status();
  TensorFile mlp;
  mlp.tensors = {
      Tensor{"fc1.weight", DType::kF32, {784, 16}, {}}, Tensor{"fc1.bias", DType::kF32, {16}, {}},
      Tensor{"fc2.weight", DType::kF32, {16, 10}, {}}, Tensor{"fc2.bias", DType::kF32, {10}, {}}};
  EXPECT_TRUE(CheckSameLayout(*model, mlp).ok()) << CheckSameLayout(*model, mlp);
  EXPECT_EQ(model->tensors[0].name, "fc1.weight");

  // Events carry unix times, as a search run's do: never before the run started.
  testing::CommandOutput events = testing::RunProcess({bin + "/sextant", "events", dir + "/run"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  int rounds = 0;
  for (absl::string_view line : absl::StrSplit(events.out, '\n', absl::SkipEmpty())) {
    nlohmann::json e = nlohmann::json::parse(line);
    EXPECT_GE(e["time"].get<double>(), started - 1) << line;
    EXPECT_LE(e["time"].get<double>(), finished + 1) << line;
    rounds += e["kind"] == "round";
  }
  EXPECT_EQ(rounds, 2) << events.out;
  // The report lists them as offsets from the start, and counts each of the four clients once.
  testing::CommandOutput report =
      testing::RunProcess({bin + "/sextant", "report", dir + "/run", "-o", dir + "/report.html"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = ReadFile(dir + "/report.html");
  EXPECT_NE(html.find("<td>+"), std::string::npos);
  EXPECT_EQ(html.find("<td>+-"), std::string::npos) << "negative event offsets";
  for (const char* round : {"round 1: 4 clients", "round 2: 4 clients"}) {
    EXPECT_NE(html.find(round), std::string::npos) << round;
  }
  EXPECT_EQ(html.find(": 8 clients"), std::string::npos);
}

}  // namespace
}  // namespace sextant
