#include "orchestrator/orchestrator.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/redactor.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "orchestrator/admin_service.h"
#include "orchestrator/ask_tell.h"
#include "orchestrator/dispatcher.h"
#include "orchestrator/experiment_loader.h"
#include "orchestrator/federated_run.h"
#include "orchestrator/fleet.h"
#include "orchestrator/local_provider.h"
#include "orchestrator/progress.h"
#include "orchestrator/report.h"
#include "orchestrator/results.h"
#include "orchestrator/run_address.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/run_monitor.h"
#include "orchestrator/slurm_provider.h"
#include "orchestrator/static_provider.h"
#include "orchestrator/store.h"
#include "orchestrator/strategy_factory.h"
#include "orchestrator/trial_service.h"
#include "orchestrator/warm_start.h"
#include "orchestrator/worker_service.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

std::atomic<int> g_stop_signal{0};

// How long running trials get to checkpoint and stop when the budget is spent: the grace each
// worker gives its trial after the notice (--preempt-notice) and the fleet's projection.
constexpr double kWindDownSeconds = 10;

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : p.parent_path().string();
}

// One run: the store, the dispatcher, the server and the workers, with their lifetimes tied
// together. Long-lived objects are members so that teardown happens in one place.
class Run {
 public:
  Run(const RunOptions& options, const RunEnv& env) : options_(options), env_(env) {}

  int Main() {
    int rc = Prepare();
    if (rc != 0) return rc;
    rc = Loop();
    if (monitor_) {
      PublishMetrics(Stats());
      monitor_->RunEnded();
    }
    Teardown();
    return rc;
  }

