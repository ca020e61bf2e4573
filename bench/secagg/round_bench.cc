// Round time of secure vs plaintext aggregation through the real transport (bench/secagg/
// round.sh): one region's aggregator (FederationService on loopback) and n clients as threads of
// this process, each with a d-float update and weight 600.
//  - plaintext: every client streams its update with PushUpdate; the aggregator folds them
//    (FederationHub / RoundCoordinator) and closes the round with the weighted mean;
//  - secure: every client runs RunSecAggParticipant (SecAgg+ stages, SecureQuantizer at 16 bits,
//    masked input streamed in chunks); the aggregator runs SecAggHub to the unmasked sum and
//    decodes the weighted mean.
// The two paths alternate within one process, `reps` times each. The clock starts when the
// clients hold their trained update and stops when the aggregator holds the round's mean: the
// download of the global model and local training are the same in both paths and left out.
// Prints one key=value line per round:
//   path=plain|secure rep=R wall_s=.. cpu_s=.. (process CPU) client_cpu_s=.. (all client
//   threads) max_client_cpu_s=.. bytes_per_client=.. max_abs_err=..
//   secagg_round_bench --n 100 --d 1000000 --reps 3 [--dropout-rate 0.1]
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/secagg_participant.h"
#include "common/clock.h"
#include "federation/secure_quantizer.h"

