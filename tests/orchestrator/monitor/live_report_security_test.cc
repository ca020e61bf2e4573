// What another local user or a foreign web page can reach, through the real binaries: the live
// report of --metrics-port (its token, Host and Origin checks; /metrics open on loopback), a
// worker told to dial a remote orchestrator without TLS, and an aggregator's certificate posing
// as the orchestrator or as another region's aggregator.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/channel_credentials.h"
#include "sextant/v1/worker_service.grpc.pb.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::HttpBody;
using testing::HttpExchange;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using ::testing::StartsWith;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

// A parameter name and an experiment name that only the page itself shows.
constexpr char kParameter[] = "guarded_knob";
constexpr char kExperiment[] = "live-guarded";

class LiveReportSecurityTest : public ::testing::Test {
 protected:
  // Starts a search that goes on for minutes, with the live report on a free port; sets port_
  // and token_ from the line that announces it.
  void SetUp() override {
    dir_ = MakeTempDir("live-security");
    WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 0.3\necho loss=1\n");
    WriteFile(dir_ + "/exp.yaml", absl::StrCat("name: ", kExperiment, R"(
objective: {metric: loss, goal: minimize}
parameters:
  )",
                                               kParameter, R"(: {type: float, min: 0, max: 1}
search: {sampler: random, seed: 1, max_trials: 500, max_concurrent: 1}
trial:
  command: [sh, slow.sh]
)"));
    run_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--metrics-port", "0"});
    ASSERT_TRUE(run_->WaitForOutput("/metrics", 30)) << run_->out() << run_->err();
    std::smatch m;
    const std::string out = run_->out();
    ASSERT_TRUE(std::regex_search(
        out, m,
        std::regex("live report on http://127\\.0\\.0\\.1:(\\d+)/\\?token=([0-9a-f]{64}) , "
                   "metrics on http://127\\.0\\.0\\.1:\\d+/metrics\n")))
        << out;
    port_ = std::stoi(m[1].str());
    token_ = m[2].str();
    // Until a trial has run, the page has no parameters to show, nor /metrics the search's.
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return HttpBody(Get(Page(), OwnHost())).find(kParameter) != std::string::npos &&
                 HttpBody(Get("/metrics", OwnHost())).find("sextant_trials_max 500\n") !=
                     std::string::npos;
        },
        30))
        << run_->out() << run_->err();
  }

  // GET target with the given header lines (each ending in \r\n).
  std::string Get(const std::string& target, const std::string& headers) {
    return HttpExchange(port_, absl::StrCat("GET ", target, " HTTP/1.1\r\n", headers, "\r\n"));
  }
  std::string OwnHost() { return absl::StrCat("Host: 127.0.0.1:", port_, "\r\n"); }
  std::string Page() { return "/?token=" + token_; }

  // A refusal that shows nothing of the run.
  void ExpectRefused(const std::string& response) {
    EXPECT_THAT(response, StartsWith("HTTP/1.1 403")) << response;
    EXPECT_THAT(response, Not(HasSubstr(kParameter)));
    EXPECT_THAT(response, Not(HasSubstr(kExperiment)));
  }

  std::string dir_;
  std::unique_ptr<BackgroundProcess> run_;
  int port_ = 0;
  std::string token_;
};

TEST_F(LiveReportSecurityTest, PageIsServedWithThePrintedTokenOnly) {
  const std::string page = Get(Page(), OwnHost());
  ASSERT_THAT(page, StartsWith("HTTP/1.1 200")) << page;
  EXPECT_THAT(HttpBody(page), HasSubstr(kParameter));
  // The address carries the token: the page does not pass it on to what it links to.
  EXPECT_THAT(page, HasSubstr("Referrer-Policy: no-referrer"));
  EXPECT_THAT(Get(Page(), absl::StrCat("Host: localhost:", port_, "\r\n")),
              StartsWith("HTTP/1.1 200"));

  ExpectRefused(Get("/", OwnHost()));
  ExpectRefused(Get("/?token=", OwnHost()));
  std::string wrong = token_;
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  ExpectRefused(Get("/?token=" + wrong, OwnHost()));
  ExpectRefused(Get("/?token=" + token_.substr(0, 63), OwnHost()));

  // The token is the run's own secret: in the secrets folder, readable by this user only.
  const std::string file = dir_ + "/run/secrets/live-report.secret";
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(absl::StripAsciiWhitespace(ReadFile(file)), token_);
}

