// Federated clients whose training fails, through the real binaries: each failure reaches the
// run's console and events with its cause, a round stops waiting for a client that failed, and
// a run whose rounds keep failing ends FAILED with exit 1 instead of waiting for ever.
#include <chrono>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::QueryRows;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

// A client command that fails as a copied example with a missing module does.
constexpr const char* kFailing = R"(#!/bin/sh
echo "Traceback (most recent call last):" >&2
echo "ModuleNotFoundError: No module named 'torchvision'" >&2
exit 1
)";

// Every client but east/0 hands the global model back unchanged; east/0 fails.
constexpr const char* kOneFails = R"(#!/bin/sh
if [ "$SEXTANT_CLIENT_ID" = "east/0" ]; then echo "CUDA error: out of memory" >&2; exit 3; fi
cp "$SEXTANT_GLOBAL_MODEL" "$SEXTANT_UPDATED_MODEL"
echo "num_examples=100 train_loss=0.5"
)";

std::string Experiment(const std::string& script, const std::string& extra) {
  return absl::StrCat(R"(name: fl-failures
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  rounds: 4
  min_clients: 2
  examples_per_client: 200
  validation_examples: 200
  client_command: [sh, )",
                      script, "]\n", extra);
}

int64_t Events(const std::string& run, const std::string& kind) {
  auto rows = QueryRows(run + "/state.db",
                        absl::StrCat("SELECT COUNT(*) FROM events WHERE kind = '", kind, "'"));
  return rows.empty() ? -1 : std::stoll(rows[0][0]);
}

class FederatedFailureTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                              "no dataset");
    dir_ = testing::MakeTempDir("fl-failures");
    WriteFile(dir_ + "/fail.sh", kFailing);
    WriteFile(dir_ + "/one.sh", kOneFails);
  }
  std::string secure() const { return GetParam() ? "true" : "false"; }
  std::string dir_;
};

TEST_P(FederatedFailureTest, ARunWhoseClientsAllFailEndsFailedAfterMaxFailedRounds) {
  // The deadline is far away: the rounds end on the failure reports, not on it.
  WriteFile(dir_ + "/exp.yaml",
            Experiment("fail.sh", absl::StrCat("  round_deadline: 10m\n  secure_aggregation: ",
                                               secure(), "\n")));
  const auto start = std::chrono::steady_clock::now();
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 240);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(seconds, 120);
  // Each failed client, with the cause from the end of its stderr.
  EXPECT_THAT(r.out, HasSubstr("sextant: round 1: client east/0 failed: client command exited "
                               "with status 1; stderr: Traceback (most recent call last): | "
                               "ModuleNotFoundError: No module named 'torchvision'"));
  EXPECT_THAT(r.out, HasSubstr("sextant: round 1 failed: 0 client updates of min_clients 2; 5 "
                               "clients and "));
  EXPECT_THAT(r.out, HasSubstr("sextant: round 3 failed"));
  EXPECT_THAT(r.out, Not(HasSubstr("round 4")));
  EXPECT_THAT(r.err, HasSubstr("the federated run failed: 3 rounds in a row failed "
                               "(federation.max_failed_rounds: 3)"));
  EXPECT_THAT(r.err, HasSubstr("ModuleNotFoundError"));
  const std::string run = dir_ + "/run";
  EXPECT_EQ(Events(run, "client_failed"), 15);  // 5 clients x 3 rounds
  EXPECT_EQ(Events(run, "round_failed"), 3);
  auto state = QueryRows(run + "/state.db", "SELECT value FROM meta WHERE key = 'state'");
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "FAILED");
  auto trial = QueryRows(run + "/state.db", "SELECT state FROM trials");
  ASSERT_EQ(trial.size(), 1u);
  EXPECT_EQ(trial[0][0], "FAILED");
}

