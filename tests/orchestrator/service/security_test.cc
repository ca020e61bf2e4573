// Security of the orchestrator's gRPC server with real processes: `sextant certs init`, TLS with
// mutual authentication, per-role bearer tokens, the non-loopback rule and secret redaction.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/component.h"
#include "nlohmann/json.hpp"
#include "rpc/certificates.h"
#include "rpc/run_secret.h"
#include "sextant/v1/admin_service.grpc.pb.h"
#include "sextant/v1/worker_service.grpc.pb.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

std::string Experiment(int trials, const std::string& command, const std::string& extra = "") {
  return absl::StrCat(R"(name: secure
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 1, max_trials: )",
                      trials, R"(, max_concurrent: 1}
trial:
  command: )",
                      command, "\n", extra);
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("security");
    certs_ = dir_ + "/certs";
    auto init = RunProcess({kSextant, "certs", "init", certs_});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  std::string Read(const std::string& file) { return ReadFile(certs_ + "/" + file); }
  std::string Token(const std::string& role) {
    return std::string(absl::StripAsciiWhitespace(Read(role + ".token")));
  }

  // Starts a run over TLS whose single trial sleeps long enough for the checks; returns the
  // address it listens on.
  std::string StartSecureRun(std::unique_ptr<BackgroundProcess>* run) {
    WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 30\necho loss=1\n");
    WriteFile(dir_ + "/exp.yaml", Experiment(1, "[sh, slow.sh]"));
    *run = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run",
                                 "--tls-dir", certs_, "--workers", "1"});
    EXPECT_TRUE((*run)->WaitForOutput("listening on", 30)) << (*run)->err();
    std::string out = (*run)->out();
    size_t at = out.find("listening on ") + 13;
    return out.substr(at, out.find(')', at) - at);
  }

  // A TLS channel trusting our CA, presenting cert/key when given, sending token when given.
  std::shared_ptr<grpc::Channel> Channel(const std::string& target, const KeyPair* client,
                                         const std::string& token) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read("ca.pem");
    if (client != nullptr) {
      ssl.pem_cert_chain = client->cert_pem;
      ssl.pem_private_key = client->key_pem;
    }
    auto creds = grpc::SslCredentials(ssl);
    if (!token.empty()) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(token));
    }
    return grpc::CreateChannel(target, creds);
  }

  grpc::Status CallRegister(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::WorkerService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterRequest req;
    req.set_protocol_version(1);
    req.set_region("test");
    v1::RegisterResponse resp;
    return stub->Register(&ctx, req, &resp);
  }

  grpc::Status CallStatus(const std::shared_ptr<grpc::Channel>& channel,
                          v1::GetStatusResponse* resp) {
    auto stub = v1::AdminService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetStatus(&ctx, v1::GetStatusRequest(), resp);
  }

  KeyPair WorkerPair() { return KeyPair{Read("worker.pem"), Read("worker.key")}; }

  // A certificate of our CA without a sextant:// identity (as issued before identities), enrolled.
  void EnrollLegacyCertificate() {
    auto legacy = IssueCertificate(KeyPair{Read("ca.pem"), Read("ca.key")}, "legacy", {}, 1);
    ASSERT_TRUE(legacy.ok());
    legacy_ = *legacy;
    auto fp = CertificateFingerprint(legacy_.cert_pem);
    ASSERT_TRUE(fp.ok());
    WriteFile(certs_ + "/enrolled.txt", Read("enrolled.txt") + *fp + " legacy\n");
  }

  // Register through `stub`; *session receives the session the orchestrator opened.
  grpc::Status Register(v1::WorkerService::Stub* stub, int64_t* worker_id, std::string* session) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterRequest req;
    req.set_protocol_version(1);
    v1::RegisterResponse resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    *worker_id = resp.worker_id();
    auto it = ctx.GetServerInitialMetadata().find("sextant-session");
    if (it != ctx.GetServerInitialMetadata().end()) {
      session->assign(it->second.data(), it->second.size());
    }
    return s;
  }

  // A context with a deadline, carrying `session` when not empty.
  static std::unique_ptr<grpc::ClientContext> Call(const std::string& session) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!session.empty()) ctx->AddMetadata("sextant-session", session);
    return ctx;
  }

  KeyPair legacy_;

  std::string dir_, certs_;
};

