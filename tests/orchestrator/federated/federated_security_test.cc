// TLS everywhere for federated runs and fleet workers, with real processes: a regional
// aggregator that lets each client certificate speak only as itself, forged regional
// aggregates refused by a running federated run, the non-loopback rule for aggregators, and
// fleet-launched workers that dial the orchestrator over TLS. (A whole
// federated run over mTLS is federated_tls_run_test, labelled slow.)
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "aggregator/federation_calls.h"
#include "aggregator/federation_service.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "rpc/channel_credentials.h"
#include "rpc/key_signer.h"
#include "rpc/server_security.h"
#include "sextant/v1/federation_service.grpc.pb.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

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

// Every match of pattern in text, as its groups (0: the whole match).
std::vector<std::vector<std::string>> Groups(const std::string& text, const std::string& pattern) {
  std::vector<std::vector<std::string>> all;
  const std::regex re(pattern);
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    all.emplace_back();
    for (const auto& g : *it) all.back().push_back(g.str());
  }
  return all;
}
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

class FederatedSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("fed-security");
    certs_ = dir_ + "/certs";
    auto init = RunProcess({kSextant, "certs", "init", certs_});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  // The experiment an aggregator started here takes its settings from (--spec): region east,
  // whose clients it does not list (the test's certificates name them).
  std::string EastSpec() {
    v1::ExperimentSpec spec;
    spec.mutable_federation()->add_regions()->set_name("east");
    const std::string file = dir_ + "/spec.pb";
    std::ofstream(file, std::ios::binary) << spec.SerializeAsString();
    return file;
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
  grpc::Status GetRound(const std::shared_ptr<grpc::Channel>& channel, const std::string& client) {
    auto stub = v1::FederationService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RoundRequest req;
    req.set_experiment_id("x");
    req.set_client_id(client);
    req.set_round(-1);
    auto reader = stub->GetRound(&ctx, req);
    v1::ModelChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // One PushUpdate for round 1 of `experiment` as `sender`, claiming weight and count: an
  // update of `size` huge values (4 by default).
  grpc::Status Push(const std::shared_ptr<grpc::Channel>& channel, const std::string& sender,
                    double weight, int64_t count, const std::string& experiment = "x",
                    int64_t size = 4) {
    auto stub = v1::FederationService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::UpdateReceipt receipt;
    auto writer = stub->PushUpdate(&ctx, &receipt);
    v1::ModelChunk chunk;
    chunk.set_experiment_id(experiment);
    chunk.set_round(1);
    chunk.set_client_id(sender);
    chunk.set_total_size(size);
    chunk.set_weight(weight);
    chunk.set_count(count);
    const std::vector<float> values(static_cast<size_t>(size), 1e6f);
    chunk.set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }

  // East's aggregator started by hand with certificate agg-east (issued by the test) and an
  // unreachable upstream: it serves its clients while it keeps trying. Sets target_ once it
  // listens (empty if it did not within 30 s).
  std::unique_ptr<BackgroundProcess> StartEastAggregator() {
    const std::string port_file = dir_ + "/east.port";
    auto agg = std::make_unique<BackgroundProcess>(std::vector<std::string>{
        kWorker,       "--role",      "aggregator",      "--region",   "east",
        "--connect",   "127.0.0.1:1", "--experiment-id", "x",          "--model-size",
        "4",           "--spec",      EastSpec(),        "--work-dir", dir_ + "/east",
        "--port-file", port_file,     "--tls-dir",       certs_,       "--tls-name",
        "agg-east"});
    if (WaitFor([&] { return std::filesystem::exists(port_file); }, 30)) {
      target_ =
          absl::StrCat("127.0.0.1:", std::string(absl::StripAsciiWhitespace(ReadFile(port_file))));
    }
    return agg;
  }

  std::string dir_, certs_, target_;
};

// A regional aggregator started by hand with its own per-host certificate serves only its
// region's clients, each as itself.
TEST_F(FederatedSecurityTest, AggregatorLetsEachClientSpeakOnlyAsItself) {
  const std::string other = dir_ + "/other-ca";
  ASSERT_EQ(RunProcess({kSextant, "certs", "init", other}).exit_code, 0);
  auto issue = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  // Dialled on loopback below: the one name it is given (an aggregator's names are its own).
  EXPECT_THAT(issue({"agg-east", "--role", "aggregator", "--region", "east", "--san", "127.0.0.1"}),
              HasSubstr("sextant://aggregator/east/agg-east"));
  issue({"alice", "--role", "client", "--region", "east", "--enroll"});
  issue({"bob", "--role", "client", "--region", "east", "--enroll"});
  issue({"carol", "--role", "client", "--region", "west", "--enroll"});
  issue({"stranger", "--role", "client", "--region", "east"});  // not enrolled
  std::unique_ptr<BackgroundProcess> agg = StartEastAggregator();
  ASSERT_FALSE(target_.empty()) << agg->err();
  const std::string target = target_;

  // Plaintext, and TLS without a client certificate or with one from another CA: the
  // handshake fails.
  EXPECT_EQ(GetRound(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), "east/alice")
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetRound(Tls(target, "", "", ""), "east/alice").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetRound(Tls(target, other, "worker", ""), "east/alice").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // A certificate of this CA that is not enrolled.
  EXPECT_EQ(GetRound(Tls(target, certs_, "stranger", ""), "east/stranger").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // The shared worker certificate (and its token) is not a client.
  grpc::Status worker = GetRound(Tls(target, certs_, "worker", Token(certs_, "worker")), "east/0");
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED) << worker.error_message();
  // Alice as herself gets in, without any token: her certificate is her identity.
  grpc::Status ok = GetRound(Tls(target, certs_, "alice", ""), "east/alice");
  EXPECT_TRUE(ok.ok()) << ok.error_code() << " " << ok.error_message();
  // Alice as Bob, and Carol of another region as herself.
  grpc::Status as_bob = GetRound(Tls(target, certs_, "alice", ""), "east/bob");
  EXPECT_EQ(as_bob.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(as_bob.error_message(), HasSubstr("a client sends only as itself"));
  EXPECT_EQ(GetRound(Tls(target, certs_, "carol", ""), "west/carol").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Alice pushing an update as Bob, and an oversized id: refused before anything is staged.
  grpc::Status push = Push(Tls(target, certs_, "alice", ""), "east/bob", 100, 1);
  EXPECT_EQ(push.error_code(), grpc::StatusCode::PERMISSION_DENIED) << push.error_message();
  grpc::Status huge =
      Push(Tls(target, certs_, "alice", ""), "east/" + std::string(4096, 'a'), 1, 1);
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << huge.error_message();
  EXPECT_LT(huge.error_message().size(), 200u);
  // Bob claiming to stand for five clients.
  grpc::Status many = Push(Tls(target, certs_, "bob", ""), "east/bob", 10, 5);
  EXPECT_EQ(many.error_code(), grpc::StatusCode::PERMISSION_DENIED) << many.error_message();
  // None of it harmed the aggregator: Bob as himself still gets in.
  grpc::Status bob = GetRound(Tls(target, certs_, "bob", ""), "east/bob");
  EXPECT_TRUE(bob.ok()) << bob.error_message();
}

// One certificate cannot take the aggregator's calls from the others: a client that already
// has 16 calls waiting there is refused the next at once (RESOURCE_EXHAUSTED, naming itself and
// the bound), while another client of the region is still served; the places come back once
// its calls end.
TEST_F(FederatedSecurityTest, OneClientCannotHoldMoreThanItsShareOfTheAggregatorsCalls) {
  for (const char* name : {"alice", "bob"}) {
    ASSERT_EQ(RunProcess({kSextant, "certs", "issue", certs_, name, "--role", "client", "--region",
                          "east", "--enroll"})
                  .exit_code,
              0);
  }
  ASSERT_EQ(RunProcess({kSextant, "certs", "issue", certs_, "agg-east", "--role", "aggregator",
                        "--region", "east", "--san", "127.0.0.1"})
                .exit_code,
            0);
  std::unique_ptr<BackgroundProcess> agg = StartEastAggregator();
  ASSERT_FALSE(target_.empty()) << agg->err();
  const std::string target = target_;
  auto alice = v1::FederationService::NewStub(Tls(target, certs_, "alice", ""));
  // Alice's long-polls: no round comes (upstream is unreachable), so each waits its 30 s. One
  // that a probe below beat to the last place is asked again.
  constexpr int kShare = 16;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(kShare);
  std::vector<std::thread> polls;
  std::atomic<bool> stopping{false};
  std::atomic<int> ended{0};
  std::mutex contexts_mu;
  for (int i = 0; i < kShare; ++i) {
    polls.emplace_back([&, i] {
      while (true) {
        grpc::ClientContext* ctx;
        {
          std::lock_guard<std::mutex> lock(contexts_mu);
          if (stopping) break;
          contexts[i] = std::make_unique<grpc::ClientContext>();
          ctx = contexts[i].get();
        }
        v1::RoundRequest req;
        req.set_experiment_id("x");
        req.set_client_id("east/alice");
        req.set_round(-1);
        req.set_wait_seconds(30);
        auto reader = alice->GetRound(ctx, req);
        v1::ModelChunk chunk;
        while (reader->Read(&chunk)) {
        }
        if (reader->Finish().error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      ++ended;
    });
  }
  // Once all of hers wait, one more (even one that would not wait) is refused at once.
  grpc::Status more;
  EXPECT_TRUE(WaitFor(
      [&] {
        more = GetRound(Tls(target, certs_, "alice", ""), "east/alice");
        return more.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      },
      20))
      << more.error_code() << " " << more.error_message();
  EXPECT_THAT(more.error_message(), HasSubstr("sextant://client/east/alice"));
  EXPECT_THAT(more.error_message(), HasSubstr("at most 16 per identity"));
  EXPECT_EQ(ended.load(), 0);
  // Bob is served as before.
  grpc::Status bob = GetRound(Tls(target, certs_, "bob", ""), "east/bob");
  EXPECT_TRUE(bob.ok()) << bob.error_message();
  // Alice gives up her calls: her places come back.
  {
    std::lock_guard<std::mutex> lock(contexts_mu);
    stopping = true;
    for (auto& ctx : contexts) ctx->TryCancel();
  }
  for (std::thread& t : polls) t.join();
  grpc::Status again;
  EXPECT_TRUE(WaitFor(
      [&] {
        again = GetRound(Tls(target, certs_, "alice", ""), "east/alice");
        return again.ok();
      },
      10))
      << again.error_message();
}

// Participants started by hand: the orchestrator gives a plan only to an aggregator of one of
// its regions, and that aggregator only to client certificates of its own region, each with a
// place and the experiment as the orchestrator signed it.
TEST_F(FederatedSecurityTest, PlansGoOnlyToTheCallersOwnTierAndRegion) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"agg-east", "--role", "aggregator", "--region", "east", "--san",
                                 "127.0.0.1"},
        {"alice", "--role", "client", "--region", "east"},
        {"carol", "--role", "client", "--region", "west"}}) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--enroll");
    auto r = RunProcess(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  WriteFile(dir_ + "/exp.yaml", R"(name: by-hand
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "8"}}
  env: {API_TOKEN: secret}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 1
  secure_aggregation: false
)");
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run",
                         "--tls-dir", certs_, "--external-participants"});
  ASSERT_TRUE(run.WaitForOutput("started by hand", 60)) << run.out() << run.err();
  std::smatch m;
  const std::string out = run.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("THIS_HOST:(\\d+)"))) << out;
  const std::string orchestrator = absl::StrCat("127.0.0.1:", m[1].str());
  auto join = [&](const std::string& target, const std::string& name) {
    auto stub = v1::FederationService::NewStub(Tls(target, certs_, name, ""));
    return JoinUpstream(stub.get(), "", 10);
  };
  // Only a region's aggregator reports its clients' joins, for places of its own region, on
  // pools of the run (this one has none).
  ASSERT_TRUE(std::regex_search(out, m, std::regex("--experiment-id (\\S+)"))) << out;
  const std::string run_id = m[1].str();
  auto report = [&](const std::string& name, const std::string& client, const std::string& pool) {
    auto stub = v1::FederationService::NewStub(Tls(orchestrator, certs_, name, ""));
    return ReportJoin(stub.get(), run_id, client, pool);
  };
  EXPECT_TRUE(absl::IsPermissionDenied(report("alice", "east/0", "p")));
  EXPECT_TRUE(absl::IsPermissionDenied(report("agg-east", "west/0", "p")));
  EXPECT_TRUE(absl::IsPermissionDenied(report("agg-east", "east/2", "p")));
  const absl::Status no_pool = report("agg-east", "east/1", "p");
  EXPECT_TRUE(absl::IsInvalidArgument(no_pool)) << no_pool;
  EXPECT_THAT(std::string(no_pool.message()),
              HasSubstr("no pool p in the run's resources.pools (it has none"));
  EXPECT_TRUE(absl::IsInvalidArgument(report("agg-east", "east/1", "../x")));
  // A client certificate asking the orchestrator: no aggregator's plan.
  absl::StatusOr<v1::JoinPlan> as_client = join(orchestrator, "alice");
  EXPECT_TRUE(absl::IsPermissionDenied(as_client.status())) << as_client.status();
  EXPECT_THAT(std::string(as_client.status().message()),
              HasSubstr("sextant://client/east/alice may not join here"));

  const std::string port_file = dir_ + "/east.port";
  BackgroundProcess agg({kWorker, "--role", "aggregator", "--join", "--connect", orchestrator,
                         "--tls-dir", certs_, "--tls-name", "agg-east", "--work-dir",
                         dir_ + "/east", "--port-file", port_file});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(port_file); }, 30))
      << agg.out() << agg.err();
  const std::string east =
      absl::StrCat("127.0.0.1:", std::string(absl::StripAsciiWhitespace(ReadFile(port_file))));
  // Another region's client, and an aggregator certificate, asking east's aggregator.
  absl::StatusOr<v1::JoinPlan> west = join(east, "carol");
  EXPECT_TRUE(absl::IsPermissionDenied(west.status())) << west.status();
  EXPECT_THAT(std::string(west.status().message()), HasSubstr("sextant://client/west/carol"));
  EXPECT_TRUE(absl::IsPermissionDenied(join(east, "agg-east").status()));
  // Alice gets the first place, her own name and the signed experiment, without its secrets.
  absl::StatusOr<v1::JoinPlan> plan = join(east, "alice");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<std::string> flags(plan->flags().begin(), plan->flags().end());
  EXPECT_THAT(flags, ::testing::IsSupersetOf({"--index", "0", "--name", "alice"}));
  std::string id;
  for (size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == "--experiment-id") id = flags[i + 1];
  }
  EXPECT_TRUE(VerifyOrchestratorSignature(ReadFile(certs_ + "/ca.pem"),
                                          {plan->spec_certificate(), plan->spec_signature()},
                                          ExperimentBinding(id, plan->spec(), plan->expires_at()))
                  .ok());
  // The plan expires (30 days on), and its expiry is signed: a later one does not verify.
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  EXPECT_GT(plan->expires_at(), now + 29 * 86400);
  EXPECT_LT(plan->expires_at(), now + 31 * 86400);
  EXPECT_FALSE(VerifyOrchestratorSignature(
                   ReadFile(certs_ + "/ca.pem"), {plan->spec_certificate(), plan->spec_signature()},
                   ExperimentBinding(id, plan->spec(), plan->expires_at() + 86400))
                   .ok());
  v1::ExperimentSpec spec;
  ASSERT_TRUE(spec.ParseFromString(plan->spec()));
  EXPECT_EQ(spec.federation().regions_size(), 2);
  EXPECT_TRUE(spec.trial().env().empty());
  EXPECT_TRUE(spec.source_path().empty());
  // A search has no participants to start by hand.
  WriteFile(dir_ + "/search.yaml", R"(name: not-federated
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {max_trials: 1}
trial: {command: [sh, -c, "echo loss=1"]}
)");
  auto search = RunProcess({kSextant, "run", dir_ + "/search.yaml", "--run-dir", dir_ + "/search",
                            "--tls-dir", certs_, "--external-participants"});
  EXPECT_NE(search.exit_code, 0);
  EXPECT_THAT(search.err, HasSubstr("--external-participants applies to a federated run"));
  // Joining again keeps her place.
  absl::StatusOr<v1::JoinPlan> again = join(east, "alice");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::vector<std::string>(again->flags().begin(), again->flags().end()), flags);
}

