// TLS everywhere for federated runs and fleet workers, with real processes: a regional
// aggregator that refuses callers without an enrolled certificate or a token, the non-loopback
// rule for aggregators, and fleet-launched workers that dial the orchestrator over TLS. (A whole
// federated run over mTLS is federated_tls_run_test, labelled slow.)
#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sextant/v1/federation_service.grpc.pb.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using testing::WaitFor;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

class FederatedSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("fed-security");
    certs_ = dir_ + "/certs";
    auto init = RunProcess({kSextant, "certs", "init", certs_});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  std::string Read(const std::string& dir, const std::string& file) {
    return ReadFile(dir + "/" + file);
  }
  std::string Token(const std::string& dir, const std::string& role) {
    return std::string(absl::StripAsciiWhitespace(Read(dir, role + ".token")));
  }

  // A TLS channel trusting certs_'s CA, presenting DIR/NAME.pem/.key when dir is not empty and
  // sending token when not empty.
  std::shared_ptr<grpc::Channel> Tls(const std::string& target, const std::string& dir,
                                     const std::string& name, const std::string& token) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(certs_, "ca.pem");
    if (!dir.empty()) {
      ssl.pem_cert_chain = Read(dir, name + ".pem");
      ssl.pem_private_key = Read(dir, name + ".key");
    }
    auto creds = grpc::SslCredentials(ssl);
    if (!token.empty()) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(token));
    }
    return grpc::CreateChannel(target, creds);
  }

  // One GetRound for a client that is not sampled: OK (a WAIT) once the call is let in.
  grpc::Status GetRound(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::FederationService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RoundRequest req;
    req.set_experiment_id("x");
    req.set_client_id("east/0");
    req.set_round(-1);
    auto reader = stub->GetRound(&ctx, req);
    v1::ModelChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  std::string dir_, certs_;
};

TEST_F(FederatedSecurityTest, AggregatorRefusesCallersWithoutAnEnrolledCertificateOrToken) {
  const std::string other = dir_ + "/other-ca";
  ASSERT_EQ(RunProcess({kSextant, "certs", "init", other}).exit_code, 0);
  ASSERT_EQ(RunProcess({kSextant, "certs", "issue", certs_, "stranger"}).exit_code, 0);
  const std::string port_file = dir_ + "/east.port";
  // Upstream is unreachable: the aggregator serves its clients while it keeps trying.
  BackgroundProcess agg({kWorker, "--role", "aggregator", "--region", "east", "--connect",
                         "127.0.0.1:1", "--experiment-id", "x", "--model-size", "4", "--work-dir",
                         dir_ + "/east", "--port-file", port_file, "--tls-dir", certs_});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(port_file); }, 30)) << agg.err();
  const std::string target =
      absl::StrCat("127.0.0.1:", std::string(absl::StripAsciiWhitespace(ReadFile(port_file))));
  const std::string worker_token = Token(certs_, "worker");

  // Plaintext, and TLS without a client certificate or with one from another CA: the
  // handshake fails.
  EXPECT_EQ(GetRound(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetRound(Tls(target, "", "", worker_token)).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetRound(Tls(target, other, "worker", Token(other, "worker"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A certificate of this CA that is not enrolled, and an enrolled one without a token.
  EXPECT_EQ(GetRound(Tls(target, certs_, "stranger", worker_token)).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetRound(Tls(target, certs_, "worker", "")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetRound(Tls(target, certs_, "worker", "not-a-token")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The enrolled worker certificate with the worker token gets in.
  grpc::Status ok = GetRound(Tls(target, certs_, "worker", worker_token));
  EXPECT_TRUE(ok.ok()) << ok.error_code() << " " << ok.error_message();
}

TEST_F(FederatedSecurityTest, AggregatorRefusesANonLoopbackAddressWithoutTls) {
  auto r = RunProcess({kWorker, "--role", "aggregator", "--region", "east", "--connect",
                       "127.0.0.1:1", "--experiment-id", "x", "--model-size", "4", "--work-dir",
                       dir_ + "/east", "--listen", "0.0.0.0:0"},
                      30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("refusing to listen on 0.0.0.0:0"));
  auto bad = RunProcess({kWorker, "--role", "aggregator", "--region", "east", "--connect",
                         "127.0.0.1:1", "--experiment-id", "x", "--model-size", "4", "--work-dir",
                         dir_ + "/east", "--tls-dir", dir_ + "/nowhere"},
                        30);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--tls-dir"));
}

TEST_F(FederatedSecurityTest, FleetWorkersDialTheOrchestratorOverTls) {
  WriteFile(dir_ + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 1}
)");
  WriteFile(dir_ + "/exp.yaml", R"(name: fleet-tls
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 1, max_trials: 3, max_concurrent: 2}
trial:
  command: [sh, -c, "echo loss=$SEXTANT_TRIAL_ID"]
resources:
  provider: local
  catalog: catalog.yaml
  pools:
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)");
  auto r = RunProcess(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--tls-dir", certs_}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("3/3 trials"));
  // Plaintext workers could not have registered with a TLS server: every trial ran on a
  // provider-launched worker that dialled over mTLS with the worker token.
  nlohmann::json j = nlohmann::json::parse(
      RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"}).out, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(j["cost"]["by_pool"].contains("od-r1")) << j["cost"].dump();
}

}  // namespace
}  // namespace sextant