// Another local user, as a second uid: it cannot read the run's token, and the page it can
// reach on the port without one is refused (403) and shows nothing of the run.
TEST_F(LiveReportSecurityTest, AnotherUserGetsNoTokenAndNoPage) {
  SEXTANT_REQUIRE_COMPONENT(geteuid() == 0 && std::filesystem::exists("/usr/bin/setpriv"),
                            "needs root and setpriv to act as a second user");
  auto as_nobody = [](std::vector<std::string> argv) {
    argv.insert(argv.begin(),
                {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
    return RunProcess(argv, 30);
  };
  const std::string file = dir_ + "/run/secrets/live-report.secret";
  auto read = as_nobody({"/bin/cat", file});
  EXPECT_NE(read.exit_code, 0);
  EXPECT_THAT(read.out, Not(HasSubstr(token_)));
  const std::string fetch = absl::StrCat(
      "import urllib.request, urllib.error\n"
      "try:\n"
      "    r = urllib.request.urlopen('http://127.0.0.1:",
      port_,
      "/', timeout=10)\n"
      "    print(r.status); print(r.read().decode())\n"
      "except urllib.error.HTTPError as e:\n"
      "    print(e.code); print(e.read().decode())\n");
  auto page = as_nobody({"/usr/bin/python3", "-c", fetch});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  EXPECT_THAT(page.out, StartsWith("403")) << page.out;
  EXPECT_THAT(page.out, Not(HasSubstr(kParameter)));
}

// A DNS-rebinding page reaches the port under its own host name, and a page of another site
// sends its own Origin: even with the token, neither is answered.
TEST_F(LiveReportSecurityTest, ForeignHostOrOriginIsRefusedEvenWithTheToken) {
  ExpectRefused(Get(Page(), absl::StrCat("Host: rebind.attacker.example:", port_, "\r\n")));
  ExpectRefused(Get(Page(), "Host: 127.0.0.1\r\n"));  // another port's origin
  ExpectRefused(Get(Page(), ""));                     // no Host at all
  ExpectRefused(Get(Page(), absl::StrCat(OwnHost(), "Host: attacker.example\r\n")));
  ExpectRefused(Get(Page(), absl::StrCat(OwnHost(), "Origin: http://attacker.example\r\n")));
  ExpectRefused(Get(Page(), absl::StrCat(OwnHost(), "Origin: null\r\n")));
  ExpectRefused(Get(Page(), absl::StrCat(OwnHost(), "Origin: http://localhost:", port_, "\r\n")));
  // The page's own updates come from its own origin.
  EXPECT_THAT(Get(Page(), absl::StrCat(OwnHost(), "Origin: http://127.0.0.1:", port_, "\r\n")),
              StartsWith("HTTP/1.1 200"));
}

TEST_F(LiveReportSecurityTest, MetricsNeedNoTokenButTheirOwnHost) {
  const std::string scrape = Get("/metrics", OwnHost());
  ASSERT_THAT(scrape, StartsWith("HTTP/1.1 200")) << scrape;
  EXPECT_THAT(HttpBody(scrape), HasSubstr("sextant_trials_max 500\n"));
  EXPECT_THAT(Get("/metrics", absl::StrCat("Host: localhost:", port_, "\r\n")),
              StartsWith("HTTP/1.1 200"));
  ExpectRefused(Get("/metrics", absl::StrCat("Host: rebind.attacker.example:", port_, "\r\n")));
  ExpectRefused(
      Get("/metrics", absl::StrCat(OwnHost(), "Origin: http://rebind.attacker.example\r\n")));
}

// A non-loopback IPv4 address of this host ("" when it has none).
std::string HostAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &a, text, sizeof(text));
    found = text;
  }
  freeifaddrs(all);
  return found;
}