// A malicious aggregator (a real mTLS server with east's aggregator certificate) hands a
// client started by hand plans signed by the orchestrator for another run, or for this run but
// expired: the client refuses each before it trains or sends anything, and a client not told
// its run's id refuses to start at all.
TEST_F(FederatedSecurityTest, AClientStartedByHandRunsOnlyItsOwnRunsCurrentPlan) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"agg-east", "--role", "aggregator", "--region", "east", "--san",
                                 "localhost"},
        std::vector<std::string>{"alice", "--role", "client", "--region", "east", "--enroll"}}) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    ASSERT_EQ(RunProcess(argv).exit_code, 0);
  }
  // What the orchestrator of some run signed: an experiment without secure aggregation.
  v1::ExperimentSpec old_spec;
  old_spec.set_name("old");
  old_spec.mutable_federation()->set_secure_aggregation(false);
  const std::string bytes = old_spec.SerializeAsString();
  const int64_t later = absl::ToUnixSeconds(absl::Now() + absl::Hours(24));
  const int64_t past = absl::ToUnixSeconds(absl::Now() - absl::Hours(1));
  struct Case {
    std::string signed_for;  // the run id the orchestrator signed
    int64_t expires_at;
    std::string refusal;
  };
  for (const Case& c :
       {Case{"old-run-1", later, "PERMISSION_DENIED"}, Case{"current-run-2", past, "expired at"}}) {
    absl::StatusOr<KeyAttestation> signature =
        SignAsOrchestrator(certs_, ExperimentBinding(c.signed_for, bytes, c.expires_at));
    ASSERT_TRUE(signature.ok()) << signature.status();
    v1::JoinPlan replayed;
    for (const char* f : {"--region", "east", "--index", "0", "--name", "alice", "--experiment-id",
                          "current-run-2"}) {
      replayed.add_flags(f);
    }
    replayed.set_spec(bytes);
    replayed.set_spec_signature(signature->signature);
    replayed.set_spec_certificate(signature->certificate_pem);
    replayed.set_expires_at(c.expires_at);
    RoundCoordinatorOptions o;
    o.experiment_id = "current-run-2";
    o.model_size = 4;
    FederationHub hub(*RoundCoordinator::Create(o, RealClockInstance()), RealClockInstance());
    FederationServiceImpl service(&hub);
    service.SetJoinHandler([&](const PeerIdentity&, const std::string&) { return replayed; });
    auto security = LoadServerSecurity(certs_, "agg-east");
    ASSERT_TRUE(security.ok()) << security.status();
    int port = 0;
    auto server =
        StartFederationServer("127.0.0.1:0", &service, &port, MakeServerCredentials(*security));
    ASSERT_TRUE(server.ok()) << server.status();
    auto client = RunProcess(
        {kWorker, "--role", "client", "--join", "--connect", absl::StrCat("localhost:", port),
         "--tls-dir", certs_, "--tls-name", "alice", "--experiment-id", "current-run-2"},
        60);
    EXPECT_EQ(client.exit_code, 1) << client.out << client.err;
    EXPECT_THAT(client.err, HasSubstr(c.refusal));
    EXPECT_EQ(hub.Progress().delivered, 0);  // it sent nothing
    (*server)->Shutdown(std::chrono::system_clock::now());
  }
  auto untold = RunProcess({kWorker, "--role", "client", "--join", "--connect", "localhost:1",
                            "--tls-dir", certs_, "--tls-name", "alice"},
                           30);
  EXPECT_EQ(untold.exit_code, 2);
  EXPECT_THAT(untold.err, HasSubstr("needs --experiment-id ID"));
}