 private:
  // Loads the spec, takes the run directory and builds the dispatcher. Returns an exit code.
  int Prepare() {
    if (options_.resume) {
      if (!std::filesystem::exists(RunDir::DbPath(options_.run_dir))) {
        *env_.err << "sextant: " << options_.run_dir << " is not a Sextant run directory (no state.db)\n";
        return 2;
      }
    } else {
      LoadResult loaded = LoadExperimentFile(options_.experiment_file);
      if (!loaded.ok()) {
        for (const LoadError& e : loaded.errors) *env_.err << e.ToString() << "\n";
        return 2;
      }
      spec_ = loaded.spec;
      ApplyBudgetOverrides();
      // Stored paths are absolute, so that `resume` from any directory finds the same files.
      std::string wd = spec_.trial().working_dir().empty() ? "." : spec_.trial().working_dir();
      spec_.mutable_trial()->set_working_dir(
          std::filesystem::absolute(wd).lexically_normal().string());
      spec_.set_source_path(std::filesystem::absolute(spec_.source_path()).string());
      run_dir_path_ = options_.run_dir.empty() ? "runs/" + spec_.name() : options_.run_dir;
    }
    if (options_.resume) run_dir_path_ = options_.run_dir;
    auto dir = RunDir::Acquire(run_dir_path_);
    if (!dir.ok()) {
      *env_.err << "sextant: " << dir.status().message() << "\n";
      return 1;
    }
    run_dir_ = std::make_unique<RunDir>(*std::move(dir));
    bool existed = std::filesystem::exists(run_dir_->db_path());
    auto store = Store::Open(run_dir_->db_path(), /*create=*/true);
    if (!store.ok()) return Fail(store.status());
    store_ = *std::move(store);
    auto stored_spec = store_->GetMeta("spec");
    if (!stored_spec.ok()) return Fail(stored_spec.status());
    if (options_.resume) {
      if (!*stored_spec || !spec_.ParseFromString(**stored_spec)) {
        *env_.err << "sextant: " << run_dir_path_ << " holds no experiment to resume\n";
        return 2;
      }
      if (options_.max_cost || options_.max_wall_time_seconds) {
        ApplyBudgetOverrides();
        if (absl::Status s = store_->PutMeta("spec", spec_.SerializeAsString()); !s.ok()) return Fail(s);
      }
    } else if (existed && *stored_spec) {
      *env_.err << "sextant: " << run_dir_path_ << " already holds a run; continue it with "
                << "`sextant resume " << run_dir_path_ << "` or pick another --run-dir\n";
      return 2;
    } else {
      absl::Status s = store_->PutMeta("spec", spec_.SerializeAsString());
      if (s.ok()) s = store_->PutMeta("started_at", absl::StrCat(absl::ToUnixSeconds(env_.clock->Now())));
      if (!s.ok()) return Fail(s);
    }
    if (absl::Status s = KeepSlurmPartitions(); !s.ok()) return Fail(s);
    auto sampler = MakeRunSampler(spec_, store_.get(),
                                  absl::ToDoubleSeconds(env_.clock->Now() - absl::UnixEpoch()));
    if (!sampler.ok()) {
      *env_.err << "sextant: " << sampler.status().message() << "\n";
      return 2;
    }
    DispatcherOptions dopts;
    dopts.lease_seconds = options_.lease_seconds;
    dopts.heartbeat_seconds = options_.heartbeat_seconds;
    dopts.logs_dir = std::filesystem::absolute(run_dir_->logs_dir()).string();
    dopts.checkpoints_dir = std::filesystem::absolute(run_dir_->checkpoints_dir()).string();
    dopts.working_dir = spec_.trial().working_dir();
    if (!options_.tls_dir.empty()) {
      dopts.tls_dir = std::filesystem::absolute(options_.tls_dir).string();
    }
    if (dopts.working_dir.empty() && !spec_.source_path().empty()) {
      dopts.working_dir = std::filesystem::path(spec_.source_path()).parent_path().string();
    }
    // Absolute, so that a resume from another directory runs commands in the same place.
    if (!dopts.working_dir.empty()) {
      dopts.working_dir = std::filesystem::absolute(dopts.working_dir).lexically_normal().string();
    }
    if (AskTellMode()) {
      // Clients hold asked trials for the experiment's lease; those asked before a restart
      // (or by an offline `sextant ask`) stay theirs.
      dopts.lease_seconds = AskTellLeaseSeconds(spec_);
      auto held = LoadHeldLeases(*store_);
      if (!held.ok()) return Fail(held.status());
      dopts.held_leases = *std::move(held);
    }
    auto dispatcher = Dispatcher::Create(spec_, store_.get(), *std::move(sampler), env_.clock,
                                         dopts, MakeScheduler(spec_));
    if (!dispatcher.ok()) return Fail(dispatcher.status());
    dispatcher_ = *std::move(dispatcher);
    return StartServer();
  }

  void ApplyBudgetOverrides() {
    if (options_.max_cost) spec_.mutable_budget()->set_max_cost(*options_.max_cost);
    if (options_.max_wall_time_seconds) {
      spec_.mutable_budget()->set_max_wall_time_seconds(*options_.max_wall_time_seconds);
    }
  }

