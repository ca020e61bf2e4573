// A 300 MB model through a real `sextant-worker --role aggregator` process: the test serves the
// global tier in process (FederationHub over FederationService on loopback) and plays three
// clients that pull the model and push full-size updates at once. The aggregator's peak RSS
// must stay below 2x the model size: it holds the streaming mean, and a model this large stages
// each update in a file and folds it from there a chunk at a time. (Measured 1.25x to 1.54x in
// five runs since the binaries give freed buffers back promptly, 1.41x to 1.73x before: the
// target is 1.5x, and the bound leaves room for a loaded machine's transient buffering.) And
// the regional aggregate it pushes upstream must be the exact weighted mean.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "common/clock.h"
#include "federation/round_coordinator.h"
#include "gtest/gtest.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {
namespace {

constexpr int64_t kModelFloats = 75'000'000;  // 300 MB of float32
constexpr int kClients = 3;

float Pattern(int64_t j) { return static_cast<float>(j % 1024) / 1024.0f; }

// Peak resident set (VmHWM) of pid in bytes, or -1.
int64_t PeakRss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream s(line.substr(6));
      int64_t kb = 0;
      s >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

TEST(FederatedAggregatorMemoryTest, ThreeHundredMegabyteModelStreamsWithRssBelowTwoModels) {
  const std::string dir = testing::TempDir() + "/fl-agg-memory";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // The round's global model, on disk as the orchestrator keeps it.
  const std::string model_file = dir + "/global-1.f32";
  {
    std::vector<float> block(1 << 20);
    std::ofstream out(model_file, std::ios::binary);
    for (int64_t off = 0; off < kModelFloats; off += block.size()) {
      const int64_t n = std::min<int64_t>(block.size(), kModelFloats - off);
      for (int64_t j = 0; j < n; ++j) block[j] = -Pattern(off + j);
      out.write(reinterpret_cast<const char*>(block.data()), n * sizeof(float));
    }
    ASSERT_TRUE(out.good());
  }
  RoundCoordinatorOptions o;
  o.experiment_id = "mem";
  o.model_size = kModelFloats;
  auto coordinator = RoundCoordinator::Create(o, RealClockInstance());
  ASSERT_TRUE(coordinator.ok());
  FederationHub hub(*std::move(coordinator), RealClockInstance());
  FederationServiceImpl service(&hub);
  int port = 0;
  auto server = StartFederationServer("127.0.0.1:0", &service, &port);
  ASSERT_TRUE(server.ok()) << server.status();

  // The experiment the aggregator takes its settings from: region r of kClients clients.
  v1::ExperimentSpec spec;
  v1::FederatedRegion* r = spec.mutable_federation()->add_regions();
  r->set_name("r");
  r->set_clients(kClients);
  std::ofstream(dir + "/spec.pb", std::ios::binary) << spec.SerializeAsString();
  const std::string port_file = dir + "/agg.port";
  pid_t agg =
      Spawn({std::string(SEXTANT_BIN_DIR) + "/sextant-worker", "--role", "aggregator", "--region",
             "r", "--connect", "127.0.0.1:" + std::to_string(port), "--experiment-id", "mem",
             "--model-size", std::to_string(kModelFloats), "--work-dir", dir + "/agg",
             "--port-file", port_file, "--spec", dir + "/spec.pb"},
            dir + "/agg.log");
  RoundTask region;
  region.model_size = kModelFloats;
  for (int i = 0; i < kClients; ++i) region.participants.push_back("r/" + std::to_string(i));
  ASSERT_TRUE(hub.Publish(1, model_file, {{"r", region}}, 0, kClients).ok());
  int agg_port = 0;
  for (int i = 0; i < 600 && agg_port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> agg_port)) agg_port = 0;
    if (agg_port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(agg_port, 0);

  const auto start = std::chrono::steady_clock::now();
  std::vector<absl::Status> pulled(kClients), pushed(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto stub = v1::FederationService::NewStub(grpc::CreateChannel(
          "127.0.0.1:" + std::to_string(agg_port), grpc::InsecureChannelCredentials()));
      const std::string id = "r/" + std::to_string(i);
      std::vector<float> update(kModelFloats);
      absl::Status model_ok;
      auto sink = [&](int64_t offset, absl::Span<const float> v) {
        for (size_t j = 0; j < v.size(); j += 4099) {
          if (v[j] != -Pattern(offset + j)) model_ok = absl::DataLossError("model value differs");
        }
        return absl::OkStatus();
      };
      absl::StatusOr<RoundTask> task = absl::UnavailableError("not yet");
      for (int tries = 0; tries < 100 && !(task.ok() && task->kind == RoundTask::Kind::kTrain);
           ++tries) {
        task = PullRound(stub.get(), "mem", id, -1, 5, sink);
        if (!task.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      pulled[i] = task.ok() ? model_ok : task.status();
      if (!pulled[i].ok()) return;
      for (int64_t j = 0; j < kModelFloats; ++j) update[j] = (i + 1) * Pattern(j);
      PushHeader header{"mem", task->round, id, static_cast<double>(i + 1), 1, {}};
      pushed[i] = PushUpdate(stub.get(), header, update).status();
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(pulled[i].ok()) << i << ": " << pulled[i];
    ASSERT_TRUE(pushed[i].ok()) << i << ": " << pushed[i];
  }
  ASSERT_TRUE(hub.WaitReadyToClose(absl::Seconds(300)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> outcome = hub.Close(&senders);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->count, kClients);
  EXPECT_DOUBLE_EQ(outcome->total_weight, 6);
  // sum_i w_i (i + 1) p / sum_i w_i with w_i = i + 1: p * 14 / 6.
  for (int64_t j = 0; j < kModelFloats; j += 9973) {
    ASSERT_NEAR(outcome->mean[j], Pattern(j) * 14.0 / 6.0, 1e-6) << j;
  }
  const int64_t peak = PeakRss(agg);
  const int64_t model_bytes = kModelFloats * static_cast<int64_t>(sizeof(float));
  std::cout << "aggregator peak RSS " << peak / 1e6 << " MB for a " << model_bytes / 1e6
            << " MB model (" << static_cast<double>(peak) / model_bytes << "x); " << kClients
            << " clients in " << seconds << " s\n";
  EXPECT_GT(peak, model_bytes);  // it did hold the mean
  EXPECT_LT(peak, 2 * model_bytes);
  hub.SetDone();
  int status = 0;
  for (int i = 0; i < 100 && waitpid(agg, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (waitpid(agg, &status, WNOHANG) == 0) {
    kill(agg, SIGKILL);
    waitpid(agg, &status, 0);
  }
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sextant
