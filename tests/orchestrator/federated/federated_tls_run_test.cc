// A federated run over mTLS, end to end with real processes and real Fashion-MNIST: the
// orchestrator serves FederationService to its regional aggregators with the orchestrator
// certificate; every aggregator and client gets a certificate of its own identity from the
// run's CA (sextant://aggregator/R/aggregator, sextant://client/R/I), dials and serves with it,
// and may speak only as itself. Labelled slow (about 5-20 s on a loaded machine).
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

TEST(FederatedTlsRunTest, FederatedRunCompletesOverMutualTlsWithEachParticipantsOwnCertificate) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("fed-tls-run");
  const std::string certs = dir + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  WriteFile(dir + "/exp.yaml", R"(name: fl-tls
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 1}, {name: west, clients: 1}]
  rounds: 2
  local_lr: 0.05
  min_clients: 2
  round_deadline: 60s
  seed: 5
  examples_per_client: 300
  validation_examples: 500
  secure_aggregation: false
)");
  auto r = RunProcess(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--tls-dir", certs}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // No participant failed (their errors start with "sextant-worker:"): a plaintext or
  // unauthenticated participant would have been refused and the rounds would not have closed.
  for (const char* log :
       {"aggregator-east.log", "aggregator-west.log", "client-east-0.log", "client-west-0.log"}) {
    const std::string text = ReadFile(dir + "/run/logs/" + log);
    EXPECT_THAT(text, Not(HasSubstr("sextant-worker:"))) << log << ": " << text;
  }
  auto results = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << results.out;
  ASSERT_TRUE(j["best"].is_object()) << results.out;
  EXPECT_GT(j["best"]["value"].get<double>(), 0.3);  // two rounds learn well above chance
  // Each participant had its own identity.
  for (const char* pem : {"east/aggregator/aggregator.pem", "west/aggregator/aggregator.pem",
                          "east/client-0/0.pem", "west/client-0/0.pem"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/run/federation/tls/" + std::string(pem))) << pem;
  }
}

}  // namespace
}  // namespace sextant
