// federation.update_compression end to end: the same small plaintext federated run (real
// processes, Fashion-MNIST) with float32, fp16 and int8 updates. Compressed updates move a
// fraction of the bytes (the clients count what they put on the wire) and end in about the same
// accuracy.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

struct RunResult {
  double bytes_sent = 0;  // every client's, over every round
  double model_bytes = 0;
  double accuracy = -1;  // the final global model's val_accuracy
  std::string aggregator_log;
  double last_round_bytes = 0;  // every client's, in the last round
};

// Runs the experiment with `compression` (and the federation keys in `extra`), plaintext or
// secure, and reads its results back; fails the test when the run fails.
RunResult RunWith(const std::string& compression, const std::string& extra = "",
                  bool secure = false) {
  RunResult r;
  const std::string dir = testing::MakeTempDir("fl-compression-" + compression);
  testing::WriteFile(dir + "/exp.yaml", absl::StrCat(R"(name: fl-compression
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "32"}}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 3
  min_clients: 3
  round_deadline: 10s
  local_lr: 0.05
  examples_per_client: 600
  validation_examples: 1000
  seed: 5
  secure_aggregation: )",
                                                     secure ? "true" : "false",
                                                     "\n  update_compression: ", compression,
                                                     "\n", extra));
  const std::string bin = SEXTANT_BIN_DIR;
  testing::CommandOutput run = testing::RunProcess(
      {bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 240);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch m;
  if (std::regex_search(run.out, m, std::regex("finished: val_accuracy=([0-9.]+)"))) {
    r.accuracy = std::stod(m[1]);
  }
  r.aggregator_log = testing::ReadFile(dir + "/run/logs/aggregator-east.log");
  for (int i = 0; i < 3; ++i) {
    const std::string log =
        testing::ReadFile(dir + "/run/logs/client-east-" + std::to_string(i) + ".log");
    EXPECT_TRUE(std::regex_search(
        log, m, std::regex("client_done rounds=(\\d+) bytes_sent=(\\d+) model_bytes=(\\d+)")))
        << log;
    if (m.size() < 4) continue;
    EXPECT_EQ(std::stoi(m[1]), 3) << log;
    r.bytes_sent += std::stod(m[2]);
    r.model_bytes = std::stod(m[3]);
    EXPECT_TRUE(std::regex_search(log, m, std::regex("round=3 .* bytes_sent=(\\d+)"))) << log;
    if (m.size() == 2) r.last_round_bytes += std::stod(m[1]);
  }
  return r;
}

TEST(FederatedCompressionTest, Int8AndFp16UpdatesMoveFewerBytesToAboutTheSameAccuracy) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const RunResult none = RunWith("none");
  const RunResult fp16 = RunWith("fp16");
  const RunResult int8 = RunWith("int8");
  std::cout << "update_compression bytes_sent accuracy\n";
  std::cout << "none " << none.bytes_sent << " " << none.accuracy << "\n"
            << "fp16 " << fp16.bytes_sent << " " << fp16.accuracy << "\n"
            << "int8 " << int8.bytes_sent << " " << int8.accuracy << "\n";
  ASSERT_GT(none.bytes_sent, 0);
  // float32: 3 clients x 3 rounds x the model, plus headers.
  EXPECT_GE(none.bytes_sent, 9 * none.model_bytes);
  EXPECT_LE(fp16.bytes_sent, 0.55 * none.bytes_sent);
  EXPECT_LE(int8.bytes_sent, 0.3 * none.bytes_sent);
  ASSERT_GT(none.accuracy, 0.5);  // it learned (chance is 0.10)
  EXPECT_NEAR(fp16.accuracy, none.accuracy, 0.05);
  EXPECT_NEAR(int8.accuracy, none.accuracy, 0.05);
}

// Central DP over compressed updates: each client clips its update to C before encoding, and its
// aggregator clips the decoded update to C again (the rounding may have lengthened it), so the
// accountant's bound holds; the run still moves int8's fraction of the bytes.
TEST(FederatedCompressionTest, Int8UpdatesComposeWithCentralDpClipping) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dp = "  dp: {noise_multiplier: 0.01, clip_norm: 2.0}\n";
  const RunResult none = RunWith("none", dp);
  const RunResult int8 = RunWith("int8", dp);
  std::cout << "with dp: none " << none.bytes_sent << " " << none.accuracy << ", int8 "
            << int8.bytes_sent << " " << int8.accuracy << "\n";
  // The aggregator enforces the bound itself (RoundCoordinatorTest.ClipNorm* tests the clip).
  EXPECT_NE(int8.aggregator_log.find("dp_clip_norm=2"), std::string::npos) << int8.aggregator_log;
  ASSERT_GT(none.bytes_sent, 0);
  EXPECT_LE(int8.bytes_sent, 0.3 * none.bytes_sent);
  ASSERT_GT(none.accuracy, 0.5);
  EXPECT_NEAR(int8.accuracy, none.accuracy, 0.05);
}

// Secure aggregation with int8 updates: each client's update goes into the ring at 8-bit levels
// instead of 16, each tensor in its own range from the last round's mean (round 1 still at 16
// bits), so the ring, and the masked input, shrink by 8 bits per value at about the same
// accuracy. Under DP (weights 1, the clip covering C and the noise) every round is at 8 bits.
TEST(FederatedCompressionTest, Int8UpdatesComposeWithSecureAggregationAndDp) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const RunResult none = RunWith("none", "", true);
  const RunResult int8 = RunWith("int8", "", true);
  const std::string dp = "  dp: {noise_multiplier: 0.01, clip_norm: 2.0, noise: distributed}\n";
  const RunResult dp_none = RunWith("none", dp, true);
  const RunResult dp_int8 = RunWith("int8", dp, true);
  std::cout << "secure: none " << none.bytes_sent << " (round 3: " << none.last_round_bytes
            << ") " << none.accuracy << ", int8 " << int8.bytes_sent << " (round 3: "
            << int8.last_round_bytes << ") " << int8.accuracy << "\n"
            << "secure, dp: none " << dp_none.bytes_sent << " " << dp_none.accuracy << ", int8 "
            << dp_int8.bytes_sent << " " << dp_int8.accuracy << "\n";
  ASSERT_GT(none.last_round_bytes, 0);
  // Weights up to 600 examples over 3 clients: a 27-bit ring at 16 bits, 19 at 8.
  EXPECT_LE(int8.last_round_bytes, 0.75 * none.last_round_bytes);
  ASSERT_GT(none.accuracy, 0.5);
  EXPECT_NEAR(int8.accuracy, none.accuracy, 0.05);
  // Weights 1: an 18-bit ring at 16 bits, 10 at 8.
  ASSERT_GT(dp_none.bytes_sent, 0);
  EXPECT_LE(dp_int8.bytes_sent, 0.6 * dp_none.bytes_sent);
  ASSERT_GT(dp_none.accuracy, 0.5);
  EXPECT_NEAR(dp_int8.accuracy, dp_none.accuracy, 0.05);
}

}  // namespace
}  // namespace sextant
