// Load on one orchestrator: N workers (threads, each with its own channel and the real
// WorkerService stub) hold a lease each and report one measurement every interval for the
// given time; then the stored measurements are counted against what the clients saw
// acknowledged. Prints report latency percentiles.
//   load_bench SEXTANT_BIN WORK_DIR [workers=64] [seconds=120] [interval_ms=100]
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "rpc/channel_credentials.h"
#include "sextant/v1/worker_service.grpc.pb.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct WorkerResult {
  int64_t trial_id = 0;
  int64_t acked = 0;  // measurements acknowledged (reports + the completion's)
  int64_t errors = 0;
  std::string first_error;
  std::vector<double> latency_ms;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A context with a deadline, carrying the worker's session (opened at Register) when given.
std::unique_ptr<grpc::ClientContext> Deadline(double seconds, const std::string& session = "") {
  auto c = std::make_unique<grpc::ClientContext>();
  if (!session.empty()) c->AddMetadata("sextant-session", session);
  c->set_deadline(std::chrono::system_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return c;
}

void Fail(WorkerResult* r, const std::string& what, const grpc::Status& s) {
  ++r->errors;
  if (r->first_error.empty()) r->first_error = absl::StrCat(what, ": ", s.error_message());
}

void RunWorker(const std::string& target, const std::string& secret_file, int index,
               Clock::time_point end, int interval_ms, WorkerResult* r) {
  grpc::ChannelArguments args;
  args.SetInt("sextant.bench.worker", index);  // one connection per worker, as in production
  // The workers' own credentials: local TCP with the run's secret, as sextant-worker dials.
  auto creds = sextant::LoadChannelCredentials("", "worker", secret_file);
  if (!creds.ok())
    return Fail(r, "credentials",
                grpc::Status(grpc::StatusCode::INTERNAL, std::string(creds.status().message())));
  auto channel = grpc::CreateCustomChannel(target, *creds, args);
  auto stub = sextant::v1::WorkerService::NewStub(channel);
  sextant::v1::RegisterRequest reg;
  reg.set_protocol_version(1);
  reg.set_region("bench");
  reg.set_pid(getpid());
  sextant::v1::RegisterResponse registered;
  auto reg_ctx = Deadline(30);
  grpc::Status s = stub->Register(reg_ctx.get(), reg, &registered);
  if (!s.ok()) return Fail(r, "register", s);
  std::string session;
  if (auto it = reg_ctx->GetServerInitialMetadata().find("sextant-session");
      it != reg_ctx->GetServerInitialMetadata().end()) {
    session.assign(it->second.data(), it->second.size());
  }
  sextant::v1::Assignment a;
  while (Clock::now() < end) {
    sextant::v1::LeaseRequest lr;
    lr.set_worker_id(registered.worker_id());
    lr.set_wait_seconds(5);
    sextant::v1::LeaseResponse lease;
    s = stub->Lease(Deadline(20, session).get(), lr, &lease);
    if (!s.ok()) return Fail(r, "lease", s);
    if (lease.has_assignment()) {
      a = lease.assignment();
      break;
    }
  }
  r->trial_id = a.trial_id();
  int64_t seq = 0;
  auto next = Clock::now();
  while (Clock::now() < end) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(interval_ms);
    sextant::v1::ReportRequest req;
    req.set_worker_id(registered.worker_id());
    auto* m = req.add_measurements();
    m->set_trial_id(a.trial_id());
    m->set_attempt(a.attempt());
    m->set_sequence(++seq);
    (*m->mutable_metrics())["step"] = static_cast<double>(seq);
    (*m->mutable_metrics())["loss"] = 1.0 / static_cast<double>(seq);
    sextant::v1::ReportResponse resp;
    auto t0 = Clock::now();
    s = stub->Report(Deadline(10, session).get(), req, &resp);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (s.ok()) {
      ++r->acked;
      r->latency_ms.push_back(ms);
    } else {
      Fail(r, "report", s);
    }
  }
  sextant::v1::CompleteRequest done;
  done.set_worker_id(registered.worker_id());
  done.set_trial_id(a.trial_id());
  done.set_attempt(a.attempt());
  auto* m = done.add_measurements();
  m->set_trial_id(a.trial_id());
  m->set_attempt(a.attempt());
  m->set_sequence(++seq);
  (*m->mutable_metrics())["loss"] = 0.0;
  sextant::v1::CompleteResponse cr;
  s = stub->Complete(Deadline(30, session).get(), done, &cr);
  if (s.ok()) {
    ++r->acked;
  } else {
    Fail(r, "complete", s);
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (out + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> args;
  for (const auto& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: load_bench SEXTANT_BIN WORK_DIR [workers] [seconds] [interval_ms]\n";
    return 2;
  }
  const std::string sextant = argv[1], dir = argv[2];
  const int workers = argc > 3 ? std::atoi(argv[3]) : 64;
  const int seconds = argc > 4 ? std::atoi(argv[4]) : 120;
  const int interval_ms = argc > 5 ? std::atoi(argv[5]) : 100;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // One trial more than the bench's workers: the single local worker holds it (sleeping), so
  // the run stays up until the bench ends it.
  std::ofstream(dir + "/exp.yaml")
      << "name: load\nobjective: {metric: loss, goal: minimize}\n"
      << "parameters:\n  x: {type: float, min: 0, max: 1}\n"
      << "search: {sampler: random, seed: 1, max_trials: " << workers + 1
      << ", max_concurrent: " << workers + 1 << "}\n"
      << "trial:\n  command: [sleep, \"100000\"]\n";
  pid_t orchestrator = Spawn({sextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
                              "--workers", "1", "--lease-timeout", "30s"},
                             dir + "/sextant.out");
  if (orchestrator < 0) return 1;
  std::string target;
  for (int i = 0; i < 600 && target.empty(); ++i) {
    std::string out = ReadAll(dir + "/sextant.out");
    size_t at = out.find("listening on ");
    if (at != std::string::npos && out.find(')', at) != std::string::npos) {
      at += 13;
      target = out.substr(at, out.find(')', at) - at);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (target.empty()) {
    std::cerr << "load_bench: the orchestrator did not start\n"
              << ReadAll(dir + "/sextant.out.err");
    kill(orchestrator, SIGKILL);
    return 1;
  }
  std::vector<WorkerResult> results(workers);
  std::vector<std::thread> threads;
  auto end = Clock::now() + std::chrono::seconds(seconds);
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back(RunWorker, target, dir + "/run/secrets/worker.secret", i, end, interval_ms,
                         &results[i]);
  }
  for (auto& t : threads) t.join();
  kill(orchestrator, SIGINT);
  int status = 0;
  waitpid(orchestrator, &status, 0);

  auto store = sextant::Store::Open(sextant::RunDir::DbPath(dir + "/run"), false, true);
  if (!store.ok()) {
    std::cerr << "load_bench: " << store.status() << "\n";
    return 1;
  }
  int64_t acked = 0, errors = 0, stored = 0, mismatched = 0;
  std::vector<double> all;
  for (const WorkerResult& r : results) {
    acked += r.acked;
    errors += r.errors;
    if (!r.first_error.empty()) std::cerr << "error: " << r.first_error << "\n";
    all.insert(all.end(), r.latency_ms.begin(), r.latency_ms.end());
    auto ms = (*store)->LoadMeasurements(r.trial_id);
    int64_t n = ms.ok() && r.trial_id > 0 ? static_cast<int64_t>(ms->size()) : 0;
    stored += n;
    mismatched += n != r.acked;
  }
  std::printf("workers=%d seconds=%d interval_ms=%d\n", workers, seconds, interval_ms);
  std::printf(
      "reports_acknowledged=%lld stored=%lld workers_with_count_mismatch=%lld errors=%lld\n",
      static_cast<long long>(acked), static_cast<long long>(stored),
      static_cast<long long>(mismatched), static_cast<long long>(errors));
  std::printf("report_rate_per_s=%.1f (target %.1f)\n", all.size() / static_cast<double>(seconds),
              workers * 1000.0 / interval_ms);
  std::printf("report_latency_ms p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", Percentile(all, 0.5),
              Percentile(all, 0.9), Percentile(all, 0.99), Percentile(all, 1.0));
  return errors == 0 && mismatched == 0 ? 0 : 1;
}