// A listener on a non-loopback address of this host, to dial and see whether anyone did; with
// no such address, a target nothing answers (10.255.255.1:7070) and no listener.
struct OffLoopbackListener {
  OffLoopbackListener() {
    const std::string host = HostAddress();
    if (host.empty()) return;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 8) != 0) {
      close(fd);
      fd = -2;
      return;
    }
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    target = absl::StrCat(host, ":", ntohs(a.sin_port));
  }
  ~OffLoopbackListener() {
    if (fd >= 0) close(fd);
  }
  bool ok() const { return fd != -2; }
  // True when a connection is waiting to be accepted.
  bool Connected() const {
    if (fd < 0) return false;
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
  }
  int fd = -1;
  std::string target = "10.255.255.1:7070";
};

// A worker pointed at a remote address without --tls-dir stops before it dials: no command can
// be leased to it in plaintext. Where the host has an address of its own, something listens
// there and is never connected to.
TEST(WorkerTransportTest, PlaintextToANonLoopbackAddressIsRefusedBeforeDialling) {
  const OffLoopbackListener off;
  ASSERT_TRUE(off.ok());
  const std::string& target = off.target;
  const std::string dir = MakeTempDir("worker-plaintext");
  WriteFile(dir + "/worker.secret", std::string(64, 'a'));
  chmod((dir + "/worker.secret").c_str(), 0600);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--secret-file", dir + "/worker.secret"}}) {
    std::vector<std::string> argv = {kWorker, "--connect", target};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto start = std::chrono::steady_clock::now();
    auto r = RunProcess(argv, 20);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("refusing to connect to ", target, " without TLS")));
    EXPECT_THAT(r.err, HasSubstr("--tls-dir"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5);
  }
  EXPECT_FALSE(off.Connected()) << "the worker connected to " << target;
}

// A federated client's and aggregator's upstream obeys the same rule: a non-loopback address in
// plaintext is refused before it is dialled (exit 2), whether or not a secret file is given.
TEST(WorkerTransportTest, FederatedUpstreamsInPlaintextToANonLoopbackAddressAreRefused) {
  const OffLoopbackListener off;
  ASSERT_TRUE(off.ok());
  const std::string& target = off.target;
  const std::string dir = MakeTempDir("federated-plaintext");
  WriteFile(dir + "/worker.secret", std::string(64, 'a'));
  chmod((dir + "/worker.secret").c_str(), 0600);
  WriteFile(dir + "/spec.pb", testing::SpecFromYaml(R"(name: upstream
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 1
)")
                                  .SerializeAsString());
  const std::vector<std::vector<std::string>> roles = {
      {kWorker, "--role", "client", "--spec", dir + "/spec.pb", "--region", "east", "--index", "0",
       "--experiment-id", "e1", "--connect", target, "--secret-file", dir + "/worker.secret"},
      {kWorker, "--role", "aggregator", "--region", "east", "--experiment-id", "e1", "--model-size",
       "10", "--spec", dir + "/spec.pb", "--work-dir", dir + "/agg", "--listen", "127.0.0.1:0",
       "--connect", target, "--secret-file", dir + "/worker.secret"},
      {kWorker, "--role", "aggregator", "--region", "east", "--experiment-id", "e1", "--model-size",
       "10", "--spec", dir + "/spec.pb", "--work-dir", dir + "/agg", "--listen", "127.0.0.1:0",
       "--connect", target}};
  for (const std::vector<std::string>& argv : roles) {
    const auto start = std::chrono::steady_clock::now();
    auto r = RunProcess(argv, 20);
    EXPECT_EQ(r.exit_code, 2) << argv[2] << ": " << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("refusing to connect to ", target, " without TLS")))
        << argv[2];
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5);
  }
  EXPECT_FALSE(off.Connected()) << "a federated role connected to " << target;
}

// A stand-in orchestrator, serving TLS with whatever certificate it holds: it counts the
// Register calls that reach it and refuses them (FAILED_PRECONDITION), which a worker takes as
// final (exit 2).
class PosingOrchestrator final : public v1::WorkerService::Service {
 public:
  PosingOrchestrator(const std::string& cert_pem, const std::string& key_pem) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key_pem, cert_pem});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~PosingOrchestrator() override { server_->Shutdown(); }

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse*) override {
    ++registers_;
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "served by the stand-in");
  }

  int port() const { return port_; }
  int registers() const { return registers_.load(); }

 private:
  int port_ = 0;
  std::atomic<int> registers_{0};
  std::unique_ptr<grpc::Server> server_;
};