// A whole federated run over mTLS: every participant the run starts has its own certificate,
// and forged regional aggregates pushed to the orchestrator meanwhile are refused with their
// codes while the run completes as if they had not been sent.
TEST_F(FederatedSecurityTest, ForgedRegionalAggregatesAreRefusedAndTheRunCompletes) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"east-client", "--role", "client", "--region", "east", "--enroll"},
        std::vector<std::string>{"west-agg", "--role", "aggregator", "--region", "west",
                                 "--enroll"}}) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    ASSERT_EQ(RunProcess(argv).exit_code, 0);
  }
  WriteFile(dir_ + "/fed.yaml", R"(name: fl-forged
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 3
  min_clients: 4
  round_deadline: 60s
  examples_per_client: 200
  validation_examples: 200
)");
  const std::string listen = absl::StrCat("127.0.0.1:", testing::FreePort());
  BackgroundProcess run({kSextant, "run", dir_ + "/fed.yaml", "--run-dir", dir_ + "/run",
                         "--tls-dir", certs_, "--listen", listen});
  ASSERT_TRUE(run.WaitForOutput("federated run", 60)) << run.err();
  // The forgeries are well formed for round 1: this run's experiment id and model size.
  const std::string global = dir_ + "/run/federation/global-1.f32";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(global); }, 60));
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(global) / sizeof(float));
  auto store = Store::Open(RunDir::DbPath(dir_ + "/run"), false, true);
  ASSERT_TRUE(store.ok()) << store.status();
  auto id = (*store)->GetMeta("federation_id");
  ASSERT_TRUE(id.ok() && id->has_value());
  const std::string experiment = **id;
  // A client's certificate and another region's aggregator pushing east's aggregate, the
  // worker certificate, and an aggregate that claims more clients than the region has.
  grpc::Status client =
      Push(Tls(listen, certs_, "east-client", ""), "east", 400, 2, experiment, size);
  EXPECT_EQ(client.error_code(), grpc::StatusCode::PERMISSION_DENIED) << client.error_message();
  grpc::Status west = Push(Tls(listen, certs_, "west-agg", ""), "east", 400, 2, experiment, size);
  EXPECT_EQ(west.error_code(), grpc::StatusCode::PERMISSION_DENIED) << west.error_message();
  grpc::Status worker = Push(Tls(listen, certs_, "worker", Token(certs_, "worker")), "east", 400, 2,
                             experiment, size);
  EXPECT_EQ(worker.error_code(), grpc::StatusCode::PERMISSION_DENIED) << worker.error_message();
  grpc::Status inflated =
      Push(Tls(listen, certs_, "west-agg", ""), "west", 400, 50, experiment, size);
  EXPECT_EQ(inflated.error_code(), grpc::StatusCode::PERMISSION_DENIED) << inflated.error_message();
  EXPECT_THAT(inflated.error_message(), HasSubstr("it has 2"));
  ASSERT_EQ(run.Wait(300), 0) << run.out() << run.err();
  // Every round closed with the four real clients, and nothing forged was counted.
  for (const char* round : {"round=1 ", "round=2 ", "round=3 "}) {
    const size_t at = run.out().find(std::string("sextant: ") + round);
    ASSERT_NE(at, std::string::npos) << run.out();
    const std::string line = run.out().substr(at, run.out().find('\n', at) - at);
    EXPECT_THAT(line, HasSubstr("clients=4")) << line;
  }
  // The model moved by the real updates only: its loss fell below chance's ln(10) = 2.30 (a
  // forged aggregate of 1e6 values sends it to about 1e10).
  const size_t at = run.out().find("val_loss=");
  ASSERT_NE(at, std::string::npos) << run.out();
  EXPECT_LT(std::stod(run.out().substr(at + 9)), 2.30) << run.out();
  // Each participant dialled with its own certificate.
  for (const char* file : {"tls/east/aggregator/aggregator.pem", "tls/west/client-1/1.pem"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/run/federation/" + file)) << file;
  }
}

