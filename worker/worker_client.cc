#include "worker/worker_client.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/redactor.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rpc/channel_credentials.h"
#include "rpc/server_security.h"
#include "sextant/v1/worker_service.grpc.pb.h"
#include "common/command_runner.h"
#include "worker/telemetry.h"

namespace sextant {
namespace {

using v1::WorkerService;

// The metadata key of the session the orchestrator opened at Register (worker_sessions.h).
constexpr char kSessionKey[] = "sextant-session";

// A call's context: its deadline and, after registering, the worker's session.
std::unique_ptr<grpc::ClientContext> Context(double seconds, const std::string& session = "") {
  auto c = std::make_unique<grpc::ClientContext>();
  if (!session.empty()) c->AddMetadata(kSessionKey, session);
  c->set_deadline(std::chrono::system_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  return c;
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// Streams one attempt's metrics to the orchestrator and keeps its lease alive. Runs on the
// worker's only thread, from inside RunCommand.
class TrialReporter : public CommandObserver {
 public:
  // What the reporter needs from its worker beyond the assignment.
  struct Setup {
    const std::atomic<bool>* preempt = nullptr;  // may be null
    double preempt_notice_seconds = 30;
    const GpuMonitor* gpus = nullptr;  // null: no NVML
    std::vector<int> gpu_indices;      // empty: all
  };

  TrialReporter(WorkerService::StubInterface* stub, int64_t worker_id, std::string session,
                const v1::Assignment& a, double heartbeat_seconds, Clock* clock,
                const std::atomic<bool>* stop, Setup setup)
      : context_(std::move(setup)),
        stub_(stub),
        worker_id_(worker_id),
        session_(std::move(session)),
        trial_id_(a.trial_id()),
        attempt_(a.attempt()),
        heartbeat_seconds_(heartbeat_seconds),
        clock_(clock),
        stop_(stop),
        last_heartbeat_(absl::InfinitePast()),  // the first tick heartbeats: telemetry at once
        last_flush_(clock->Now()) {}

  void OnMetrics(const std::map<std::string, double>& metrics, double elapsed) override {
    v1::Measurement* m = NewMeasurement(elapsed);
    for (const auto& [k, v] : metrics) (*m->mutable_metrics())[k] = v;
  }

  // Events travel as measurements so that they are stored exactly once, in order.
  void OnEvent(const std::string& kind, const std::string& message, double elapsed) override {
    NewMeasurement(elapsed)->set_event(message.empty() ? kind : absl::StrCat(kind, " ", message));
  }

  void OnStarted(int pid) override { sampler_.emplace(pid); }

  double StopGraceSeconds() const override {
    return preempting_ ? context_.preempt_notice_seconds : -1;
  }

  bool OnTick() override {
    if ((context_.preempt != nullptr && context_.preempt->load()) || noticed_) {
      preempting_ = true;
      Flush();
      return false;
    }
    if (stop_->load() || stale_) return false;
    if (action_ == v1::ACTION_STOP) return false;
    // A paused trial gets a moment to save its checkpoint and exit by itself.
    if (action_ == v1::ACTION_PAUSE && clock_->Now() >= pause_deadline_) return false;
    absl::Time now = clock_->Now();
    if (buffer_.measurements_size() > 0 && now - last_flush_ >= absl::Milliseconds(200)) Flush();
    if (now - last_heartbeat_ >= absl::Seconds(heartbeat_seconds_)) {
      v1::HeartbeatRequest req;
      req.set_worker_id(worker_id_);
      req.set_trial_id(trial_id_);
      req.set_attempt(attempt_);
      AddTelemetry(now, &req);
      v1::HeartbeatResponse resp;
      grpc::Status s = stub_->Heartbeat(Context(5, session_).get(), req, &resp);
      if (s.ok()) {
        last_heartbeat_ = now;
        Act(resp.action(), resp.stop());
      } else if (s.error_code() == grpc::StatusCode::ABORTED) {
        stale_ = true;
      }
    }
    return !stale_ && !stop_->load();
  }

  // Sends buffered measurements; keeps them for a later try when the orchestrator is away.
  void Flush() {
    last_flush_ = clock_->Now();
    if (buffer_.measurements_size() == 0) return;
    buffer_.set_worker_id(worker_id_);
    v1::ReportResponse resp;
    grpc::Status s = stub_->Report(Context(5, session_).get(), buffer_, &resp);
    if (s.ok()) {
      // A report renews the lease too, but heartbeats still go out on time: they carry the
      // telemetry.
      buffer_.clear_measurements();
      Act(resp.action(), resp.stop());
    } else if (s.error_code() == grpc::StatusCode::ABORTED) {
      stale_ = true;
      buffer_.clear_measurements();
    }
  }

  // Moves the unsent measurements into a completion.
  void TakeUnsent(v1::CompleteRequest* req) {
    for (auto& m : *buffer_.mutable_measurements()) *req->add_measurements() = std::move(m);
    buffer_.clear_measurements();
  }
  bool stale() const { return stale_; }
  // True when a preemption notice stopped the command.
  bool preempting() const { return preempting_; }
  // The action that made us stop the command (ACTION_CONTINUE when we did not).
  v1::TrialAction action() const { return action_; }

  void Act(v1::TrialAction action, bool stop) {
    if (action == v1::ACTION_CONTINUE && stop) action = v1::ACTION_STOP;
    if (action == v1::ACTION_CONTINUE || action_ == v1::ACTION_STOP) return;
    if (action == v1::ACTION_NOTICE) {  // as a preemption notice: the next tick acts on it
      noticed_ = true;
      return;
    }
    if (action == v1::ACTION_PAUSE && action_ != v1::ACTION_PAUSE) {
      pause_deadline_ = clock_->Now() + absl::Seconds(5);
    }
    action_ = action;
  }

 private:
  v1::Measurement* NewMeasurement(double elapsed) {
    v1::Measurement* m = buffer_.add_measurements();
    m->set_trial_id(trial_id_);
    m->set_attempt(attempt_);
    m->set_sequence(++sequence_);
    m->set_elapsed_seconds(elapsed);
    return m;
  }

  void AddTelemetry(absl::Time now, v1::HeartbeatRequest* req) {
    if (sampler_) {
      ProcessSample p = sampler_->Sample(now);
      req->set_cpu_percent(p.cpu_percent);
      req->set_rss_bytes(p.rss_bytes);
    }
    if (context_.gpus != nullptr) {
      GpuSample g = context_.gpus->Sample(context_.gpu_indices);
      req->set_gpu_count(g.count);
      req->set_gpu_utilization(g.utilization_percent);
      req->set_gpu_memory_bytes(g.memory_used_bytes);
      req->set_gpu_memory_total_bytes(g.memory_total_bytes);
    }
  }

  Setup context_;
  std::optional<ProcessGroupSampler> sampler_;
  bool preempting_ = false;
  bool noticed_ = false;  // the orchestrator sent ACTION_NOTICE
  WorkerService::StubInterface* stub_;
  int64_t worker_id_;
  std::string session_;
  int64_t trial_id_;
  int attempt_;
  double heartbeat_seconds_;
  Clock* clock_;
  const std::atomic<bool>* stop_;
  absl::Time last_heartbeat_, last_flush_;
  v1::ReportRequest buffer_;
  int64_t sequence_ = 0;
  bool stale_ = false;
  v1::TrialAction action_ = v1::ACTION_CONTINUE;
  absl::Time pause_deadline_ = absl::InfiniteFuture();
};

std::string LastLines(const std::string& text, size_t max_bytes) {
  std::string t = text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t;
}

class Worker {
 public:
  Worker(const WorkerOptions& options, std::shared_ptr<WorkerService::StubInterface> stub,
         Clock* clock, const std::atomic<bool>* stop, const std::atomic<bool>* preempt)
      : options_(options), clock_(clock), stop_(stop), preempt_(preempt), stub_(std::move(stub)) {
    auto monitor = GpuMonitor::Open();
    if (monitor.ok()) gpus_ = *std::move(monitor);
  }

  int Run() {
    auto indices = ParseDeviceList(options_.gpus);
    if (!indices.ok()) {
      std::cerr << "sextant-worker: --gpus: " << indices.status().message() << "\n";
      return 2;
    }
    gpu_indices_ = *indices;
    int rc = RegisterSelf();
    if (rc != 0) return rc;
    v1::LeaseResponse lease;
    while (!Stopping()) {
      if (!lease.has_assignment()) {
        if (lease.done()) return 0;
        rc = LeaseNext(&lease);
        if (rc >= 0) return rc;
        continue;
      }
      v1::Assignment a = lease.assignment();
      lease.Clear();
      rc = RunAndComplete(a, &lease);
      if (rc >= 0) return rc;
    }
    return 0;
  }

 private:
  int RegisterSelf() {
    v1::RegisterRequest req;
    req.set_protocol_version(options_.protocol_version);
    req.set_region(options_.region);
    req.set_pool(options_.pool);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    req.set_hostname(host);
    req.set_pid(getpid());
    req.set_launch_token(options_.launch_token);
    auto ctx = Context(options_.connect_timeout_seconds);
    ctx->set_wait_for_ready(true);
    grpc::Status s = stub_->Register(ctx.get(), req, &reg_);
    if (s.ok()) {
      const auto& metadata = ctx->GetServerInitialMetadata();
      auto it = metadata.find(kSessionKey);
      session_ = it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
      return 0;
    }
    std::cerr << "sextant-worker: cannot register with " << options_.target << ": "
              << s.error_message() << "\n";
    return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ? 2 : 1;
  }

  bool Stopping() const { return stop_->load() || (preempt_ != nullptr && preempt_->load()); }

  // Returns -1 to go on, or an exit code.
  int LeaseNext(v1::LeaseResponse* lease) {
    absl::Time give_up = clock_->Now() + absl::Seconds(options_.connect_timeout_seconds);
    while (!Stopping()) {
      v1::LeaseRequest req;
      req.set_worker_id(reg_.worker_id());
      req.set_wait_seconds(options_.lease_wait_seconds);
      auto ctx = Context(options_.lease_wait_seconds + 10, session_);
      grpc::Status s = stub_->Lease(ctx.get(), req, lease);
      if (s.ok()) {
        if (lease->has_retry()) lease->Clear();
        return -1;
      }
      if (!Retryable(s)) {
        std::cerr << "sextant-worker: lease refused: " << s.error_message() << "\n";
        return 1;
      }
      if (clock_->Now() > give_up) {
        std::cerr << "sextant-worker: orchestrator unreachable: " << s.error_message() << "\n";
        return 1;
      }
      clock_->SleepFor(absl::Milliseconds(200));
    }
    return 0;
  }

  CommandSpec SpecFor(const v1::Assignment& a) {
    CommandSpec spec;
    spec.argv.assign(a.argv().begin(), a.argv().end());
    // The built-in trainer is this very binary, wherever it is installed.
    if (!spec.argv.empty() && spec.argv[0] == "sextant-worker") {
      std::error_code ec;
      auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      if (!ec) spec.argv[0] = self.string();
    } else if (!spec.argv.empty() && spec.argv[0] == "sextant") {  // a federated trial
      std::error_code ec;
      auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
      if (!ec) spec.argv[0] = (self.parent_path() / "sextant").string();
    }
    for (const auto& [k, v] : a.env()) spec.env[k] = v;
    if (!options_.gpus.empty()) spec.env["CUDA_VISIBLE_DEVICES"] = options_.gpus;
    spec.working_dir = reg_.working_dir();
    spec.timeout_seconds = a.timeout_seconds();
    if (!reg_.log_dir().empty()) {
      std::string base = absl::StrCat(reg_.log_dir(), "/trial-", a.trial_id(), ".", a.attempt());
      spec.stdout_path = base + ".out";
      spec.stderr_path = base + ".err";
      // A trial that prints a secret from its environment must not leave it in its log either.
      std::map<std::string, std::string> env(a.env().begin(), a.env().end());
      spec.redact = Redactor::FromEnvironment(env);
    }
    return spec;
  }

  // Reports an attempt that a preemption notice stopped as preempted (not failed), so that the
  // orchestrator requeues it to resume from its checkpoint. Returns 0: the worker exits.
  int HandBack(const v1::Assignment& a, TrialReporter& reporter,
               const absl::StatusOr<CommandResult>& result) {
    v1::CompleteRequest req;
    req.set_worker_id(reg_.worker_id());
    req.set_trial_id(a.trial_id());
    req.set_attempt(a.attempt());
    req.set_preempted(true);
    req.set_exit_code(result.ok() ? result->exit_code : -1);
    reporter.TakeUnsent(&req);
    v1::LeaseResponse unused;
    SendCompletion(req, &unused);
    std::cerr << "sextant-worker: preempted; trial " << a.trial_id() << " handed back\n";
    return 0;
  }

  // Runs one attempt and reports its end, leasing the next in the same call.
  // Returns -1 to go on, or an exit code.
  int RunAndComplete(const v1::Assignment& a, v1::LeaseResponse* next) {
    bool checkpoint_missing = false;
    if (!a.checkpoint_dir().empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a.checkpoint_dir(), ec);
      checkpoint_missing = a.resume() && std::filesystem::is_empty(a.checkpoint_dir(), ec);
    }
    TrialReporter reporter(
        stub_.get(), reg_.worker_id(), session_, a, reg_.heartbeat_seconds(), clock_, stop_,
        TrialReporter::Setup{preempt_, options_.preempt_notice_seconds, gpus_.get(), gpu_indices_});
    absl::StatusOr<CommandResult> result = RunCommand(SpecFor(a), &reporter, clock_);
    // A notice or a stop may also arrive as the command ends, before a tick sees it; the worker
    // then leases nothing more. A clean exit is the trial's own end and is reported, or a
    // finished trial would be lost. Any other exit of its own is taken as the trial's answer to
    // the same signal (a provider such as Slurm signals the trial too): after a notice it is
    // handed back like a trial the notice stopped; after a stop the orchestrator records it as
    // cancelled, as it does a command the stop cut short.
    const bool stopping = Stopping();
    const bool by_itself = result.ok() && !result->stopped;
    const bool clean_exit = by_itself && result->exit_code == 0;
    const bool late_notice = stopping && !stop_->load() && by_itself && !clean_exit;
    if ((reporter.preempting() || late_notice) && !reporter.stale()) {
      return HandBack(a, reporter, result);
    }
    if (stop_->load() && !clean_exit) return 0;
    if (reporter.stale()) {  // the lease moved on; our result is not wanted
      NoteStale(a.trial_id(), a.attempt());
      return stopping ? 0 : -1;
    }
    v1::CompleteRequest req;
    req.set_worker_id(reg_.worker_id());
    req.set_trial_id(a.trial_id());
    req.set_attempt(a.attempt());
    req.set_lease_next(!stopping);
    req.set_checkpoint_missing(checkpoint_missing);
    reporter.TakeUnsent(&req);
    if (!result.ok()) {
      req.set_exit_code(-1);
      req.set_error(std::string(result.status().message()));
    } else {
      req.set_exit_code(result->exit_code);
      req.set_timed_out(result->timed_out);
      if (result->stopped) req.set_stopped_for(reporter.action());
      if ((result->exit_code != 0 || result->timed_out || result->spawn_failed) &&
          !result->stopped) {
        std::string error = result->error;
        std::string tail = LastLines(result->stderr_tail, 2000);
        if (!tail.empty()) absl::StrAppend(&error, "; stderr: ", tail);
        // A trial that prints a secret from its environment must not ship it anywhere.
        std::map<std::string, std::string> env(a.env().begin(), a.env().end());
        req.set_error(Redactor::FromEnvironment(env).Apply(error));
      }
    }
    const int rc = SendCompletion(req, next);
    return stopping ? 0 : rc;
  }

  // The orchestrator gave this attempt's lease to another: says so once on stderr.
  static void NoteStale(int64_t trial_id, int attempt) {
    std::cerr << "sextant-worker: trial " << trial_id << " attempt " << attempt
              << " no longer holds its lease; its late messages were rejected (stale)\n";
  }

  int SendCompletion(const v1::CompleteRequest& req, v1::LeaseResponse* next) {
    absl::Time give_up = clock_->Now() + absl::Seconds(reg_.lease_seconds());
    while (true) {
      v1::CompleteResponse resp;
      grpc::Status s = stub_->Complete(Context(10, session_).get(), req, &resp);
      if (s.ok()) {
        *next = resp.next();
        if (next->has_retry()) next->Clear();
        return -1;
      }
      if (!Retryable(s) || clock_->Now() > give_up || stop_->load()) {
        if (s.error_code() != grpc::StatusCode::ABORTED) {
          std::cerr << "sextant-worker: completion of trial " << req.trial_id()
                    << " not accepted: " << s.error_message() << "\n";
        } else {
          NoteStale(req.trial_id(), req.attempt());
        }
        return s.error_code() == grpc::StatusCode::ABORTED || Retryable(s) ? -1 : 1;
      }
      clock_->SleepFor(absl::Milliseconds(200));
    }
  }

  WorkerOptions options_;
  Clock* clock_;
  const std::atomic<bool>* stop_;
  const std::atomic<bool>* preempt_;
  std::unique_ptr<GpuMonitor> gpus_;
  std::vector<int> gpu_indices_;
  std::shared_ptr<WorkerService::StubInterface> stub_;
  v1::RegisterResponse reg_;
  std::string session_;  // sent with every call after Register
};

}  // namespace

absl::StatusOr<std::shared_ptr<WorkerService::StubInterface>> DialOrchestrator(
    const WorkerOptions& options) {
  // Checked before any channel exists: a remote orchestrator in plaintext could lease any
  // command to this host.
  SEXTANT_RETURN_IF_ERROR(CheckDialAllowed(options.target, !options.tls_dir.empty()));
  // TLS with a client certificate and the role's bearer token when tls_dir is set.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      LoadChannelCredentials(options.tls_dir, options.tls_name, options.secret_file);
  if (!creds.ok()) {
    return absl::Status(creds.status().code(),
                        absl::StrCat(options.tls_dir.empty() ? "--secret-file" : "--tls-dir",
                                     ": ", creds.status().message()));
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return std::shared_ptr<WorkerService::StubInterface>(
      WorkerService::NewStub(grpc::CreateCustomChannel(options.target, *creds, args)));
}

int RunWorker(const WorkerOptions& options, std::shared_ptr<WorkerService::StubInterface> stub,
              Clock* clock, const std::atomic<bool>* stop, const std::atomic<bool>* preempt) {
  Worker worker(options, std::move(stub), clock, stop, preempt);
  return worker.Run();
}

int RunWorker(const WorkerOptions& options, Clock* clock, const std::atomic<bool>* stop,
              const std::atomic<bool>* preempt) {
  absl::StatusOr<std::shared_ptr<WorkerService::StubInterface>> stub = DialOrchestrator(options);
  if (!stub.ok()) {
    std::cerr << "sextant-worker: " << stub.status().message() << "\n";
    return 2;
  }
  return RunWorker(options, *std::move(stub), clock, stop, preempt);
}

}  // namespace sextant
