// WorkerService.Register against hand-written gRPC callers over real mTLS, with per-host worker
// certificates, on a run of the static provider (whose hand-started workers are billed): a
// worker's region comes from its certificate, a pool of the run takes only workers of its
// region, every field is bounded before it is stored, and adoption stops at max_instances.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "sextant/v1/worker_service.grpc.pb.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::BackgroundProcess;
using testing::QueryRows;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

class RegisterSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("register-security");
    certs_ = dir_ + "/certs";
    ASSERT_EQ(RunProcess({kSextant, "certs", "init", certs_}).exit_code, 0);
    for (const char* region : {"r1", "r2"}) {
      auto r = RunProcess({kSextant, "certs", "issue", certs_, absl::StrCat("w-", region), "--role",
                           "worker", "--region", region, "--enroll"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    WriteFile(dir_ + "/catalog.yaml", R"(regions: [r1, r2]
instances: {cpu.1x: {cpus: 1}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: cpu.1x, market: on_demand, price_per_hour: 1}
  - {region: r2, instance: cpu.1x, market: on_demand, price_per_hour: 100}
)");
    WriteFile(dir_ + "/exp.yaml", R"(name: register
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {max_trials: 1}
trial:
  command: [sh, -c, "sleep 60; echo loss=1"]
resources:
  provider: static
  catalog: catalog.yaml
  pools:
    - {name: cheap, region: r1, instance: cpu.1x, market: on_demand, max_instances: 1}
    - {name: dear, region: r2, instance: cpu.1x, market: on_demand, max_instances: 1}
)");
  }

  // mTLS to target as certs_/NAME.
  std::unique_ptr<v1::WorkerService::Stub> Stub(const std::string& target,
                                                const std::string& name) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(certs_ + "/ca.pem");
    ssl.pem_cert_chain = ReadFile(certs_ + "/" + name + ".pem");
    ssl.pem_private_key = ReadFile(certs_ + "/" + name + ".key");
    return v1::WorkerService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(ssl)));
  }

  grpc::Status Register(v1::WorkerService::Stub* stub, const std::string& region,
                        const std::string& pool, const std::string& hostname = "h") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterRequest req;
    req.set_protocol_version(1);
    req.set_region(region);
    req.set_pool(pool);
    req.set_hostname(hostname);
    v1::RegisterResponse resp;
    return stub->Register(&ctx, req, &resp);
  }

  // The address the orchestrator tells workers to --connect to; empty when it never says.
  static std::string WorkerTarget(BackgroundProcess& orchestrator) {
    if (!orchestrator.WaitForOutput("start workers with", 60)) return "";
    std::smatch m;
    const std::string out = orchestrator.out();
    return std::regex_search(out, m, std::regex("--connect (\\S+)")) ? m[1].str() : "";
  }

  // How many events of `kind` the run has recorded.
  static int Events(const std::string& db, const std::string& kind) {
    return std::stoi(
        QueryRows(db, "SELECT COUNT(*) FROM events WHERE kind = '" + kind + "'")[0][0]);
  }

  std::string dir_, certs_;
};

TEST_F(RegisterSecurityTest, AWorkerRegistersOnlyAsItsCertificatesRegionWithinBounds) {
  const std::string run = dir_ + "/run";
  BackgroundProcess orchestrator(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run, "--tls-dir", certs_});
  const std::string target = WorkerTarget(orchestrator);
  ASSERT_FALSE(target.empty()) << orchestrator.out() << orchestrator.err();
  auto r1 = Stub(target, "w-r1");

  // A certificate of r1 claiming r2 and r2's dear pool: refused, naming the rule.
  grpc::Status s = Register(r1.get(), "r2", "dear");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("certificate is of region r1"));
  // Its own region, but r2's pool.
  s = Register(r1.get(), "r1", "dear");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("pool dear is in region r2"));
  // No region at all: it is the certificate's, and r2's pool is still not for it.
  s = Register(r1.get(), "", "dear");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  // Out-of-bounds fields, refused before anything is stored.
  s = Register(r1.get(), "r1", "cheap", std::string(1 << 20, 'h'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  s = Register(r1.get(), "r1", std::string(4096, 'p'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_LT(s.error_message().size(), 200u);

  // Three honest registrations into the one-instance cheap pool: one is adopted and billed, the
  // others get no work.
  for (int i = 0; i < 3; ++i) {
    s = Register(r1.get(), "r1", "cheap", absl::StrCat("host-", i));
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  const std::string db = run + "/state.db";
  ASSERT_TRUE(testing::WaitFor([&] { return Events(db, "budget_refused") == 2; }, 30))
      << orchestrator.out();
  EXPECT_EQ(Events(db, "instance_adopted"), 1);
  auto refused = QueryRows(db, "SELECT message FROM events WHERE kind = 'budget_refused'");
  EXPECT_THAT(refused[0][0], HasSubstr("the pool has its max_instances (1)"));
  // Nothing of the refused calls was stored: only the three honest workers, all in r1.
  auto workers = QueryRows(db, "SELECT region, pool, length(hostname) FROM workers");
  ASSERT_EQ(workers.size(), 3u);
  for (const auto& w : workers) {
    EXPECT_EQ(w[0], "r1");
    EXPECT_EQ(w[1], "cheap");
    EXPECT_EQ(w[2], "6");
  }
  orchestrator.Signal(SIGINT);
  EXPECT_EQ(orchestrator.Wait(60), 130) << orchestrator.out() << orchestrator.err();
}

// Adoption respects the budget as well as max_instances: with room for three instances but a
// cap that pays for one, the second hand-started worker is refused by the budget, not adopted.
TEST_F(RegisterSecurityTest, AdoptionStopsAtTheBudget) {
  std::string yaml = ReadFile(dir_ + "/exp.yaml");
  const std::string one = "market: on_demand, max_instances: 1}";
  yaml.replace(yaml.find(one), one.size(), "market: on_demand, max_instances: 3}");
  // Adopting one instance at 1 USD/h commits 11 s (its first second and the wind-down): 0.0031.
  yaml += "budget: {max_cost: 0.005}\n";  // one fits, two do not
  WriteFile(dir_ + "/exp.yaml", yaml);
  const std::string run = dir_ + "/run";
  BackgroundProcess orchestrator(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run, "--tls-dir", certs_});
  const std::string target = WorkerTarget(orchestrator);
  ASSERT_FALSE(target.empty()) << orchestrator.out() << orchestrator.err();
  auto r1 = Stub(target, "w-r1");
  for (int i = 0; i < 2; ++i) {
    grpc::Status s = Register(r1.get(), "r1", "cheap", absl::StrCat("host-", i));
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  const std::string db = run + "/state.db";
  ASSERT_TRUE(testing::WaitFor([&] { return Events(db, "budget_refused") == 1; }, 30))
      << orchestrator.out();
  EXPECT_EQ(Events(db, "instance_adopted"), 1);
  auto refused = QueryRows(db, "SELECT message FROM events WHERE kind = 'budget_refused'");
  EXPECT_THAT(refused[0][0], ::testing::Not(HasSubstr("max_instances"))) << refused[0][0];
  orchestrator.Signal(SIGINT);
  orchestrator.Wait(60);
}

}  // namespace
}  // namespace sextant