// A worker dials 127.0.0.1 with the CA of `certs init`: only the orchestrator's certificate
// names that address, so whoever holds an aggregator's key (the one-host aggregator.pem, or a
// region's) cannot pose as the orchestrator and lease it commands. The worker gives up after
// its 30 s connect timeout without one call reaching the impostor.
TEST(CertificateNamesTest, AnAggregatorCertificateCannotPoseAsTheOrchestrator) {
  const std::string certs = MakeTempDir("posing") + "/certs";
  ASSERT_EQ(RunProcess({kSextant, "certs", "init", certs}).exit_code, 0);
  auto issued = RunProcess({kSextant, "certs", "issue", certs, "agg-east", "--role", "aggregator",
                            "--region", "east", "--enroll"});
  ASSERT_EQ(issued.exit_code, 0) << issued.err;

  // The orchestrator's own certificate: the worker's call arrives (the control).
  {
    PosingOrchestrator real(ReadFile(certs + "/orchestrator.pem"),
                            ReadFile(certs + "/orchestrator.key"));
    auto r = RunProcess(
        {kWorker, "--connect", absl::StrCat("127.0.0.1:", real.port()), "--tls-dir", certs}, 60);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("served by the stand-in"));
    EXPECT_EQ(real.registers(), 1);
  }
  // Both impostors at once, each with its own worker: the timeouts run side by side.
  const std::vector<std::string> names = {"agg-east", "aggregator"};
  std::vector<std::unique_ptr<PosingOrchestrator>> impostors;
  std::vector<std::unique_ptr<BackgroundProcess>> workers;
  for (const std::string& name : names) {
    impostors.push_back(
        std::make_unique<PosingOrchestrator>(ReadFile(absl::StrCat(certs, "/", name, ".pem")),
                                             ReadFile(absl::StrCat(certs, "/", name, ".key"))));
    workers.push_back(std::make_unique<BackgroundProcess>(std::vector<std::string>{
        kWorker, "--connect", absl::StrCat("127.0.0.1:", impostors.back()->port()), "--tls-dir",
        certs}));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(workers[i]->Wait(60), 1) << names[i] << ": " << workers[i]->err();
    EXPECT_THAT(workers[i]->err(), HasSubstr("cannot register with")) << names[i];
    EXPECT_EQ(impostors[i]->registers(), 0) << names[i];
  }
}

// What the run's own clients dial with (--server-identity): their region's aggregator is
// admitted by its certificate's identity, on loopback where it names no host; another
// region's aggregator, or the orchestrator, is not.
TEST(CertificateNamesTest, RunClientsAdmitTheirOwnRegionsAggregatorOnly) {
  const std::string certs = MakeTempDir("identity") + "/certs";
  ASSERT_EQ(RunProcess({kSextant, "certs", "init", certs}).exit_code, 0);
  for (const char* region : {"east", "west"}) {
    ASSERT_EQ(RunProcess({kSextant, "certs", "issue", certs, absl::StrCat("agg-", region), "--role",
                          "aggregator", "--region", region})
                  .exit_code,
              0);
  }
  // agg-east's identity is sextant://aggregator/east/agg-east.
  const PeerIdentity east{Role::kAggregator, "east", "agg-east"};
  auto handshake = [&](const std::string& server_cert) {
    PosingOrchestrator server(ReadFile(certs + "/" + server_cert + ".pem"),
                              ReadFile(certs + "/" + server_cert + ".key"));
    auto creds = LoadChannelCredentialsForServer(certs, "worker", east);
    EXPECT_TRUE(creds.ok()) << creds.status();
    auto stub = v1::WorkerService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()), *creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RegisterRequest req;
    v1::RegisterResponse resp;
    return stub->Register(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(handshake("agg-east"), grpc::StatusCode::FAILED_PRECONDITION);  // reached it
  EXPECT_EQ(handshake("agg-west"), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(handshake("orchestrator"), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace sextant