namespace sextant {
namespace {

double Now(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void Die(const absl::Status& s, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

struct Result {
  double wall = 0, cpu = 0, client_cpu = 0, max_client_cpu = 0, max_abs_err = 0;
  int64_t bytes = 0;
};

std::string Id(int i) { return "r/" + std::to_string(i); }

struct Bench {
  int n = 100;
  size_t d = 1000000;
  double dropout_rate = 0.1;
  std::vector<float> update;  // every client's update (the work does not depend on the values)
  std::string model_file;

  // Runs the n clients, one thread each; `body(i)` returns the bytes client i sent.
  void Clients(const std::function<absl::StatusOr<int64_t>(int)>& body, Result* r) {
    std::vector<std::thread> threads;
    std::vector<double> cpu(n);
    std::vector<int64_t> bytes(n);
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        const double start = Now(CLOCK_THREAD_CPUTIME_ID);
        absl::StatusOr<int64_t> sent = body(i);
        if (!sent.ok()) Die(sent.status(), "client");
        bytes[i] = *sent;
        cpu[i] = Now(CLOCK_THREAD_CPUTIME_ID) - start;
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < n; ++i) {
      r->client_cpu += cpu[i];
      r->max_client_cpu = std::max(r->max_client_cpu, cpu[i]);
      r->bytes = std::max(r->bytes, bytes[i]);
    }
  }

  Result Plain(int64_t round) {
    RoundCoordinatorOptions o;
    o.experiment_id = "bench";
    o.model_size = d;
    absl::StatusOr<RoundCoordinator> coordinator = RoundCoordinator::Create(o, RealClockInstance());
    if (!coordinator.ok()) Die(coordinator.status(), "coordinator");
    FederationHub hub(*std::move(coordinator), RealClockInstance());
    FederationServiceImpl service(&hub);
    int port = 0;
    auto server = StartFederationServer("127.0.0.1:0", &service, &port);
    if (!server.ok()) Die(server.status(), "server");
    auto stub = v1::FederationService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    std::map<std::string, RoundTask> tasks;
    for (int i = 0; i < n; ++i) tasks[Id(i)].model_size = static_cast<int64_t>(d);
    if (absl::Status s = hub.Publish(round, model_file, std::move(tasks)); !s.ok())
      Die(s, "publish");
    Result r;
    const double wall0 = Now(CLOCK_MONOTONIC), cpu0 = Now(CLOCK_PROCESS_CPUTIME_ID);
    std::thread aggregator([&] {
      while (!hub.WaitReadyToClose(absl::Seconds(1))) {
      }
    });
    Clients(
        [&](int i) {
          PushHeader h{"bench", round, Id(i), 600, 1, {}};
          return PushUpdate(stub.get(), h, update);
        },
        &r);
    aggregator.join();
    absl::StatusOr<RoundOutcome> out = hub.Close(nullptr);
    if (!out.ok()) Die(out.status(), "close");
    r.wall = Now(CLOCK_MONOTONIC) - wall0;
    r.cpu = Now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    for (size_t j = 0; j < d; ++j) {
      r.max_abs_err = std::max<double>(r.max_abs_err, std::fabs(out->mean[j] - update[j]));
    }
    (*server)->Shutdown(std::chrono::system_clock::now());
    return r;
  }

  Result Secure(int64_t round) {
    RoundCoordinatorOptions co;
    co.experiment_id = "bench";
    co.model_size = d;
    FederationHub hub(*RoundCoordinator::Create(co, RealClockInstance()), RealClockInstance());
    SecAggHubOptions so;
    so.experiment_id = "bench";
    so.stage_timeout_seconds = 3600;
    so.dropout_rate = dropout_rate;
    so.quantization = {1.0, 16, 600};
    SecAggHub secagg(so, RealClockInstance());
    FederationServiceImpl service(&hub, kDefaultChunkFloats, &secagg);
    int port = 0;
    auto server = StartFederationServer("127.0.0.1:0", &service, &port);
    if (!server.ok()) Die(server.status(), "server");
    auto stub = v1::FederationService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) ids.push_back(Id(i));
    Result r;
    const double wall0 = Now(CLOCK_MONOTONIC), cpu0 = Now(CLOCK_PROCESS_CPUTIME_ID);
    if (absl::Status s = secagg.Open(round, ids, d, 7 + round, 0, 1); !s.ok()) Die(s, "open");
    std::thread aggregator([&] {
      while (!secagg.WaitAndAdvance(absl::Seconds(1))) {
      }
    });
    Clients(
        [&](int i) {
          SecAggParticipantOptions o;
          o.experiment_id = "bench";
          o.client_id = Id(i);
          o.round = round;
          o.poll_seconds = 5;
          return RunSecAggParticipant(stub.get(), o, RealClockInstance(), update, 600, {});
        },
        &r);
    aggregator.join();
    absl::StatusOr<SecAggRoundOutcome> out = secagg.TakeOutcome();
    if (!out.ok()) Die(out.status(), "secure round");
    SecureQuantizerOptions q{1.0, 16, 600, out->config.num_clients, out->config.ring_bits};
    absl::StatusOr<SecureQuantizer> quantizer = SecureQuantizer::Create(q);
    if (!quantizer.ok()) Die(quantizer.status(), "quantizer");
    std::vector<float> mean(d);
    if (absl::StatusOr<int64_t> w = quantizer->DecodeMean(out->sum, absl::MakeSpan(mean));
        !w.ok()) {
      Die(w.status(), "decode");
    }
    r.wall = Now(CLOCK_MONOTONIC) - wall0;
    r.cpu = Now(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    for (size_t j = 0; j < d; ++j) {
      r.max_abs_err = std::max<double>(r.max_abs_err, std::fabs(mean[j] - update[j]));
    }
    (*server)->Shutdown(std::chrono::system_clock::now());
    return r;
  }
};

void Print(const char* path, int rep, const Bench& b, const Result& r) {
  std::printf(
      "path=%s rep=%d n=%d d=%zu wall_s=%.3f cpu_s=%.3f client_cpu_s=%.3f "
      "max_client_cpu_s=%.3f bytes_per_client=%lld max_abs_err=%.3g\n",
      path, rep, b.n, b.d, r.wall, r.cpu, r.client_cpu, r.max_client_cpu,
      static_cast<long long>(r.bytes), r.max_abs_err);
  std::fflush(stdout);
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) {
  sextant::Bench b;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n")
      b.n = std::atoi(argv[i + 1]);
    else if (a == "--d")
      b.d = static_cast<size_t>(std::atof(argv[i + 1]));
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--dropout-rate")
      b.dropout_rate = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: secagg_round_bench [--n N] [--d D] [--reps R] [--dropout-rate F]\n");
      return 2;
    }
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  b.update.resize(b.d);
  for (float& x : b.update) x = u(rng);
  b.model_file = "/tmp/secagg_round_bench_model.f32";
  std::ofstream(b.model_file, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.update.data()), b.d * sizeof(float));
  for (int rep = 0; rep < reps; ++rep) {
    sextant::Print("plain", rep, b, b.Plain(2 * rep + 1));
    sextant::Print("secure", rep, b, b.Secure(2 * rep + 2));
  }
  std::remove(b.model_file.c_str());
  return 0;
}