TEST_F(SecurityTest, CertsInitWritesCaCertificatesTokensAndRefusesToOverwrite) {
  for (const char* f : {"ca.pem", "ca.key", "orchestrator.pem", "orchestrator.key",
                        "aggregator.pem", "aggregator.key", "worker.pem", "worker.key",
                        "enrolled.txt", "worker.token", "aggregator.token", "admin.token"}) {
    EXPECT_TRUE(std::filesystem::exists(certs_ + "/" + f)) << f;
  }
  auto perms = std::filesystem::status(certs_ + "/ca.key").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::group_read, std::filesystem::perms::none);
  EXPECT_EQ(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  auto fp = CertificateFingerprint(Read("worker.pem"));
  ASSERT_TRUE(fp.ok());
  EXPECT_THAT(Read("enrolled.txt"), HasSubstr(*fp + " worker"));
  EXPECT_NE(Token("worker"), Token("admin"));
  EXPECT_EQ(Token("admin").size(), 64u);
  auto again = RunProcess({kSextant, "certs", "init", certs_});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("already holds a CA"));
  // A name that would leave the folder, or replace the CA's key: refused, nothing written.
  auto escape = RunProcess({kSextant, "certs", "issue", certs_, "../x", "--role", "worker"});
  EXPECT_EQ(escape.exit_code, 2);
  EXPECT_THAT(escape.err, HasSubstr("NAME '../x' must start with a letter or digit"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/x.pem"));
  const std::string ca_key = Read("ca.key");
  auto ca = RunProcess({kSextant, "certs", "issue", certs_, "ca"});
  EXPECT_EQ(ca.exit_code, 2);
  EXPECT_EQ(Read("ca.key"), ca_key);
  auto issued = RunProcess({kSextant, "certs", "issue", certs_, "gpu-7", "--role", "worker",
                            "--region", "eu", "--san", "gpu-7.example.org,10.1.2.3", "--enroll"});
  EXPECT_EQ(issued.exit_code, 0) << issued.err;
  EXPECT_THAT(issued.out, HasSubstr("sextant://worker/eu/gpu-7"));
  EXPECT_THAT(Read("enrolled.txt"), HasSubstr(" gpu-7"));
}

TEST_F(SecurityTest, RunCompletesOverMutualTlsWithTokens) {
  WriteFile(dir_ + "/exp.yaml", Experiment(3, R"([sh, -c, "echo loss=$SEXTANT_TRIAL_ID"])"));
  auto r = RunProcess(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--tls-dir", certs_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("3/3 trials"));
}

TEST_F(SecurityTest, UnknownClientsAndWrongRolesAreRefusedWithTheRightCode) {
  EnrollLegacyCertificate();
  std::unique_ptr<BackgroundProcess> run;
  std::string target = StartSecureRun(&run);
  KeyPair worker = WorkerPair();

  // The enrolled worker with its token gets in.
  EXPECT_TRUE(CallRegister(Channel(target, &worker, Token("worker"))).ok());
  // No client certificate: the TLS handshake fails.
  EXPECT_EQ(CallRegister(Channel(target, nullptr, Token("worker"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A certificate from another CA: the handshake fails.
  auto other_ca = CreateCertificateAuthority("someone else", 1);
  ASSERT_TRUE(other_ca.ok());
  auto stranger = IssueCertificate(*other_ca, "worker", {}, 1);
  ASSERT_TRUE(stranger.ok());
  EXPECT_EQ(CallRegister(Channel(target, &*stranger, Token("worker"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A valid certificate from our CA that was never enrolled.
  auto unenrolled = IssueCertificate(KeyPair{Read("ca.pem"), Read("ca.key")}, "rogue", {}, 1);
  ASSERT_TRUE(unenrolled.ok());
  grpc::Status s = CallRegister(Channel(target, &*unenrolled, Token("worker")));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("not enrolled"));
  // The worker certificate names its identity (sextant://worker/-/worker): no token needed,
  // and a made-up one changes nothing.
  EXPECT_TRUE(CallRegister(Channel(target, &worker, "")).ok());
  EXPECT_TRUE(CallRegister(Channel(target, &worker, std::string(64, 'a'))).ok());
  // An enrolled certificate without an identity still needs a known token.
  EXPECT_EQ(CallRegister(Channel(target, &legacy_, "")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallRegister(Channel(target, &legacy_, std::string(64, 'a'))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(CallRegister(Channel(target, &legacy_, Token("worker"))).ok());
  // The worker certificate calling an admin RPC, even with the admin token.
  v1::GetStatusResponse status;
  s = CallStatus(Channel(target, &worker, Token("admin")), &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("may not call /sextant.v1.AdminService/GetStatus"));
  // Plaintext to a TLS server.
  auto plain = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  EXPECT_EQ(CallRegister(plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The admin certificate may.
  KeyPair admin_pair{Read("admin.pem"), Read("admin.key")};
  s = CallStatus(Channel(target, &admin_pair, ""), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(status.experiment(), "secure");
  EXPECT_EQ(status.max_trials(), 1);
  // Drain ends the run as SIGINT would.
  auto admin = v1::AdminService::NewStub(Channel(target, &admin_pair, ""));
  grpc::ClientContext ctx;
  v1::DrainResponse drained;
  ASSERT_TRUE(admin->Drain(&ctx, v1::DrainRequest(), &drained).ok());
  EXPECT_EQ(run->Wait(30), 130) << run->out() << run->err();
}

// A worker id belongs to the caller that registered it: another worker's lease cannot be
// heartbeaten, reported on or completed, and an id never registered is unknown. Nothing a forger
// sends is stored.
TEST_F(SecurityTest, AWorkerActsOnlyOnItsOwnLeases) {
  std::unique_ptr<BackgroundProcess> run;
  std::string target = StartSecureRun(&run);
  KeyPair worker = WorkerPair();
  // The run's own local worker (worker 1) leases trial 1, which sleeps 30 s.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return std::filesystem::exists(dir_ + "/run/logs/trial-1.1.out"); }, 30));
  auto stub = v1::WorkerService::NewStub(Channel(target, &worker, ""));
  int64_t mine = 0;
  std::string session;
  ASSERT_TRUE(Register(stub.get(), &mine, &session).ok());
  ASSERT_EQ(session.size(), 64u);
  ASSERT_NE(mine, 1);
  // A worker id this orchestrator never handed out.
  v1::LeaseRequest lease;
  lease.set_worker_id(mine + 1000);
  v1::LeaseResponse leased;
  grpc::Status s = stub->Lease(Call(session).get(), lease, &leased);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  // Acting as the run's own worker (worker 1) with our session, without one, or with a guess.
  v1::ReportRequest report;
  report.set_worker_id(1);
  v1::Measurement* m = report.add_measurements();
  m->set_trial_id(1);
  m->set_attempt(1);
  m->set_sequence(1);
  (*m->mutable_metrics())["loss"] = -999;
  v1::ReportResponse reported;
  for (const std::string& forged : {session, std::string(), std::string(64, 'f')}) {
    s = stub->Report(Call(forged).get(), report, &reported);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  v1::HeartbeatRequest beat;
  beat.set_worker_id(1);
  beat.set_trial_id(1);
  beat.set_attempt(1);
  v1::HeartbeatResponse beaten;
  EXPECT_EQ(stub->Heartbeat(Call(session).get(), beat, &beaten).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::CompleteRequest complete;
  complete.set_worker_id(1);
  complete.set_trial_id(1);
  complete.set_attempt(1);
  complete.set_exit_code(0);
  v1::CompleteResponse completed;
  EXPECT_EQ(stub->Complete(Call(session).get(), complete, &completed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // As itself, the registered caller is served.
  lease.set_worker_id(mine);
  s = stub->Lease(Call(session).get(), lease, &leased);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // End the run; the forged report never reached the store.
  KeyPair admin_pair{Read("admin.pem"), Read("admin.key")};
  auto admin = v1::AdminService::NewStub(Channel(target, &admin_pair, ""));
  grpc::ClientContext ctx;
  v1::DrainResponse drained;
  ASSERT_TRUE(admin->Drain(&ctx, v1::DrainRequest(), &drained).ok());
  EXPECT_EQ(run->Wait(30), 130) << run->out() << run->err();
  auto results = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
  EXPECT_THAT(results.out, Not(HasSubstr("-999")));
}

// Without --tls-dir the services listen on loopback, which any local user reaches: every call
// must carry the run's secret, which only the run's user can read.
TEST_F(SecurityTest, LoopbackModeRefusesCallersWithoutTheRunsSecret) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 30\necho loss=1\n");
  WriteFile(dir_ + "/exp.yaml", Experiment(1, "[sh, slow.sh]"));
  BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--workers", "1"});
  ASSERT_TRUE(run.WaitForOutput("listening on", 30)) << run.err();
  std::string out = run.out();
  size_t at = out.find("listening on ") + 13;
  const std::string target = out.substr(at, out.find(')', at) - at);
  const std::string secrets = dir_ + "/run/secrets";
  EXPECT_EQ(std::filesystem::status(secrets).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  for (const char* f : {"worker.secret", "admin.secret"}) {
    EXPECT_EQ(
        std::filesystem::status(secrets + "/" + f).permissions() & std::filesystem::perms::all,
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << f;
  }
  const std::string worker_secret =
      std::string(absl::StripAsciiWhitespace(ReadFile(secrets + "/worker.secret")));
  const std::string admin_secret =
      std::string(absl::StripAsciiWhitespace(ReadFile(secrets + "/admin.secret")));
  // No secret, a made-up one, or plaintext: refused before any service runs.
  auto local = [&](const std::string& secret) {
    std::shared_ptr<grpc::ChannelCredentials> creds =
        secret.empty() ? grpc::experimental::LocalCredentials(LOCAL_TCP)
                       : LoopbackChannelCredentials(secret);
    return grpc::CreateChannel(target, creds);
  };
  grpc::Status s = CallRegister(local(""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_EQ(CallRegister(local(std::string(64, 'a'))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(
      CallRegister(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())).error_code(),
      grpc::StatusCode::OK);
  // The worker secret registers but may not call the admin service; the admin secret may.
  EXPECT_TRUE(CallRegister(local(worker_secret)).ok());
  v1::GetStatusResponse status;
  EXPECT_EQ(CallStatus(local(worker_secret), &status).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(CallStatus(local(admin_secret), &status).ok());
  // Another local user cannot read the secret, and without it gets UNAUTHENTICATED. The check
  // needs root and setpriv; under CI it is never skipped.
  const bool second_user = geteuid() == 0 && std::filesystem::exists("/usr/bin/setpriv");
  if (!second_user && ::sextant::component::UnderCi()) {
    ADD_FAILURE() << "CI=true: the second-user check needs root and setpriv";
  }
  if (second_user) {
    const std::vector<std::string> nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                             "--clear-groups"};
    // The build may sit where uid 65534 cannot reach (/root): that user runs its own copy.
    char tmpl[] = "/tmp/sextant-nobody-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string theirs = std::string(tmpl) + "/sextant-worker";
    std::filesystem::copy_file(kWorker, theirs);
    ::chmod(tmpl, 0755);
    ::chmod(theirs.c_str(), 0755);
    std::vector<std::string> argv = nobody;
    argv.insert(argv.end(),
                {theirs, "--connect", target, "--secret-file", secrets + "/worker.secret"});
    auto with_file = RunProcess(argv, 30);
    EXPECT_EQ(with_file.exit_code, 2) << with_file.err;
    EXPECT_THAT(with_file.err, HasSubstr("--secret-file"));
    argv = nobody;
    argv.insert(argv.end(), {theirs, "--connect", target});
    auto without = RunProcess(argv, 30);
    EXPECT_EQ(without.exit_code, 1) << without.err;
    EXPECT_THAT(without.err, HasSubstr("cannot register"));
    std::filesystem::remove_all(tmpl);
  }
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(30), 130) << run.out() << run.err();
}

TEST_F(SecurityTest, NonLoopbackListenNeedsTlsAndAuth) {
  WriteFile(dir_ + "/exp.yaml", Experiment(1, R"([sh, -c, "echo loss=1"])"));
  auto plain = RunProcess(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--listen", "0.0.0.0:0"});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_THAT(plain.err, HasSubstr("needs TLS and authentication"));
  auto secure = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run2",
                            "--listen", "0.0.0.0:0", "--tls-dir", certs_});
  EXPECT_EQ(secure.exit_code, 0) << secure.out << secure.err;
}

TEST_F(SecurityTest, SecretsAreRedactedFromEventsErrorsAndResults) {
  const std::string secret = "s3cr3t-value-8d1f";
  WriteFile(dir_ + "/leak.sh", R"(#!/bin/sh
echo "sextant-event: note using $API_TOKEN"
echo "loss=1"
echo "failed with token $API_TOKEN and $DB_PASSWORD" >&2
exit 3
)");
  WriteFile(dir_ + "/exp.yaml",
            Experiment(1, "[sh, leak.sh]",
                       absl::StrCat("  env: {API_TOKEN: ", secret, ", DB_PASSWORD: hunter22}\n")));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  // Its only trial failed, so the run failed, quoting the trial's error: redacted there too.
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("failed with token [REDACTED] and [REDACTED]"));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr(secret)));
  auto results = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  auto report = RunProcess({kSextant, "report", dir_ + "/run", "-o", dir_ + "/report.html"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  for (const std::string& text : {results.out, events.out, ReadFile(dir_ + "/report.html")}) {
    EXPECT_THAT(text, Not(HasSubstr(secret)));
    EXPECT_THAT(text, Not(HasSubstr("hunter22")));
  }
  EXPECT_THAT(results.out, HasSubstr("failed with token [REDACTED] and [REDACTED]"));
  EXPECT_THAT(events.out, HasSubstr("using [REDACTED]"));
}

}  // namespace
}  // namespace sextant