TEST_F(FederatedSecurityTest, AggregatorRefusesANonLoopbackAddressWithoutTls) {
  auto r = RunProcess({kWorker, "--role", "aggregator", "--region", "east", "--connect",
                       "127.0.0.1:1", "--experiment-id", "x", "--model-size", "4", "--spec",
                       EastSpec(), "--work-dir", dir_ + "/east", "--listen", "0.0.0.0:0"},
                      30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("refusing to listen on 0.0.0.0:0"));
  auto bad = RunProcess({kWorker, "--role", "aggregator", "--region", "east", "--connect",
                         "127.0.0.1:1", "--experiment-id", "x", "--model-size", "4", "--spec",
                         EastSpec(), "--work-dir", dir_ + "/east", "--tls-dir", dir_ + "/nowhere"},
                        30);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--tls-dir"));
}

// The aggregators a run starts admit the certificates the orchestrator admits (its enrolment
// list) and the clients the run issued: a certificate of the CA that was never enrolled is
// refused there as at the orchestrator, so taking a site out of enrolled.txt revokes it at
// every tier.
TEST_F(FederatedSecurityTest, RunStartedAggregatorsCheckEnrolmentAsTheOrchestratorDoes) {
  auto issue = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  issue({"stranger", "--role", "client", "--region", "east"});  // of the CA, not enrolled
  issue({"site", "--role", "client", "--region", "east", "--enroll"});
  WriteFile(dir_ + "/exp.yaml", R"(name: enrolment
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "8"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 400
  min_clients: 2
  examples_per_client: 100
  validation_examples: 100
)");
  BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--tls-dir", certs_});
  ASSERT_TRUE(run.WaitForOutput("round=1 ", 120)) << run.out() << run.err();
  const std::string target = std::string(
      absl::StripAsciiWhitespace(Read(dir_ + "/run/federation/regions", "east.address")));
  // Dialled as the run's own clients dial it: the server checked by its identity.
  auto as = [&](const std::string& name) {
    auto creds = LoadChannelCredentialsForServer(
        certs_, name, PeerIdentity{Role::kAggregator, "east", "aggregator"});
    EXPECT_TRUE(creds.ok()) << creds.status();
    return grpc::CreateChannel(target, *creds);
  };
  grpc::Status stranger = GetRound(as("stranger"), "east/stranger");
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::UNAUTHENTICATED) << stranger.error_message();
  EXPECT_THAT(stranger.error_message(), HasSubstr("not enrolled"));
  // An enrolled certificate passes the enrolment check (it is not one of the run's clients,
  // so the round is not its to take: refused later, by identity, not as unenrolled).
  grpc::Status site = GetRound(as("site"), "east/site");
  EXPECT_NE(site.error_code(), grpc::StatusCode::UNAUTHENTICATED) << site.error_message();
  EXPECT_NE(site.error_code(), grpc::StatusCode::UNAVAILABLE) << site.error_message();
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(60), 130) << run.out() << run.err();
}