  int StartServer() {
    if (!options_.tls_dir.empty()) {
      auto security = LoadServerSecurity(options_.tls_dir);
      if (!security.ok()) {
        *env_.err << "sextant: --tls-dir: " << security.status().message() << "\n";
        return 2;
      }
      security_ = *std::move(security);
    } else {
      // Loopback: every call must carry this run's secret, which only this user can read.
      auto secrets = CreateRunSecrets(std::filesystem::absolute(run_dir_->path() + "/secrets"));
      if (!secrets.ok()) return Fail(secrets.status());
      secrets_ = *std::move(secrets);
      security_ = LoopbackSecurity(secrets_);
    }
    if (absl::Status s = CheckListenAllowed(options_.listen, security_); !s.ok()) {
      *env_.err << "sextant: " << s.message() << "\n";
      return 2;
    }
    std::map<std::string, std::string> trial_env(spec_.trial().env().begin(),
                                                 spec_.trial().env().end());
    service_ = std::make_unique<WorkerServiceImpl>(dispatcher_.get(),
                                                   Redactor::FromEnvironment(trial_env));
    admin_ = std::make_unique<AdminServiceImpl>(service_.get(), security_.auth());
    if (AskTellMode()) {
      auto core = service_->WithDispatcher(
          [&](Dispatcher& d) { return AskTell::Create(&d, store_.get(), env_.clock); });
      if (!core.ok()) return Fail(core.status());
      ask_tell_ = *std::move(core);
      trial_service_ = std::make_unique<TrialServiceImpl>(service_.get(), ask_tell_.get());
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, MakeServerCredentials(security_), &port_);
    // An ask/tell run serves clients, not workers.
    if (trial_service_) {
      builder.RegisterService(trial_service_.get());
    } else {
      builder.RegisterService(service_.get());
    }
    builder.RegisterService(admin_.get());
    // The limits hold for every service on this server: the worker and admin services carry
    // small messages (a report batch is far below 16 MiB).
    builder.SetMaxReceiveMessageSize(16 << 20);
    builder.SetMaxSendMessageSize(16 << 20);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      *env_.err << "sextant: cannot listen on " << options_.listen << "\n";
      return 1;
    }
    return 0;
  }

  // The Slurm partitions belong to the run: they are recorded with it, and `resume` uses them
  // unless its own flags name others (which are then recorded instead).
  absl::Status KeepSlurmPartitions() {
    for (auto [key, value] : {std::pair{"slurm_partition", &options_.slurm_partition},
                              std::pair{"slurm_spot_partition", &options_.slurm_spot_partition}}) {
      if (value->empty() && options_.resume) {
        SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> stored, store_->GetMeta(key));
        if (stored) *value = *stored;
      }
      if (!value->empty()) SEXTANT_RETURN_IF_ERROR(store_->PutMeta(key, *value));
    }
    return absl::OkStatus();
  }

  int Fail(const absl::Status& s) {
    *env_.err << "sextant: " << s.message() << "\n";
    return 1;
  }

  // How the workers this run starts dial it.
  WorkerCredentials WorkerDial() const {
    WorkerCredentials c;
    if (!options_.tls_dir.empty()) {
      c.tls_dir = std::filesystem::absolute(options_.tls_dir).string();
    } else {
      c.secret_file = secrets_.worker_file;
    }
    return c;
  }

  std::string Target() const {
    std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
    // Local workers reach a wildcard listener on loopback (which the certificates name).
    if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = "127.0.0.1";
    return absl::StrCat(host, ":", port_);
  }

  void LaunchWorker(int index) {
    std::string bin = options_.worker_binary.empty() ? SelfDir() + "/sextant-worker"
                                                     : options_.worker_binary;
    std::vector<std::string> argv = {bin, "--connect", Target(), "--region", "local",
                                     "--pool", "local", "--launch-token",
                                     absl::StrCat("local-", index), "--exit-with-parent",
                                     "--preempt-notice", absl::StrCat(kWindDownSeconds)};
    WorkerDial().AppendFlags(&argv);
    auto pid = env_.launcher->Launch(argv, absl::StrCat(run_dir_->logs_dir(), "/worker-", index, ".log"));
    if (!pid.ok()) {
      *env_.err << "sextant: " << pid.status().message() << "\n";
      return;
    }
    workers_.push_back(Local{*pid, index});
  }

  // Reaps exited workers and replaces them while the run goes on (a bounded number of times).
  void ReapWorkers(bool replace) {
    for (auto it = workers_.begin(); it != workers_.end();) {
      std::optional<int> status = env_.launcher->Poll(it->pid);
      if (!status) {
        ++it;
        continue;
      }
      int index = it->index;
      it = workers_.erase(it);
      if (replace && respawns_left_ > 0) {
        --respawns_left_;
        LaunchWorker(index);
        return;  // the iterator is stale after push_back
      }
    }
  }

  int Loop() {
    int n = options_.workers > 0 ? options_.workers : std::max(1, spec_.search().max_concurrent());
    respawns_left_ = 3 * n;
    if (trial_service_) {
      if (int rc = AnnounceAskTell(); rc != 0) return rc;
    } else if (spec_.resources().pools_size() > 0) {
      if (int rc = StartFleet(); rc != 0) return rc;
    } else {
      for (int i = 0; i < n; ++i) LaunchWorker(i);
      if (workers_.empty()) return 1;
    }
    if (int rc = StartMetrics(); rc != 0) return rc;
    ProgressReporter progress(env_.out, options_.tty, env_.clock, ObjectiveLabel());
    if (!trial_service_) {
      *env_.out << "sextant: running " << spec_.name() << " in " << run_dir_path_ << " with " << n
                << " workers (listening on " << Target() << ")\n"
                << std::flush;
    }
    const absl::Time start = env_.clock->Now();
    const double wall = spec_.budget().max_wall_time_seconds();
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      absl::Status tick = service_->Tick();
      if (trial_service_) trial_service_->Tick();
      absl::Status fatal = service_->fatal_error();
      if (fatal.ok() && trial_service_) fatal = trial_service_->fatal_error();
      if (!fatal.ok()) {
        progress.Finish(Stats());
        (void)service_->WithDispatcher([](Dispatcher& d) { return d.MarkRunState("FAILED"); });
        return Fail(fatal);
      }
      DispatchStats stats = Stats();
      progress.Update(stats);
      PublishMetrics(stats);
      if (service_->WithDispatcher([](Dispatcher& d) { return d.Finished(); })) {
        // The last trial may have ended between Stats() above and Finished(): draw them anew.
        progress.Finish(Stats());
        absl::Status s = service_->WithDispatcher([](Dispatcher& d) { return d.MarkRunState("COMPLETED"); });
        if (!s.ok()) return Fail(s);
        PrintSummary();
        return 0;
      }
      int sig = g_stop_signal.load();
      if (sig == 0 && admin_->drain_requested()) sig = SIGINT;  // AdminService.Drain
      bool out_of_time = wall > 0 && absl::ToDoubleSeconds(env_.clock->Now() - start) > wall;
      if (sig == 0 && out_of_time) {
        return WindDown(progress, absl::StrCat("budget.max_wall_time reached (", wall, " s)"),
                        "--max-wall-time DURATION");
      }
      if (fleet_ && sig == 0) {
        if (std::optional<int> rc = FleetStep(progress)) return *rc;
        continue;
      }
      if (sig != 0) {
        progress.Finish(Stats());
        absl::Status s = service_->WithDispatcher([](Dispatcher& d) { return d.Interrupt(); });
        if (s.ok()) s = service_->WithDispatcher([&](Dispatcher& d) { return d.MarkRunState("INTERRUPTED"); });
        if (!s.ok()) return Fail(s);
        *env_.out << "sextant: interrupted; running trials were cancelled. Continue with: sextant resume "
                  << run_dir_path_ << "\n";
        return 130;
      }
      if (trial_service_) continue;  // no workers: clients come and go
      ReapWorkers(/*replace=*/true);
      if (workers_.empty()) {
        *env_.err << "sextant: every local worker has exited; see " << run_dir_->logs_dir()
                  << "/worker-*.log\n";
        (void)service_->WithDispatcher([](Dispatcher& d) { return d.MarkRunState("FAILED"); });
        return 1;
      }
    }
  }

  bool AskTellMode() const { return spec_.search().mode() == v1::Search::ASK_TELL; }

  // Records where clients reach this ask/tell run (RUN_DIR/address) and says so. Returns an
  // exit code.
  int AnnounceAskTell() {
    RunAddress a;
    a.address = Target();
    a.run_id = ask_tell_->run_id();
    a.pid = getpid();
    if (!options_.tls_dir.empty()) {
      a.tls_dir = std::filesystem::absolute(options_.tls_dir).string();
    } else {
      a.secret_file = secrets_.worker_file;
    }
    if (absl::Status s = WriteRunAddress(run_dir_path_, a); !s.ok()) return Fail(s);
    *env_.out << "sextant: serving ask/tell for " << spec_.name() << " in " << run_dir_path_
              << " on " << a.address << " (run " << a.run_id << ", lease "
              << AskTellLeaseSeconds(spec_) << " s)\n"
              << "sextant: ask with `sextant ask " << run_dir_path_ << "`, tell with `sextant tell "
              << run_dir_path_ << " TRIAL --value V`; clients dial " << a.address
              << (a.tls_dir.empty() ? " with the bearer token in " + a.secret_file
                                    : " with TLS and the worker certificate in " + a.tls_dir)
              << "\n"
              << std::flush;
    return 0;
  }

  // The objective's metric, or the objectives' joined by commas.
  std::string ObjectiveLabel() const { return ObjectiveMetricsLabel(spec_); }

  // Serves /metrics and the live report on loopback when asked (--metrics-port). Returns an
  // exit code.
  int StartMetrics() {
    if (options_.metrics_port < 0) return 0;
    auto monitor = RunMonitor::Start(options_.metrics_port, spec_, run_dir_path_, env_.clock, *env_.out);
    if (!monitor.ok()) return Fail(monitor.status());
    monitor_ = *std::move(monitor);
    return 0;
  }

  void PublishMetrics(const DispatchStats& stats) {
    if (!monitor_) return;
    MetricsSnapshot m = monitor_->Snapshot();
    if (spec_.objectives_size() > 0) {
      m.front_size = stats.front_size;
      m.hypervolume = stats.hypervolume;
    }
    m.by_state = stats.by_state;
    m.max_trials = stats.max_trials;
    m.best_value = stats.best_value;
    m.best_trial = stats.best_trial;
    if (stats.spend) m.spend = *stats.spend;  // the live ledger's committed spend
    CountWorkers(stats, m);
    monitor_->Publish(m);
  }

  // The workers that can take a trial now and those running one: in a pool run the workers
  // of live instances (not retired ones), otherwise the local worker processes.
  void CountWorkers(const DispatchStats& stats, MetricsSnapshot& m) {
    if (fleet_) {
      service_->WithDispatcher([&](Dispatcher& d) {  // the fleet is ticked under this lock
        const std::set<int64_t> live = fleet_->LiveWorkers();
        m.workers = static_cast<int>(live.size());
        for (const auto& [worker, trial] : d.RunningByWorker()) m.busy_workers += live.count(worker);
        return 0;
      });
      return;
    }
    m.workers = static_cast<int>(workers_.size());
    auto running = stats.by_state.find("RUNNING");
    m.busy_workers = running == stats.by_state.end() ? 0 : std::min(running->second, m.workers);
  }

  DispatchStats Stats() {
    return service_->WithDispatcher([this](Dispatcher& d) {
      DispatchStats s = d.Stats();
      if (fleet_) s.spend = fleet_->committed();  // the fleet is ticked under the same lock
      return s;
    });
  }

  // Records and prints the orchestrator's own CPU time (not its workers' or trials').
  void RecordCpu() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec / 1e6;
    (void)service_->WithDispatcher([&](Dispatcher&) {
      return store_->PutMeta("orchestrator_cpu_seconds", absl::StrCat(cpu));
    });
    *env_.out << "orchestrator cpu: " << cpu << " s\n";
  }

  void PrintSummary() {
    RecordCpu();
    auto results = LoadResults(run_dir_path_);
    if (results.ok()) *env_.out << ResultsToTable(*results, 10);
  }

  // Lets workers see `done` and exit, then stops whatever is left, then the server.
  void Teardown() {
    if (!server_) return;
    if (trial_service_) {
      RemoveRunAddress(run_dir_path_);
      trial_service_->Drain();  // waiting asks hear `done`
    }
    if (fleet_) {
      FleetTeardown();
      return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(3);
    bool stopping = g_stop_signal.load() != 0;
    if (stopping) {
      for (const Local& w : workers_) env_.launcher->Signal(w.pid, SIGINT);
    }
    while (!workers_.empty() && absl::Now() < deadline) {
      service_->Tick().IgnoreError();
      ReapWorkers(/*replace=*/false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (const Local& w : workers_) env_.launcher->Signal(w.pid, SIGINT);
    const absl::Time kill_at = absl::Now() + absl::Seconds(2);
    while (!workers_.empty() && absl::Now() < kill_at) {
      ReapWorkers(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (const Local& w : workers_) env_.launcher->Signal(w.pid, SIGKILL);
    ReapWorkers(false);
    service_->Drain();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // Builds the provider and the fleet that launches, bills and scales the spec's pools.
  int StartFleet() {
    Catalog catalog = Catalog::Default();
    if (!spec_.resources().catalog().empty()) {
      std::ifstream in(spec_.resources().catalog());
      std::stringstream text;
      text << in.rdbuf();
      std::vector<CatalogError> errors;
      catalog = Catalog::Parse(text.str(), &errors);
      if (!errors.empty()) {
        *env_.err << "sextant: " << spec_.resources().catalog() << ":" << errors[0].line << ":"
                  << errors[0].col << ": " << errors[0].message << "\n";
        return 2;
      }
    }
    const std::string bin = options_.worker_binary.empty() ? SelfDir() + "/sextant-worker"
                                                           : options_.worker_binary;
    const std::string& kind = spec_.resources().provider();
    if (kind == "static") {
      provider_ = std::make_unique<StaticProvider>();
    } else if (kind == "slurm") {
      provider_ = std::make_unique<SlurmProvider>(
          SlurmOptions{bin, options_.slurm_partition, options_.slurm_spot_partition, ""});
    } else if (kind == "local" || kind.empty()) {
      provider_ = std::make_unique<LocalProvider>(env_.launcher, bin);
    } else {
      *env_.err << "sextant: provider " << kind << " runs only under `sextant simulate`\n";
      return 2;
    }
    FleetOptions fo;
    fo.connect = Target();
    fo.logs_dir = std::filesystem::absolute(run_dir_->logs_dir()).string();
    fo.credentials = WorkerDial();
    fo.time_scale = options_.time_scale;
    fo.seed = spec_.search().seed();
    fo.wind_down_seconds = kWindDownSeconds;
    if (options_.resume) {
      if (int rc = LoadPriorBills(fo); rc != 0) return rc;
    }
    auto fleet = Fleet::Create(spec_, std::move(catalog), provider_.get(), env_.clock, fo);
    if (!fleet.ok()) {
      *env_.err << "sextant: " << fleet.status().message() << "\n";
      return 2;
    }
    fleet_ = *std::move(fleet);
    std::string why;
    std::set<std::string> barred = fleet_->PoolsOffTheTopRung(&why);
    service_->WithDispatcher([&](Dispatcher& d) {
      d.SetTopRungRule(std::move(barred), why);
      // The built-in metric `cost`: the dispatcher runs under the same lock as the fleet.
      d.SetTrialCost([fleet = fleet_.get()](int64_t trial) { return fleet->TrialCost(trial); });
      d.SetSpend([fleet = fleet_.get()] { return fleet->committed(); });
      return 0;
    });
    if (kind == "static") {
      *env_.out << "sextant: start workers with: sextant-worker --connect " << Target()
                << " --region REGION --pool POOL"
                << (options_.tls_dir.empty() ? " --secret-file " + secrets_.worker_file
                                             : " --tls-dir DIR --tls-name NAME")
                << "\n";
    }
    return 0;
  }

  // A resumed run keeps the bills and pool counters of its earlier sessions. Returns an exit code.
  int LoadPriorBills(FleetOptions& fo) {
    auto costs = store_->LoadCosts();
    if (!costs.ok()) return Fail(costs.status());
    fo.prior_costs = *std::move(costs);
    auto started = store_->GetMeta("started_at");
    double t0 = 0;
    if (started.ok() && *started && absl::SimpleAtod(**started, &t0)) {
      fo.epoch_offset_seconds = std::max(0.0, absl::ToUnixMicros(env_.clock->Now()) / 1e6 - t0);
    }
    auto fleet = store_->GetMeta("fleet");
    if (!fleet.ok() || !*fleet) return 0;
    nlohmann::json doc = nlohmann::json::parse(**fleet, nullptr, false);
    if (!doc.is_object() || !doc.contains("pools") || !doc["pools"].is_object()) return 0;
    for (const auto& [name, p] : doc["pools"].items()) {
      FleetPoolStats& st = fo.prior_pools[name];
      st.name = name;
      st.launched = p.value("launched", 0);
      st.launch_failures = p.value("launch_failures", 0);
      st.interruptions = p.value("interruptions", 0);
      st.preemptions = p.value("preemptions", 0);
    }
    return 0;
  }

  // One fleet round under the dispatch lock: ticks the fleet, applies its decisions to the
  // dispatcher and stores its events and bills. *exhausted: the budget is spent; *stuck: why
  // waiting work can never run (empty when it can).
  absl::Status FleetRound(bool* exhausted, std::string* stuck) {
    const absl::Time now = env_.clock->Now();
    return service_->WithDispatcher([&](Dispatcher& d) -> absl::Status {
      FleetView view;
      view.demand = d.Demand();
      view.top_rung_demand = d.TopRungDemand();
      view.running = d.RunningByWorker();
      for (const auto& [id, w] : d.workers()) view.workers[id] = {w.region, w.pool, w.launch_token};
      FleetTick tick = fleet_->Tick(view);
      d.SetHold(tick.hold || fleet_->exhausted());
      for (int64_t w : tick.retire) d.RetireWorker(w);
      SEXTANT_RETURN_IF_ERROR(store_->Begin());
      absl::Status st;
      for (const FleetTick::Event& e : tick.events) {
        if (st.ok()) st = store_->AddEvent(absl::ToUnixMicros(now) / 1e6, e.kind, e.trial, e.message);
      }
      const bool write = !tick.events.empty() || now - last_cost_write_ >= absl::Seconds(1);
      if (st.ok() && write) {
        st = fleet_->WriteCosts(store_.get());
        last_cost_write_ = now;
      }
      if (!st.ok()) {
        store_->Rollback();
        return st;
      }
      *exhausted = fleet_->exhausted();
      if (!*exhausted && view.demand > 0) (void)fleet_->Stuck(stuck);
      return store_->Commit();
    });
  }

  // One fleet round. Returns the exit code once the run ends.
  std::optional<int> FleetStep(ProgressReporter& progress) {
    bool exhausted = false;
    std::string stuck;
    absl::Status s = FleetRound(&exhausted, &stuck);
    if (!s.ok()) return Fail(s);
    if (exhausted) {
      return WindDown(progress, absl::StrCat("budget.max_cost reached (", spec_.budget().max_cost(), ")"),
                      "--max-cost AMOUNT");
    }
    if (stuck.empty()) return std::nullopt;
    progress.Finish(Stats());
    if (!absl::StartsWith(stuck, "the budget")) {
      (void)service_->WithDispatcher([](Dispatcher& d) { return d.MarkRunState("FAILED"); });
      *env_.err << "sextant: " << stuck << "; see " << run_dir_->logs_dir() << "\n";
      return 1;
    }
    return WindDown(progress, absl::StrCat("budget.max_cost reached: ", stuck), "--max-cost AMOUNT");
  }

  // The budget is spent: nothing new starts, running trials get the preemption-style notice
  // (SIGTERM to their worker, through the provider for instances) so that they write their
  // checkpoint and hand themselves back; those still running after the wind-down are
  // cancelled. The run ends BUDGET_EXHAUSTED with its report. Returns the exit code (0).
  int WindDown(ProgressReporter& progress, const std::string& why, const std::string& raise) {
    progress.Finish(Stats());
    absl::Status s = service_->WithDispatcher([&](Dispatcher& d) {
      d.SetHold(true);
      return d.BeginStop(why);
    });
    if (!s.ok()) return Fail(s);
    if (fleet_) {
      (void)service_->WithDispatcher([&](Dispatcher&) { return fleet_->NoticeAll(); });
    } else {
      for (const Local& w : workers_) env_.launcher->Signal(w.pid, SIGTERM);
    }
    const absl::Time deadline = env_.clock->Now() + absl::Seconds(kWindDownSeconds + 5);
    auto running = [&] { return service_->WithDispatcher([](Dispatcher& d) { return d.running(); }); };
    while (running() > 0 && env_.clock->Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      service_->Tick().IgnoreError();
      if (fleet_) {
        bool exhausted = false;
        std::string stuck;
        FleetRound(&exhausted, &stuck).IgnoreError();
      } else {
        ReapWorkers(/*replace=*/false);
      }
    }
    s = service_->WithDispatcher([](Dispatcher& d) { return d.Interrupt(); });
    if (s.ok()) s = service_->WithDispatcher([](Dispatcher& d) { return d.MarkRunState("BUDGET_EXHAUSTED"); });
    if (!s.ok()) return Fail(s);
    *env_.out << "sextant: " << why << "; running trials checkpointed and stopped. Continue with a "
              << "raised budget: sextant resume " << run_dir_path_ << " " << raise << "\n";
    if (fleet_) FleetTeardown();
    PrintSummary();
    // The run ends with its report (DESIGN: "the run ends cleanly with a report"); a report that
    // cannot be written is said, and does not change the outcome.
    const std::string report = run_dir_path_ + "/report.html";
    auto written = WriteReport(run_dir_path_, report, absl::Now());
    if (written.ok()) {
      *env_.out << "sextant: wrote " << report << "\n";
    } else {
      *env_.err << "sextant: cannot write the report: " << written.status().message() << "\n";
    }
    return 0;
  }

  // Lets workers see `done` and exit, stops every instance, and writes the final bills.
  void FleetTeardown() {
    if (torn_down_) return;
    torn_down_ = true;
    fleet_->TerminateAll();
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (fleet_->Reap(false) > 0 && absl::Now() < deadline) {
      service_->Tick().IgnoreError();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    fleet_->Reap(/*force=*/true);
    (void)service_->WithDispatcher([&](Dispatcher&) -> absl::Status {
      SEXTANT_RETURN_IF_ERROR(store_->Begin());
      absl::Status st = fleet_->WriteCosts(store_.get());
      if (!st.ok()) {
        store_->Rollback();
        return st;
      }
      return store_->Commit();
    });
    service_->Drain();
    // A hand-started worker learns that the run is over only from its next Lease, which on a
    // slow link may still be on its way: keep answering `done` (briefly) until each has heard.
    const absl::Time told_by = absl::Now() + absl::Seconds(5);
    while (!provider_->launches() && !service_->AllToldDone() && absl::Now() < told_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  struct Local {
    pid_t pid;
    int index;
  };

  RunOptions options_;
  RunEnv env_;
  v1::ExperimentSpec spec_;
  std::string run_dir_path_;
  std::unique_ptr<RunDir> run_dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<AskTell> ask_tell_;                 // search.mode: ask_tell
  std::unique_ptr<TrialServiceImpl> trial_service_;  // search.mode: ask_tell
  ServerSecurity security_;  // TLS from --tls-dir, or loopback with the run's secrets
  RunSecrets secrets_;       // without --tls-dir
  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RunMonitor> monitor_;  // null without --metrics-port
  int port_ = 0;
  std::vector<Local> workers_;
  int respawns_left_ = 0;
  std::unique_ptr<Provider> provider_;  // with resources.pools
  std::unique_ptr<Fleet> fleet_;        // with resources.pools
  absl::Time last_cost_write_ = absl::InfinitePast();
  bool torn_down_ = false;
};

}  // namespace

void InstallStopHandlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int RunExperiment(const RunOptions& options, const RunEnv& env) {
  if (std::optional<int> rc = MaybeRunFederated(options, env)) return *rc;
  Run run(options, env);
  return run.Main();
}

}  // namespace sextant
