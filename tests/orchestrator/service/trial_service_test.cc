// The TrialService over a real gRPC server on loopback: plain, and over mTLS with the
// certificates of `sextant certs init`, where an asked trial is bound to its asker.
#include "orchestrator/service/trial_service.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/service/worker_service.h"
#include "orchestrator/service/worker_sessions.h"
#include "rpc/certificates.h"
#include "rpc/channel_credentials.h"
#include "rpc/server_security.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::SpecFromYaml;

std::string Yaml(int trials, int concurrent, const std::string& sampler = "sobol") {
  return absl::StrCat(R"(
name: served
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
  n: {type: int, min: 0, max: 1000}
search: {mode: ask_tell, sampler: )",
                      sampler, ", seed: 7, max_trials: ", trials, ", max_concurrent: ", concurrent,
                      "}\n");
}

// A run's store, dispatcher and services behind a server on 127.0.0.1:0, ticked in the
// background as `sextant run` ticks them.
class ServedRun {
 public:
  // limits: the quota of waiting calls of both services.
  ServedRun(const std::string& dir, const std::string& yaml, const ServerSecurity& security,
            CallLimits limits = {}) {
    spec_ = SpecFromYaml(yaml);
    store_ = *Store::Open(dir + "/state.db", true);
    DispatcherOptions options;
    options.lease_seconds = AskTellLeaseSeconds(spec_);
    std::unique_ptr<Dispatcher> dispatcher =
        *Dispatcher::Create(spec_, store_.get(), *MakeSampler(spec_), RealClockInstance(), options,
                            MakeScheduler(spec_));
    core_ = *AskTell::Create(dispatcher.get(), store_.get(), RealClockInstance());
    run_ = std::make_unique<RunCore>(std::move(dispatcher), RealClockInstance(),
                                     RealClockInstance()->Now());
    service_ =
        std::make_unique<TrialServiceImpl>(run_.get(), core_.get(), RealClockInstance(), limits);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", MakeServerCredentials(security), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ticker_ = std::thread([this] {
      while (!stop_) {
        (void)run_->ExpireLeases();
        service_->Tick();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~ServedRun() {
    stop_ = true;
    ticker_.join();
    service_->Drain();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  void Drain() { service_->Drain(); }
  int port() const { return port_; }
  const std::string& run_id() const { return core_->run_id(); }
  bool Finished() { return run_->Finished(); }
  Store& store() { return *store_; }

 private:
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RunCore> run_;
  std::unique_ptr<AskTell> core_;
  std::unique_ptr<TrialServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

class Client {
 public:
  explicit Client(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::TrialService::NewStub(std::move(channel))) {}

  grpc::Status Ask(int count, double wait, v1::AskResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
    v1::AskRequest r;
    r.set_count(count);
    r.set_wait_seconds(wait);
    return stub_->Ask(&context, r, response);
  }
  grpc::Status Tell(const v1::AskedTrial& t, double loss, v1::TellResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::TellRequest r;
    r.set_run_id(t.run_id());
    r.set_trial_id(t.trial_id());
    r.set_attempt(t.attempt());
    r.add_values(loss);
    return stub_->Tell(&context, r, response);
  }
  grpc::Status Step(const v1::AskedTrial& t, double loss, v1::ReportStepResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportStepRequest r;
    r.set_run_id(t.run_id());
    r.set_trial_id(t.trial_id());
    r.set_attempt(t.attempt());
    (*r.mutable_metrics())["loss"] = loss;
    return stub_->ReportStep(&context, r, response);
  }

 private:
  std::unique_ptr<v1::TrialService::Stub> stub_;
};

std::shared_ptr<grpc::Channel> Plain(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

class TrialServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trial_service"); }
  std::string dir_;
};

TEST_F(TrialServiceTest, ConcurrentAskersGetDistinctTrialsUntilDone) {
  ServedRun run(dir_, Yaml(40, 4), ServerSecurity());
  std::mutex mu;
  std::map<int64_t, int> seen;  // trial id -> times handed out
  std::set<std::pair<double, int64_t>> configurations;
  std::atomic<int> failures{0};
  std::vector<std::thread> askers;
  for (int i = 0; i < 6; ++i) {
    askers.emplace_back([&] {
      Client client(Plain(run.port()));
      while (true) {
        v1::AskResponse asked;
        if (!client.Ask(1, 5, &asked).ok()) {
          ++failures;
          return;
        }
        if (asked.done()) return;
        for (const v1::AskedTrial& t : asked.trials()) {
          {
            std::lock_guard<std::mutex> lock(mu);
            ++seen[t.trial_id()];
            configurations.insert({t.params().at("x").number(), t.params().at("n").integer()});
          }
          v1::ReportStepResponse step;
          if (!client.Step(t, 1.0, &step).ok()) ++failures;
          v1::TellResponse told;
          if (!client.Tell(t, t.params().at("x").number(), &told).ok() ||
              told.state() != v1::COMPLETED) {
            ++failures;
          }
        }
      }
    });
  }
  for (std::thread& t : askers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(seen.size(), 40u);
  for (const auto& [id, times] : seen) EXPECT_EQ(times, 1) << "trial " << id;
  EXPECT_EQ(configurations.size(), 40u);
  EXPECT_TRUE(run.Finished());
}

TEST_F(TrialServiceTest, AWaitingAskGetsTheSlotATellFrees) {
  ServedRun run(dir_, Yaml(2, 1), ServerSecurity());
  Client alice(Plain(run.port())), bob(Plain(run.port()));
  v1::AskResponse first;
  ASSERT_TRUE(alice.Ask(1, 0, &first).ok());
  ASSERT_EQ(first.trials_size(), 1);
  v1::AskResponse none;
  ASSERT_TRUE(bob.Ask(1, 0, &none).ok());
  EXPECT_EQ(none.trials_size(), 0);
  EXPECT_FALSE(none.done());
  v1::AskResponse second;
  std::thread waiter([&] { ASSERT_TRUE(bob.Ask(1, 20, &second).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto told_at = std::chrono::steady_clock::now();
  v1::TellResponse told;
  ASSERT_TRUE(alice.Tell(first.trials(0), 0.5, &told).ok());
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - told_at, std::chrono::seconds(5));
  ASSERT_EQ(second.trials_size(), 1);
  EXPECT_NE(second.trials(0).trial_id(), first.trials(0).trial_id());
  ASSERT_TRUE(bob.Tell(second.trials(0), 0.4, &told).ok());
  v1::AskResponse done;
  ASSERT_TRUE(alice.Ask(1, 5, &done).ok());
  EXPECT_TRUE(done.done());
}

// Asks that wait (long-polls) take places in a call quota, as the federation service's calls
// do: beyond it an ask is refused at once, naming the bound, and a place comes back when a
// waiting ask ends.
TEST_F(TrialServiceTest, WaitingAsksBeyondTheQuotaAreRefusedAtOnce) {
  CallLimits limits;
  limits.max_calls = 2;
  ServedRun run(dir_, Yaml(10, 1), ServerSecurity{}, limits);
  Client client(Plain(run.port()));
  v1::AskResponse first;
  ASSERT_TRUE(client.Ask(1, 0, &first).ok());
  ASSERT_EQ(first.trials_size(), 1);  // the only slot is now asked
  std::atomic<int> answered{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&] {
      v1::AskResponse r;
      EXPECT_TRUE(Client(Plain(run.port())).Ask(1, 30, &r).ok());
      ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(answered.load(), 0);  // both wait, holding the quota's two places
  v1::AskResponse third;
  const auto start = std::chrono::steady_clock::now();
  grpc::Status refused = client.Ask(1, 30, &third);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("2"));
  // A tell frees the slot: one waiter gets the next trial, and its place comes back.
  v1::TellResponse told;
  ASSERT_TRUE(client.Tell(first.trials(0), 0.5, &told).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return answered.load() >= 1; }, 10));
  v1::AskResponse again;
  grpc::Status later = Client(Plain(run.port())).Ask(1, 0, &again);
  EXPECT_TRUE(later.ok()) << later.error_message();
  run.Drain();
  for (std::thread& t : waiters) t.join();
}

// WorkerService.Lease long-polls take places in the same kind of CallQuota: with room for two
// waiting calls, two workers wait for the only slot and a third is refused at once
// (RESOURCE_EXHAUSTED, naming the bound), with no trial leased to it; the waiters are answered
// when the run drains.
TEST_F(TrialServiceTest, WaitingLeasesBeyondTheQuotaAreRefusedAtOnce) {
  const v1::ExperimentSpec spec = SpecFromYaml(R"(
name: leased
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 7, max_trials: 10, max_concurrent: 1}
trial: {command: [echo, loss=1]}
)");
  std::unique_ptr<Store> store = *Store::Open(dir_ + "/state.db", true);
  RunCore run(*Dispatcher::Create(spec, store.get(), *MakeSampler(spec), RealClockInstance(),
                                  DispatcherOptions{}, nullptr),
              RealClockInstance(), RealClockInstance()->Now());
  CallLimits limits;
  limits.max_calls = 2;
  WorkerServiceImpl workers(&run, Redactor(), WorkerSessions(), RealClockInstance(), limits);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&workers);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop) {
      (void)run.ExpireLeases();
      workers.ServeWaiting();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto stub = v1::WorkerService::NewStub(Plain(port));
  // Registers a worker: its id and its session.
  auto enrol = [&](const std::string& host) {
    grpc::ClientContext context;
    v1::RegisterRequest r;
    r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    r.set_hostname(host);
    v1::RegisterResponse response;
    EXPECT_TRUE(stub->Register(&context, r, &response).ok());
    auto session = context.GetServerInitialMetadata().find(kSessionMetadataKey);
    EXPECT_NE(session, context.GetServerInitialMetadata().end());
    return std::pair{response.worker_id(),
                     std::string(session->second.data(), session->second.size())};
  };
  auto lease = [&](const std::pair<int64_t, std::string>& w, double wait,
                   v1::LeaseResponse* response) {
    grpc::ClientContext context;
    context.AddMetadata(kSessionMetadataKey, w.second);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
    v1::LeaseRequest r;
    r.set_worker_id(w.first);
    r.set_wait_seconds(wait);
    return stub->Lease(&context, r, response);
  };
  const auto busy = enrol("busy");
  v1::LeaseResponse first;
  ASSERT_TRUE(lease(busy, 0, &first).ok());
  ASSERT_TRUE(first.has_assignment());  // the only slot
  std::atomic<int> answered{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, w = enrol(absl::StrCat("waiter", i))] {
      v1::LeaseResponse r;
      EXPECT_TRUE(lease(w, 30, &r).ok());
      ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(answered.load(), 0);  // both wait, holding the quota's two places
  const auto third = enrol("third");
  v1::LeaseResponse refused_response;
  const auto start = std::chrono::steady_clock::now();
  grpc::Status refused = lease(third, 30, &refused_response);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("2"));
  EXPECT_FALSE(refused_response.has_assignment());
  EXPECT_EQ(run.trial_count(), 1);
  workers.Drain();  // the waiters hear `done`
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(answered.load(), 2);
  stop = true;
  ticker.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST_F(TrialServiceTest, AFinishedRunAnswersAsksDoneWhileItDrains) {
  ServedRun run(dir_, Yaml(1, 1), ServerSecurity());
  Client client(Plain(run.port()));
  v1::AskResponse asked;
  ASSERT_TRUE(client.Ask(1, 0, &asked).ok());
  ASSERT_EQ(asked.trials_size(), 1);
  v1::TellResponse told;
  ASSERT_TRUE(client.Tell(asked.trials(0), 0.5, &told).ok());
  ASSERT_TRUE(run.Finished());
  const auto start = std::chrono::steady_clock::now();
  std::thread drainer([&] { run.Drain(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  v1::AskResponse late;
  EXPECT_TRUE(client.Ask(1, 5, &late).ok());
  EXPECT_TRUE(late.done());
  drainer.join();
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(static_cast<int64_t>(kFinishedGraceSeconds * 1000)));
}

TEST_F(TrialServiceTest, RefusalsArriveAsTheirCodes) {
  ServedRun run(dir_, Yaml(2, 1), ServerSecurity());
  Client client(Plain(run.port()));
  v1::AskResponse asked;
  ASSERT_TRUE(client.Ask(1, 0, &asked).ok());
  v1::AskedTrial t = asked.trials(0);
  v1::TellResponse told;
  t.set_trial_id(99);
  grpc::Status unknown = client.Tell(t, 0.5, &told);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("trial 99"));
  t = asked.trials(0);
  grpc::Status nan = client.Tell(t, std::nan(""), &told);
  EXPECT_EQ(nan.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(nan.error_message(), HasSubstr("trial 1"));
  v1::AskResponse too_many;
  EXPECT_EQ(client.Ask(5000, 0, &too_many).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(client.Tell(t, 0.5, &told).ok());
  ASSERT_TRUE(client.Tell(t, 0.7, &told).ok());
  EXPECT_TRUE(told.already_told());
  EXPECT_DOUBLE_EQ(told.metrics().at("loss"), 0.5);
}

class TrialServiceTlsTest : public TrialServiceTest {
 protected:
  void SetUp() override {
    TrialServiceTest::SetUp();
    certs_ = dir_ + "/certs";
    ASSERT_TRUE(InitCertificateDirectory(certs_).ok());
    IssueOptions bob;
    bob.role = Role::kWorker;
    bob.enroll = true;
    ASSERT_TRUE(IssueIntoDirectory(certs_, "bob", bob).ok());
    IssueOptions client;
    client.role = Role::kClient;
    client.region = "eu";
    client.enroll = true;
    ASSERT_TRUE(IssueIntoDirectory(certs_, "carol", client).ok());
    auto security = LoadServerSecurity(certs_);
    ASSERT_TRUE(security.ok()) << security.status();
    security_ = *security;
  }

  std::shared_ptr<grpc::Channel> As(const std::string& name, int port) {
    auto creds = LoadChannelCredentials(certs_, name);
    EXPECT_TRUE(creds.ok()) << creds.status();
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), *creds);
  }

  std::string certs_;
  ServerSecurity security_;
};

TEST_F(TrialServiceTlsTest, AnAskedTrialIsBoundToItsAskersCertificate) {
  ServedRun run(dir_, Yaml(2, 2), security_);
  Client worker(As("worker", run.port())), bob(As("bob", run.port()));
  v1::AskResponse asked;
  grpc::Status s = worker.Ask(1, 0, &asked);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(asked.trials_size(), 1);
  v1::TellResponse told;
  grpc::Status denied = bob.Tell(asked.trials(0), 0.5, &told);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("sextant://worker/-/worker"));
  v1::ReportStepResponse step;
  EXPECT_EQ(bob.Step(asked.trials(0), 0.5, &step).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(run.store().LoadMeasurements()->size(), 0u);
  s = worker.Tell(asked.trials(0), 0.5, &told);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(told.state(), v1::COMPLETED);
}

TEST_F(TrialServiceTlsTest, OnlyWorkerAndAdminRolesMayAsk) {
  ServedRun run(dir_, Yaml(2, 2), security_);
  v1::AskResponse asked;
  EXPECT_EQ(Client(As("carol", run.port())).Ask(1, 0, &asked).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Client(As("admin", run.port())).Ask(1, 0, &asked).ok());
  EXPECT_EQ(Client(Plain(run.port())).Ask(1, 0, &asked).error_code(),
            grpc::StatusCode::UNAVAILABLE);  // no TLS: no handshake
}

}  // namespace
}  // namespace sextant