// An active attacker running east's aggregator: tampering-aggregator is sextant-worker's
// aggregator with one change, an interceptor that swaps one peer's masking key in each key
// directory it relays. Real clients started by hand over mTLS check every key against its
// owner's signature before they use it: each refuses its directory naming the peer whose key
// was swapped, none submits anything past its own public keys (no key shares, no masked input,
// nothing to unmask), the round aborts, and the run ends FAILED saying why.
TEST_F(FederatedSecurityTest, AnAggregatorThatSwapsASecAggKeyLearnsNothing) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::vector<std::string> sites = {"alice", "bob", "carol"};
  std::vector<std::vector<std::string>> certs = {
      {"agg-east", "--role", "aggregator", "--region", "east", "--san", "127.0.0.1"}};
  for (const std::string& site : sites)
    certs.push_back({site, "--role", "client", "--region", "east"});
  for (const std::vector<std::string>& args : certs) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--enroll");
    auto r = RunProcess(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  WriteFile(dir_ + "/exp.yaml", R"(name: swapped-key
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "8"}}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 1
  min_clients: 2
  round_deadline: 600s
  examples_per_client: 100
  validation_examples: 100
)");
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run",
                         "--tls-dir", certs_, "--external-participants"});
  ASSERT_TRUE(run.WaitForOutput("--experiment-id ", 60)) << run.out() << run.err();
  std::smatch m;
  const std::string announced = run.out();
  ASSERT_TRUE(std::regex_search(announced, m, std::regex("THIS_HOST:(\\d+)"))) << announced;
  const std::string orchestrator = absl::StrCat("127.0.0.1:", m[1].str());
  ASSERT_TRUE(std::regex_search(announced, m, std::regex("--experiment-id (\\S+)"))) << announced;
  const std::string id = m[1].str();

  const std::string port_file = dir_ + "/east.port";
  BackgroundProcess agg({TAMPERING_AGGREGATOR, "--role", "aggregator", "--join", "--connect",
                         orchestrator, "--tls-dir", certs_, "--tls-name", "agg-east", "--work-dir",
                         dir_ + "/east", "--port-file", port_file});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(port_file); }, 30))
      << agg.out() << agg.err();
  const std::string east =
      absl::StrCat("127.0.0.1:", std::string(absl::StripAsciiWhitespace(ReadFile(port_file))));
  std::vector<std::unique_ptr<BackgroundProcess>> clients;
  for (const std::string& site : sites) {
    clients.push_back(std::make_unique<BackgroundProcess>(std::vector<std::string>{
        kWorker, "--role", "client", "--join", "--connect", east, "--tls-dir", certs_, "--tls-name",
        site, "--threads", "1", "--experiment-id", id}));
  }
  const int rc = run.Wait(240);
  const std::string out = run.out() + run.err();
  agg.Signal(SIGTERM);
  agg.Wait(30);
  std::string client_logs;
  for (auto& c : clients) {
    c->Signal(SIGTERM);
    c->Wait(30);
    client_logs += c->out() + c->err();
  }
  // The attack happened: every client was handed a directory with a swapped key.
  const std::string seen = agg.out();
  std::set<std::string> tampered;
  for (const auto& g : Groups(seen, "tampered client=(\\S+) peer=(\\S+)")) tampered.insert(g[1]);
  EXPECT_EQ(tampered, (std::set<std::string>{"east/alice", "east/bob", "east/carol"})) << seen;
  // Each client refused it, naming the peer whose key was not that peer's, and said so: the
  // run's console names each refusal, by the client's place and its own name.
  const std::string refusal =
      "PERMISSION_DENIED: secagg: the keys relayed for '(east/[a-z]+)' "
      "are not its own";
  EXPECT_EQ(Groups(client_logs, refusal).size(), 3u) << client_logs;
  std::set<std::string> said;
  for (const auto& g : Groups(out,
                              "client east/[0-2] failed: \\((east/[a-z]+)\\) secagg: the "
                              "keys relayed for 'east/[a-z]+' are not its own")) {
    said.insert(g[1]);
  }
  EXPECT_EQ(said, tampered) << out;
  // Nothing past the clients' own public keys reached the aggregator.
  int keys = 0;
  for (const auto& g : Groups(seen, "submit client=(\\S+) stage=(\\d+)")) {
    EXPECT_EQ(g[2], "0") << g[0] << " after the swapped key";
    ++keys;
  }
  EXPECT_EQ(keys, 3) << seen;
  // The round aborted at once (not at its 600 s deadline), and the run ends FAILED, saying why.
  EXPECT_EQ(rc, 1) << out;
  EXPECT_THAT(out, HasSubstr("secagg round 1 aborted")) << out;
  EXPECT_THAT(out, HasSubstr("the federated run failed")) << out << client_logs << seen;
}

