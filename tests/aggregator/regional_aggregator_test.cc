// RunRegionalAggregator in-process between an upstream FederationHub on loopback and clients
// that speak its FederationService: a client that starts late still makes round 1, because the
// aggregator asks upstream for a round only once its clients are up.
#include "aggregator/regional_aggregator.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "common/clock.h"
#include "federation/round_coordinator.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tensors/tensor_file.h"
#include "worker/federated/federated_client.h"
#include "worker/federated/federated_job.h"
#include "worker/train/synthetic_data.h"

namespace sextant {
namespace {

constexpr int64_t kSize = 8;

// The upstream tier: a hub with one region "r", served on loopback.
struct Upstream {
  explicit Upstream(int64_t model_size = kSize) {
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = model_size;
    hub = std::make_unique<FederationHub>(*RoundCoordinator::Create(o, RealClockInstance()),
                                          RealClockInstance());
    service = std::make_unique<FederationServiceImpl>(hub.get(), /*chunk_floats=*/4);
    server = *StartFederationServer("127.0.0.1:0", service.get(), &port);
  }
  ~Upstream() { server->Shutdown(std::chrono::system_clock::now()); }
  std::unique_ptr<FederationHub> hub;
  std::unique_ptr<FederationServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// One client: asks for round 1 and pushes a vector of ones, weight 1.
void Client(int port, const std::string& id) {
  auto stub = v1::FederationService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto sink = [](int64_t, absl::Span<const float>) { return absl::OkStatus(); };
  for (int tries = 0; tries < 100; ++tries) {
    absl::StatusOr<RoundTask> task = PullRound(stub.get(), "exp", id, 0, 0.5, sink);
    if (!task.ok() || task->kind == RoundTask::Kind::kDone) return;
    if (task->kind != RoundTask::Kind::kTrain) continue;
    std::vector<float> ones(kSize, 1.0f);
    (void)PushUpdate(stub.get(), PushHeader{"exp", task->round, id, 1, 1, {}, 0}, ones, 4);
    return;
  }
}

// Runs round 1 with clients r/0 (at once) and r/1 (after 4 s), a 1 s round deadline and
// min_updates 1; returns the clients behind the region's update.
int64_t RoundOneClients(const std::string& dir, bool wait_for_clients, std::string* log_text) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Upstream up;
  {
    std::vector<float> model(kSize, 0.0f);
    std::ofstream(dir + "/global.f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(model.data()), kSize * sizeof(float));
  }
  std::map<std::string, RoundTask> tasks;
  tasks["r"].model_size = kSize;
  tasks["r"].participants = {"r/0", "r/1"};
  tasks["r"].deadline_seconds = 1;
  tasks["r"].min_updates = 1;
  EXPECT_TRUE(up.hub->Publish(1, dir + "/global.f32", std::move(tasks)).ok());

  RegionalAggregatorOptions o;
  o.upstream = "127.0.0.1:" + std::to_string(up.port);
  o.port_file = dir + "/port";
  o.experiment_id = "exp";
  o.region = "r";
  o.model_size = kSize;
  o.work_dir = dir + "/work";
  o.poll_seconds = 0.5;
  if (wait_for_clients) o.clients = {"r/0", "r/1"};
  o.startup_wait_seconds = 30;
  std::ostringstream log;
  o.log = &log;
  std::atomic<bool> stop{false};
  std::thread aggregator(
      [&] { EXPECT_TRUE(RunRegionalAggregator(o, RealClockInstance(), &stop).ok()); });
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::ifstream in(o.port_file);
    if (!(in >> port)) port = 0;
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(port, 0);
  std::thread early(Client, port, "r/0");
  std::thread late([port] {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    Client(port, "r/1");
  });
  if (wait_for_clients) {
    // Upstream does not hear from the region while one of its clients is still starting.
    EXPECT_EQ(up.hub->WaitForContact({"r"}, absl::Seconds(2)), (std::vector<std::string>{"r"}));
  }
  EXPECT_TRUE(up.hub->WaitReadyToClose(absl::Seconds(60)));
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> out = up.hub->Close(&senders);
  up.hub->SetDone();
  early.join();
  late.join();
  stop = true;
  aggregator.join();
  *log_text = log.str();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->count : -1;
}

TEST(RegionalAggregatorTest, RoundOneWaitsForAClientStillStarting) {
  std::string log;
  EXPECT_EQ(RoundOneClients(testing::TempDir() + "/agg-wait", true, &log), 2) << log;
  EXPECT_NE(log.find("clients_connected=2/2"), std::string::npos) << log;
}

// The control: without the list of its clients, the aggregator opens round 1 at once and its
// 1 s deadline closes it before the late client is up.
TEST(RegionalAggregatorTest, WithoutItsClientsListRoundOneClosesWithoutTheLateClient) {
  std::string log;
  EXPECT_EQ(RoundOneClients(testing::TempDir() + "/agg-nowait", false, &log), 1) << log;
}

// A region of one client, r/0, that never starts, under a fresh work folder `name`; the
// aggregator reports to up and logs to log.
RegionalAggregatorOptions NeverStartingClientOptions(const std::string& name, const Upstream& up,
                                                     double startup_wait_seconds,
                                                     std::ostringstream* log) {
  const std::string dir = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RegionalAggregatorOptions o;
  o.upstream = "127.0.0.1:" + std::to_string(up.port);
  o.experiment_id = "exp";
  o.region = "r";
  o.model_size = kSize;
  o.work_dir = dir + "/work";
  o.poll_seconds = 0.5;
  o.clients = {"r/0"};
  o.startup_wait_seconds = startup_wait_seconds;
  o.log = log;
  return o;
}

// A client that never starts holds round 1 up only for the startup wait.
TEST(RegionalAggregatorTest, AClientThatNeverStartsIsWaitedForOnlyUntilTheStartupWait) {
  Upstream up;
  std::ostringstream log;
  RegionalAggregatorOptions o = NeverStartingClientOptions("agg-never", up, 1, &log);
  std::atomic<bool> stop{false};
  std::thread aggregator(
      [&] { EXPECT_TRUE(RunRegionalAggregator(o, RealClockInstance(), &stop).ok()); });
  EXPECT_TRUE(up.hub->WaitForContact({"r"}, absl::Seconds(30)).empty());
  up.hub->SetDone();
  aggregator.join();
  EXPECT_NE(log.str().find("clients_connected=0/1"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("missing=r/0"), std::string::npos) << log.str();
}

// The startup wait runs on the aggregator's clock: an hour-long wait for a client that never
// starts ends once that clock passes the hour, after well under a second of real time.
TEST(RegionalAggregatorTest, TheStartupWaitEndsOnTheInjectedClockWithoutRealWaiting) {
  Upstream up;
  std::ostringstream log;
  RegionalAggregatorOptions o = NeverStartingClientOptions("agg-fake-clock", up, 3600, &log);
  FakeClock clock;
  std::atomic<bool> stop{false};
  std::thread aggregator([&] { EXPECT_TRUE(RunRegionalAggregator(o, &clock, &stop).ok()); });
  // Upstream hears from the region only once the startup wait is over. 20 s of real time would
  // be far too short for the hour on a real clock.
  std::vector<std::string> silent = {"r"};
  for (int i = 0; i < 200 && !silent.empty(); ++i) {
    clock.Advance(absl::Minutes(30));
    silent = up.hub->WaitForContact({"r"}, absl::Milliseconds(100));
  }
  EXPECT_TRUE(silent.empty());
  up.hub->SetDone();
  if (!silent.empty()) stop = true;
  aggregator.join();
  EXPECT_NE(log.str().find("clients_connected=0/1"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("missing=r/0"), std::string::npos) << log.str();
}

// An aggregator stopped in the middle of a round (a spot notice) tells upstream that its region
// sits the round out, so that the round above goes on without it at once instead of waiting for
// its deadline (an hour here); the round's other participant still counts.
TEST(RegionalAggregatorTest, StoppedMidRoundItsRegionSitsTheRoundOutAtOnce) {
  Upstream up;
  std::ostringstream log;
  RegionalAggregatorOptions o = NeverStartingClientOptions("agg-stop-mid-round", up, 0, &log);
  o.clients.clear();  // round 1 opens at once, waiting for r/0, which never comes
  const std::string model = testing::TempDir() + "/agg-stop-mid-round/global.f32";
  {
    std::vector<float> zeros(kSize, 0.0f);
    std::ofstream(model, std::ios::binary)
        .write(reinterpret_cast<const char*>(zeros.data()), kSize * sizeof(float));
  }
  std::map<std::string, RoundTask> tasks;
  for (const char* region : {"r", "other"}) {
    tasks[region].model_size = kSize;
    tasks[region].deadline_seconds = 3600;
    tasks[region].min_updates = 1;
  }
  tasks["r"].participants = {"r/0"};
  ASSERT_TRUE(up.hub->Publish(1, model, std::move(tasks), 3600, 1).ok());
  std::atomic<bool> stop{false};
  std::thread aggregator(
      [&] { EXPECT_TRUE(RunRegionalAggregator(o, RealClockInstance(), &stop).ok()); });
  EXPECT_TRUE(up.hub->WaitForContact({"r"}, absl::Seconds(30)).empty());
  std::this_thread::sleep_for(std::chrono::seconds(1));  // its own round is open by now
  ASSERT_TRUE(up.hub->FailedParticipants().empty()) << log.str();
  stop = true;
  aggregator.join();
  EXPECT_EQ(up.hub->FailedParticipants(), std::vector<std::string>{"r"}) << log.str();
  std::vector<FailureReport> failures = up.hub->TakeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].error.find("preempted: its aggregator was stopped"), std::string::npos)
      << failures[0].error;
  std::vector<float> ones(kSize, 1.0f);
  auto other = v1::FederationService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(up.port), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(PushUpdate(other.get(), PushHeader{"exp", 1, "other", 1, 1, {}, 0}, ones, 4).ok());
  EXPECT_TRUE(up.hub->WaitReadyToClose(absl::Seconds(5)));  // not the hour
  absl::StatusOr<RoundOutcome> out = up.hub->Close(nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 1);
  up.hub->SetDone();
}

// The port an aggregator wrote to `file`, once it is serving; 0 after 10 s without.
int WaitForPort(const std::string& file) {
  int port = 0;
  for (int i = 0; i < 200 && port == 0; ++i) {
    std::ifstream in(file);
    if (!(in >> port)) port = 0;
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return port;
}

// An aggregator stopped while the experiment goes on (its spot instance taken back after a
// notice) does not end the experiment for its clients: a client waiting on it is answered
// Unavailable, keeps asking, and takes round 1 from the replacement at the same address. Only
// the experiment's end (upstream done) tells it kDone.
TEST(RegionalAggregatorTest, StoppedWhileTheRunGoesOnItsClientsWaitForItsReplacement) {
  Upstream up;
  std::ostringstream log_a, log_b;
  RegionalAggregatorOptions a = NeverStartingClientOptions("agg-stop-a", up, 0, &log_a);
  a.clients.clear();
  a.port_file = a.work_dir + ".port";
  std::atomic<bool> stop_a{false};
  std::thread first(
      [&] { EXPECT_TRUE(RunRegionalAggregator(a, RealClockInstance(), &stop_a).ok()); });
  const int port = WaitForPort(a.port_file);
  ASSERT_NE(port, 0);
  auto stub = v1::FederationService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto sink = [](int64_t, absl::Span<const float>) { return absl::OkStatus(); };
  // No round is open upstream: the client waits on the first aggregator until it stops.
  absl::StatusOr<RoundTask> asked;
  std::thread waiting([&] { asked = PullRound(stub.get(), "exp", "r/0", 0, 20, sink); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop_a = true;
  first.join();
  waiting.join();
  ASSERT_FALSE(asked.ok()) << "kind " << static_cast<int>(asked->kind);
  EXPECT_TRUE(absl::IsUnavailable(asked.status())) << asked.status();
  EXPECT_NE(asked.status().message().find("stopping"), std::string::npos) << asked.status();

  RegionalAggregatorOptions b = NeverStartingClientOptions("agg-stop-b", up, 0, &log_b);
  b.clients.clear();
  b.listen = "127.0.0.1:" + std::to_string(port);
  std::atomic<bool> stop_b{false};
  std::thread second(
      [&] { EXPECT_TRUE(RunRegionalAggregator(b, RealClockInstance(), &stop_b).ok()); });
  const std::string model = testing::TempDir() + "/agg-stop-global.f32";
  {
    std::vector<float> zeros(kSize, 0.0f);
    std::ofstream(model, std::ios::binary)
        .write(reinterpret_cast<const char*>(zeros.data()), kSize * sizeof(float));
  }
  std::map<std::string, RoundTask> tasks;
  tasks["r"].model_size = kSize;
  tasks["r"].participants = {"r/0"};
  ASSERT_TRUE(up.hub->Publish(1, model, std::move(tasks)).ok());
  absl::StatusOr<RoundTask> task = absl::UnavailableError("not asked");
  for (int i = 0; i < 100; ++i) {
    task = PullRound(stub.get(), "exp", "r/0", 0, 0.5, sink);
    if (task.ok() && task->kind != RoundTask::Kind::kWait) break;
    if (!task.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(task.ok()) << task.status() << "\n" << log_b.str();
  EXPECT_EQ(task->kind, RoundTask::Kind::kTrain);
  EXPECT_EQ(task->round, 1);
  std::vector<float> ones(kSize, 1.0f);
  EXPECT_TRUE(PushUpdate(stub.get(), PushHeader{"exp", 1, "r/0", 1, 1, {}, 0}, ones, 4).ok());
  EXPECT_TRUE(up.hub->WaitReadyToClose(absl::Seconds(30)));
  up.hub->SetDone();
  absl::StatusOr<RoundTask> end = PullRound(stub.get(), "exp", "r/0", 1, 10, sink);
  second.join();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->kind, RoundTask::Kind::kDone);
}

// Waits (up to 10 s) until `file` names an address other than `other`; returns it ("" if none).
std::string WaitForAddress(const std::string& file, const std::string& other) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(file);
    std::string address;
    if ((in >> address) && address != other) return address;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

// A client follows its aggregator to another host. A real client (RunFederatedClient, the
// built-in trainer) trains round 1 through an aggregator on 127.0.0.1; that aggregator stops
// and its replacement serves on another address (127.0.0.2, as a new node's), which it writes
// to the region's address file. The client, finding its aggregator unreachable, reads the file
// again (RedialFromAddressFile) and round 2 gets its update through the replacement.
TEST(RegionalAggregatorTest, AClientFollowsItsAggregatorToTheAddressItsReplacementWrites) {
  FederatedJob job;
  job.model.hidden = {8};
  job.layout = BuiltinModelLayout(job.model);
  job.total_clients = 1;
  job.examples_per_client = 64;
  job.seed = 3;
  const int64_t model_size = *LayoutElements(job.layout);
  Upstream up(model_size);
  const std::string dir = testing::TempDir() + "/agg-moves";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string address_file = dir + "/r.address";
  auto aggregator_at = [&](const std::string& listen, std::ostringstream* log) {
    RegionalAggregatorOptions o;
    o.upstream = "127.0.0.1:" + std::to_string(up.port);
    o.listen = listen;
    o.address_file = address_file;
    o.experiment_id = "exp";
    o.region = "r";
    o.model_size = model_size;
    o.work_dir = dir + "/work-" + listen;
    o.poll_seconds = 0.5;
    o.log = log;
    return o;
  };
  const std::string model = dir + "/global.f32";
  {
    std::vector<float> zeros(model_size, 0.0f);
    std::ofstream(model, std::ios::binary)
        .write(reinterpret_cast<const char*>(zeros.data()), model_size * sizeof(float));
  }
  auto publish = [&](int64_t round) {
    std::map<std::string, RoundTask> tasks;
    tasks["r"].model_size = model_size;
    tasks["r"].participants = {"r/0"};
    tasks["r"].deadline_seconds = 60;
    tasks["r"].min_updates = 1;
    return up.hub->Publish(round, model, std::move(tasks));
  };

  std::ostringstream log_a, log_b, client_log;
  const RegionalAggregatorOptions a = aggregator_at("127.0.0.1:0", &log_a);
  std::atomic<bool> stop_a{false};
  std::thread first(
      [&] { EXPECT_TRUE(RunRegionalAggregator(a, RealClockInstance(), &stop_a).ok()); });
  const std::string first_address = WaitForAddress(address_file, "");
  ASSERT_EQ(first_address.rfind("127.0.0.1:", 0), 0u) << first_address << "\n" << log_a.str();

  FederatedClientOptions c;
  c.target = first_address;
  c.stub = v1::FederationService::NewStub(
      grpc::CreateChannel(first_address, grpc::InsecureChannelCredentials()));
  c.redial = RedialFromAddressFile(address_file, first_address, grpc::InsecureChannelCredentials(),
                                   /*tls=*/false, &client_log);
  c.experiment_id = "exp";
  c.region = "r";
  c.job = job;
  c.poll_seconds = 0.5;
  c.connect_timeout_seconds = 30;
  c.log = &client_log;
  train::FashionMnist data;
  data.validation = train::MakeSyntheticDataset(20, 2);
  for (int i = 0; i < 200; ++i) {  // 200 images of noise, labels in turn
    for (int k = 0; k < 28 * 28; ++k) data.train.pixels.push_back(static_cast<uint8_t>(i * 31 + k));
    data.train.y.push_back(i % 10);
  }
  std::atomic<bool> stop_client{false};
  absl::StatusOr<FederatedClientStats> stats = absl::UnknownError("not run");
  std::thread client(
      [&] { stats = RunFederatedClient(c, data, RealClockInstance(), &stop_client); });

  ASSERT_TRUE(publish(1).ok());
  ASSERT_TRUE(up.hub->WaitReadyToClose(absl::Seconds(60))) << log_a.str() << client_log.str();
  absl::StatusOr<RoundOutcome> one = up.hub->Close(nullptr);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->count, 1);

  // The first instance goes; its replacement serves on another address.
  stop_a = true;
  first.join();
  const RegionalAggregatorOptions b = aggregator_at("127.0.0.2:0", &log_b);
  std::atomic<bool> stop_b{false};
  std::thread second(
      [&] { EXPECT_TRUE(RunRegionalAggregator(b, RealClockInstance(), &stop_b).ok()); });
  const std::string second_address = WaitForAddress(address_file, first_address);
  ASSERT_EQ(second_address.rfind("127.0.0.2:", 0), 0u) << second_address << "\n" << log_b.str();

  ASSERT_TRUE(publish(2).ok());
  const bool closes = up.hub->WaitReadyToClose(absl::Seconds(60));
  absl::StatusOr<RoundOutcome> two = up.hub->Close(nullptr);
  up.hub->SetDone();
  client.join();
  second.join();
  ASSERT_TRUE(closes) << log_b.str() << client_log.str();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->count, 1) << client_log.str();
  ASSERT_TRUE(stats.ok()) << stats.status() << "\n" << client_log.str();
  EXPECT_EQ(stats->rounds, 2) << client_log.str();
  EXPECT_NE(client_log.str().find("aggregator moved: " + first_address + " -> " + second_address),
            std::string::npos)
      << client_log.str();
}

}  // namespace
}  // namespace sextant