TEST_P(FederatedFailureTest, AFailedClientIsNamedAndItsRoundGoesOnWithoutIt) {
  WriteFile(dir_ + "/exp.yaml",
            Experiment("one.sh", absl::StrCat("  round_deadline: 10m\n  secure_aggregation: ",
                                              secure(), "\n")));
  const auto start = std::chrono::steady_clock::now();
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 240);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(seconds, 120);  // never the 10-minute deadline
  for (int round = 1; round <= 4; ++round) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("sextant: round ", round,
                                              ": client east/0 failed: client command exited "
                                              "with status 3; stderr: CUDA error: out of memory")));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("round=", round)));
  }
  EXPECT_THAT(r.out, HasSubstr("clients=4 rejected=0 failed=1"));
  EXPECT_EQ(Events(dir_ + "/run", "client_failed"), 4);
  EXPECT_EQ(Events(dir_ + "/run", "round_failed"), 0);
}

// A command client's weight is bounded as every client's is (examples_per_client): a claim of
// a trillion examples never reaches the mean, and the run says why.
TEST_P(FederatedFailureTest, AClientClaimingMoreExamplesThanItsCapIsRefused) {
  WriteFile(dir_ + "/greedy.sh", R"(#!/bin/sh
cp "$SEXTANT_GLOBAL_MODEL" "$SEXTANT_UPDATED_MODEL"
if [ "$SEXTANT_CLIENT_ID" = "east/0" ]; then echo "num_examples=1000000000000"; exit 0; fi
echo "num_examples=100"
)");
  WriteFile(dir_ + "/exp.yaml",
            Experiment("greedy.sh", absl::StrCat("  secure_aggregation: ", secure(), "\n")));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("client east/0 failed: the client command reported "
                               "num_examples=1e+12, more than 200"));
  EXPECT_THAT(r.out, HasSubstr("clients=4 rejected=0 failed=1"));
}

// Fewer rounds than max_failed_rounds, all failed: the run fails (exit 1) rather than finish
// with no model and a made-up score.
TEST_P(FederatedFailureTest, ARunWithNoCompletedRoundFails) {
  WriteFile(dir_ + "/exp.yaml",
            absl::StrReplaceAll(
                Experiment("fail.sh", absl::StrCat("  secure_aggregation: ", secure(), "\n")),
                {{"rounds: 4", "rounds: 2"}}));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 240);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("no round completed: every one of the 2 rounds failed"));
  EXPECT_THAT(r.out, Not(HasSubstr("finished: val_accuracy")));
  auto state = QueryRows(dir_ + "/run/state.db", "SELECT value FROM meta WHERE key = 'state'");
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0][0], "FAILED");
  // Its report speaks of rounds, as the run does.
  r = RunProcess({kSextant, "report", dir_ + "/run", "-o", dir_ + "/report.html"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(0 rounds, "));
  EXPECT_THAT(r.err, HasSubstr("no round has completed yet"));
}

INSTANTIATE_TEST_SUITE_P(PlaintextAndSecure, FederatedFailureTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Secure" : "Plaintext";
                         });

// A client command whose script is not there is named before the run starts any client.
TEST(FederatedFailureLoadTest, ValidateWarnsOfAMissingClientScript) {
  const std::string dir = testing::MakeTempDir("fl-failures-script");
  WriteFile(dir + "/exp.yaml", Experiment("no-such-client.sh", ""));
  auto r = RunProcess({kSextant, "validate", dir + "/exp.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: federation.client_command: no-such-client.sh does not "
                               "exist in " + dir));
  WriteFile(dir + "/no-such-client.sh", kFailing);
  r = RunProcess({kSextant, "validate", dir + "/exp.yaml"});
  EXPECT_THAT(r.err, Not(HasSubstr("warning")));
}

TEST(FederatedFailureLoadTest, MaxFailedRoundsIsCheckedAtLoad) {
  const std::string dir = testing::MakeTempDir("fl-failures-load");
  WriteFile(dir + "/zero.yaml", Experiment("fail.sh", "  max_failed_rounds: 0\n"));
  auto r = RunProcess({kSextant, "validate", dir + "/zero.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("federation.max_failed_rounds"));
  WriteFile(dir + "/buffered.yaml",
            Experiment("fail.sh", "  mode: buffered\n  buffer_size: 4\n  max_failed_rounds: 2\n"));
  r = RunProcess({kSextant, "validate", dir + "/buffered.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("does not apply to mode: buffered"));
}

}  // namespace
}  // namespace sextant