// Each region on its own provider: east's aggregator and clients are launched here (its pool
// is local), west's are started by hand (its pools are static) and join with their own
// certificates. The run launches only east's, tells how to start west's, bills every
// participant on its pool and completes every round. Without --tls-dir it says why it cannot
// take hand-started participants, before it starts anything.
TEST_F(FederatedSecurityTest, ARegionStartedByHandJoinsARunThatLaunchesTheOther) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"agg-west", "--role", "aggregator", "--region", "west", "--san",
                                 "127.0.0.1"},
        {"alice", "--role", "client", "--region", "west"},
        {"bob", "--role", "client", "--region", "west"}}) {
    std::vector<std::string> argv = {kSextant, "certs", "issue", certs_};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--enroll");
    auto r = RunProcess(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  WriteFile(dir_ + "/catalog.yaml", R"(regions: [east, west]
instances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 2}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: east, instance: box, market: on_demand, price_per_second: 0.001}
  - {region: west, instance: box, market: on_demand, price_per_second: 0.001}
transfer: {between_regions_per_gb: 0.02}
)");
  WriteFile(dir_ + "/exp.yaml", R"(name: mixed-providers
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "8"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 2
  secure_aggregation: false
  examples_per_client: 200
  validation_examples: 200
resources:
  catalog: catalog.yaml
  pools:
    - {name: east-all, region: east, instance: box}
    - {name: west-agg, region: west, instance: box, hosts: aggregator, provider: static}
    - {name: west-sites, region: west, instance: box, hosts: clients, provider: static}
)");
  auto plain = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/plain"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.err, HasSubstr("the participants of region west are started by hand (its "
                                   "pools are static) and join with certificates: run with "
                                   "--tls-dir DIR"));

  BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--tls-dir", certs_});
  ASSERT_TRUE(run.WaitForOutput("--experiment-id ", 90)) << run.out() << run.err();
  std::smatch m;
  const std::string announced = run.out();
  ASSERT_TRUE(std::regex_search(announced, m, std::regex("THIS_HOST:(\\d+)"))) << announced;
  const std::string orchestrator = absl::StrCat("127.0.0.1:", m[1].str());
  ASSERT_TRUE(std::regex_search(announced, m, std::regex("--experiment-id (\\S+)"))) << announced;
  const std::string id = m[1].str();
  // Only west is to be started by hand, each participant naming its pool.
  EXPECT_THAT(announced, HasSubstr("region west: sextant-worker --role aggregator --join"));
  EXPECT_THAT(announced, HasSubstr("--pool west-agg"));
  EXPECT_THAT(announced, HasSubstr("--pool west-sites"));
  EXPECT_THAT(announced, Not(HasSubstr("region east:")));

  const std::string port_file = dir_ + "/west.port";
  BackgroundProcess agg({kWorker, "--role", "aggregator", "--join", "--connect", orchestrator,
                         "--tls-dir", certs_, "--tls-name", "agg-west", "--pool", "west-agg",
                         "--work-dir", dir_ + "/west", "--port-file", port_file});
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(port_file); }, 60))
      << agg.out() << agg.err();
  const std::string west =
      absl::StrCat("127.0.0.1:", std::string(absl::StripAsciiWhitespace(ReadFile(port_file))));
  std::vector<std::unique_ptr<BackgroundProcess>> clients;
  for (const std::string site : {"alice", "bob"}) {
    clients.push_back(std::make_unique<BackgroundProcess>(std::vector<std::string>{
        kWorker, "--role", "client", "--join", "--connect", west, "--tls-dir", certs_, "--tls-name",
        site, "--pool", "west-sites", "--threads", "1", "--experiment-id", id}));
  }
  const int rc = run.Wait(300);
  EXPECT_EQ(agg.Wait(rc == 0 ? 60 : 1), 0) << agg.out() << agg.err();
  for (auto& c : clients) EXPECT_EQ(c->Wait(rc == 0 ? 60 : 1), 0) << c->out() << c->err();
  ASSERT_EQ(rc, 0) << run.out() << run.err();

  auto results = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  const nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["federation"]["rounds_completed"], 2) << j["federation"].dump();
  for (const char* pool : {"east-all", "west-agg", "west-sites"}) {
    EXPECT_GT(j["cost"]["by_pool"].value(pool, 0.0), 0) << pool << " " << j["cost"].dump();
  }
  // East's three were launched here as processes, west's three joined on their pools.
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  EXPECT_EQ(Groups(events.out, "(aggregator|client) east(/\\d)? pid=\\d+ pool=east-all").size(), 3u)
      << events.out;
  EXPECT_EQ(Groups(events.out, "federation_launch[^\\n]*west").size(), 0u) << events.out;
  EXPECT_EQ(Groups(events.out, "(aggregator west|client west/\\d) joined on pool west-").size(), 3u)
      << events.out;
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
