#include "orchestrator/search/search_run.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/redactor.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "orchestrator/ask_tell/ask_tell.h"
#include "orchestrator/ask_tell/run_address.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/study_cost.h"
#include "orchestrator/core/study_privacy.h"
#include "orchestrator/core/warm_start.h"
#include "orchestrator/cost/budget_guard.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/federated/federated_run.h"
#include "orchestrator/fleet/fleet.h"
#include "orchestrator/fleet/fleet_driver.h"
#include "orchestrator/fleet/providers.h"
#include "orchestrator/monitor/run_monitor.h"
#include "orchestrator/report/report.h"
#include "orchestrator/search/federated_study.h"
#include "orchestrator/search/local_workers.h"
#include "orchestrator/search/progress.h"
#include "orchestrator/service/admin_service.h"
#include "orchestrator/service/trial_service.h"
#include "orchestrator/service/worker_service.h"
#include "rpc/host_address.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

// How long running trials get to checkpoint and stop when the budget is spent: the grace each
// worker gives its trial after the notice (--preempt-notice) and the fleet's projection.
constexpr double kWindDownSeconds = 10;
// How often the loop wakes: the dispatcher's tick, the fleet's round, the progress line.
constexpr absl::Duration kLoopPeriod = absl::Milliseconds(50);

// The search loop of one session: the dispatcher, the server and the workers, with their
// lifetimes tied together. Long-lived objects are members so that teardown happens in one
// place.
class SearchRun {
 public:
  explicit SearchRun(RunSession& session)
      : session_(session),
        options_(session.options()),
        env_(session.env()),
        spec_(session.spec()),
        run_dir_path_(session.path()),
        run_dir_(&session.run_dir()),
        store_(&session.store()) {}

  absl::Status Main() {
    absl::Status s = Prepare();
    if (s.ok()) s = Loop();
    if (session_.monitor()) {
      if (service_) PublishMetrics(core_->Stats());
      session_.monitor()->RunEnded();
    }
    Teardown();
    return s;
  }

 private:
  // Builds the dispatcher and starts the server.
  absl::Status Prepare() {
    SEXTANT_RETURN_IF_ERROR(KeepSlurmPartitions());
    auto sampler =
        MakeRunSampler(spec_, store_, absl::ToDoubleSeconds(env_.clock->Now() - absl::UnixEpoch()));
    if (!sampler.ok()) return absl::InvalidArgumentError(sampler.status().message());
    DispatcherOptions dopts;
    dopts.lease_seconds = options_.lease_seconds;
    dopts.heartbeat_seconds = options_.heartbeat_seconds;
    dopts.logs_dir = std::filesystem::absolute(run_dir_->logs_dir()).string();
    dopts.checkpoints_dir = std::filesystem::absolute(run_dir_->checkpoints_dir()).string();
    dopts.working_dir = spec_.trial().working_dir();
    for (auto [flag, value] :
         {std::pair{"--tls-dir", session_.tls_dir()},
          std::pair{"--slurm-partition", options_.slurm_partition},
          std::pair{"--slurm-spot-partition", options_.slurm_spot_partition}}) {
      if (value.empty()) continue;
      dopts.federated_trial_flags.push_back(flag);
      dopts.federated_trial_flags.push_back(value);
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
      SEXTANT_ASSIGN_OR_RETURN(dopts.held_leases, LoadHeldLeases(*store_));
    }
    SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<Dispatcher> dispatcher,
                             Dispatcher::Create(spec_, store_, *std::move(sampler), env_.clock,
                                                dopts, MakeScheduler(spec_)));
    if (spec_.budget().has_max_epsilon()) {
      privacy_budget_.emplace(spec_, run_dir_path_);
      dispatcher->rules().create_limit = [this](const TrialBook& trials) {
        return privacy_budget_->CreateLimit(trials.size(), [&](int64_t id) {
          const TrialRow* row = trials.row(id);
          return row != nullptr && (row->state == v1::COMPLETED || row->state == v1::PRUNED ||
                                    row->state == v1::FAILED);
        });
      };
    }
    if (FederatedOnPools(spec_)) {
      study_.emplace(spec_, run_dir_path_, store_);
      SEXTANT_RETURN_IF_ERROR(study_->Plan(*dispatcher));
    }
    core_ = std::make_unique<RunCore>(std::move(dispatcher), env_.clock, env_.clock->Now());
    return StartServer();
  }

  absl::Status StartServer() {
    std::map<std::string, std::string> trial_env(spec_.trial().env().begin(),
                                                 spec_.trial().env().end());
    service_ = std::make_unique<WorkerServiceImpl>(
        core_.get(), Redactor::FromEnvironment(trial_env),
        WorkerSessions(/*random=*/nullptr, env_.clock), env_.clock);
    admin_ = std::make_unique<AdminServiceImpl>(core_.get(), session_.security().auth());
    if (AskTellMode()) {
      // Nothing serves yet: the ask/tell core keeps the dispatcher, which the trial service
      // uses only while it holds the run core.
      SEXTANT_ASSIGN_OR_RETURN(ask_tell_,
                               AskTell::Create(&core_->Hold().dispatcher(), store_, env_.clock));
      trial_service_ = std::make_unique<TrialServiceImpl>(core_.get(), ask_tell_.get(), env_.clock);
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, MakeServerCredentials(session_.security()), &port_);
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
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen));
    }
    return absl::OkStatus();
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

  // How the workers this run starts dial it.
  WorkerCredentials WorkerDial() const {
    WorkerCredentials c;
    c.tls_dir = session_.tls_dir();
    if (c.tls_dir.empty()) c.secret_file = session_.secrets().worker_file;
    return c;
  }

  // Local workers reach a wildcard listener on loopback (which the certificates name).
  std::string Target() const { return DialTarget(options_.listen, port_); }

  // The command line of local worker index.
  std::vector<std::string> WorkerArgv(int index) const {
    std::vector<std::string> argv = {session_.worker_binary(),
                                     "--connect",
                                     Target(),
                                     "--region",
                                     "local",
                                     "--pool",
                                     "local",
                                     "--launch-token",
                                     absl::StrCat("local-", index),
                                     "--exit-with-parent",
                                     "--preempt-notice",
                                     absl::StrCat(kWindDownSeconds)};
    WorkerDial().AppendFlags(&argv);
    return argv;
  }

  // Starts what takes the trials: ask/tell clients, the fleet's instances, or n local workers
  // (the run fails only when none starts). Returns n, the workers asked for.
  absl::StatusOr<int> StartWorkers() {
    int n = options_.workers > 0 ? options_.workers : std::max(1, spec_.search().max_concurrent());
    if (study_) {
      const int slots = study_->slots();
      if (slots < n) {
        *env_.out << "sextant: the pools' max_instances hold " << slots << " trial"
                  << (slots == 1 ? "" : "s") << "' participants at once; running " << slots
                  << " of search.max_concurrent " << n << "\n";
      }
      n = std::min(n, slots);
    }
    workers_.AllowRespawns(3 * n);
    if (trial_service_) {
      SEXTANT_RETURN_IF_ERROR(AnnounceAskTell());
      return n;
    }
    if (spec_.resources().pools_size() > 0 && !spec_.has_federation()) {
      SEXTANT_RETURN_IF_ERROR(StartFleet());
      return n;
    }
    absl::Status launched;
    for (int i = 0; i < n; ++i) {
      if (absl::Status s = workers_.Launch(i); !s.ok()) {
        if (i + 1 < n || !workers_.empty()) *env_.err << "sextant: " << s.message() << "\n";
        launched = s;
      }
    }
    if (workers_.empty()) return launched;
    return n;
  }

  absl::Status Loop() {
    SEXTANT_ASSIGN_OR_RETURN(const int n, StartWorkers());
    ProgressReporter progress(env_.out, options_.tty, env_.clock, ObjectiveMetricsLabel(spec_));
    progress.Resumed(core_->Stats());
    if (options_.resume && !trial_service_ && core_->Finished()) {
      *env_.out << "sextant: " << run_dir_path_ << " has no trial left to run (it has its "
                << spec_.search().max_trials() << " trials, search.max_trials); give it room "
                << "with `sextant resume " << run_dir_path_ << " --max-trials N`\n";
    }
    if (!trial_service_) {
      *env_.out << "sextant: running " << spec_.name() << " in " << run_dir_path_ << " with " << n
                << " workers (listening on " << Target() << ")\n"
                << std::flush;
    }
    while (true) {
      env_.clock->SleepFor(kLoopPeriod);
      absl::StatusOr<Ending> step = core_->Step();
      service_->ServeWaiting();
      if (trial_service_) trial_service_->Tick();
      absl::Status fatal = step.status();
      if (fatal.ok()) fatal = service_->fatal_error();
      if (fatal.ok() && trial_service_) fatal = trial_service_->fatal_error();
      if (!fatal.ok()) {
        progress.Finish(core_->Stats());
        (void)core_->End(v1::RUN_FAILED, std::string(fatal.message()));
        return fatal;
      }
      DispatchStats stats = core_->Stats();
      progress.Update(stats);
      PublishMetrics(stats);
      switch (step->end) {
        case RunEnd::kFailed:
          return EndFailed(progress, step->why);
        case RunEnd::kCompleted:
        case RunEnd::kEpsilonExhausted:
          return EndFinished(progress, step->end);
        default:
          break;
      }
      int sig = session_.stop_signal();
      if (sig == 0 && admin_->drain_requested()) sig = SIGINT;  // AdminService.Drain
      if (sig != 0) return EndInterrupted(progress);
      if (step->end == RunEnd::kOutOfBudget) return WindDown(progress, step->why, step->raise);
      if (step->end == RunEnd::kCannotRun) {
        progress.Finish(core_->Stats());
        (void)core_->End(v1::RUN_FAILED, step->why);
        return absl::UnavailableError(absl::StrCat(step->why, "; see ", run_dir_->logs_dir()));
      }
      if (study_) {
        if (std::optional<absl::Status> end = StudyCostStep(progress)) return *end;
      }
      if (trial_service_ || fleet_) continue;  // no local workers: clients or instances
      workers_.Reap(/*replace=*/true);
      if (workers_.empty()) {
        const std::string why = absl::StrCat("every local worker has exited; see ",
                                             run_dir_->logs_dir(), "/worker-*.log");
        (void)core_->End(v1::RUN_FAILED, why);
        return absl::UnavailableError(why);
      }
    }
  }

  // Every trial has ended (RunEnd::kCompleted or kEpsilonExhausted).
  absl::Status EndFinished(ProgressReporter& progress, RunEnd end) {
    // The last trial may have ended after the loop's statistics: draw them anew.
    progress.Finish(core_->Stats());
    if (study_) SEXTANT_RETURN_IF_ERROR(ReadStudyCosts().status());
    if (end == RunEnd::kEpsilonExhausted) return EpsilonExhausted();
    SEXTANT_RETURN_IF_ERROR(core_->End(v1::RUN_COMPLETED));
    ReleaseBestModelOnly();
    PrintSummary();
    return absl::OkStatus();
  }

  // A signal or AdminService.Drain: running trials are cancelled, and a resume goes on.
  absl::Status EndInterrupted(ProgressReporter& progress) {
    progress.Finish(core_->Stats());
    SEXTANT_RETURN_IF_ERROR(core_->End(v1::RUN_INTERRUPTED));
    *env_.out
        << "sextant: interrupted; running trials were cancelled. Continue with: sextant resume "
        << run_dir_path_ << "\n";
    return absl::CancelledError("interrupted");
  }

  bool AskTellMode() const { return spec_.search().mode() == v1::Search::ASK_TELL; }

  // Records where clients reach this ask/tell run (RUN_DIR/address) and says so.
  absl::Status AnnounceAskTell() {
    RunAddress a;
    a.address = Target();
    a.run_id = ask_tell_->run_id();
    a.pid = getpid();
    const WorkerCredentials dial = WorkerDial();
    a.tls_dir = dial.tls_dir;
    a.secret_file = dial.secret_file;
    SEXTANT_RETURN_IF_ERROR(WriteRunAddress(run_dir_path_, a));
    *env_.out << "sextant: serving ask/tell for " << spec_.name() << " in " << run_dir_path_
              << " on " << a.address << " (run " << a.run_id << ", lease "
              << AskTellLeaseSeconds(spec_) << " s)\n"
              << "sextant: ask with `sextant ask " << run_dir_path_ << "`, tell with `sextant tell "
              << run_dir_path_ << " TRIAL --value V`; clients dial " << a.address
              << (a.tls_dir.empty() ? " with the bearer token in " + a.secret_file
                                    : " with TLS and the worker certificate in " + a.tls_dir)
              << "\n"
              << std::flush;
    return absl::OkStatus();
  }

  // The objective's metric, or the objectives' joined by commas.
  void PublishMetrics(const DispatchStats& stats) {
    RunMonitor* monitor = session_.monitor();
    if (monitor == nullptr) return;
    MetricsSnapshot m = monitor->Snapshot();
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
    monitor->Publish(m);
  }

  // The workers that can take a trial now and those running one: in a pool run the workers
  // of live instances (not retired ones), otherwise the local worker processes.
  void CountWorkers(const DispatchStats& stats, MetricsSnapshot& m) {
    if (std::optional<std::pair<int, int>> pool = core_->PoolWorkers()) {
      std::tie(m.workers, m.busy_workers) = *pool;
      return;
    }
    m.workers = workers_.size();
    auto running = stats.by_state.find(TrialStateName(v1::RUNNING));
    m.busy_workers = running == stats.by_state.end() ? 0 : std::min(running->second, m.workers);
  }

  // Records the orchestrator's own CPU time (not its workers' or trials') in the store's meta
  // (orchestrator_cpu_seconds), where the benchmarks read it; it is no news to a user.
  void RecordCpu() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec / 1e6;
    RunCore::Held held = core_->Hold();  // the store is the dispatcher's too
    (void)store_->PutMeta("orchestrator_cpu_seconds", absl::StrCat(cpu));
  }

  void PrintSummary() {
    RecordCpu();
    auto results = LoadResults(run_dir_path_);
    if (results.ok()) *env_.out << ResultsToTable(*results, 10, run_dir_path_);
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
    const absl::Time deadline = env_.clock->Now() + absl::Seconds(3);
    bool stopping = session_.stop_signal() != 0;
    if (stopping) {
      workers_.Signal(SIGINT);
    }
    while (!workers_.empty() && env_.clock->Now() < deadline) {
      core_->ExpireLeases().IgnoreError();
      service_->ServeWaiting();
      workers_.Reap(/*replace=*/false);
      env_.clock->SleepFor(absl::Milliseconds(20));
    }
    workers_.Signal(SIGINT);
    const absl::Time kill_at = env_.clock->Now() + absl::Seconds(2);
    while (!workers_.empty() && env_.clock->Now() < kill_at) {
      workers_.Reap(false);
      env_.clock->SleepFor(absl::Milliseconds(20));
    }
    workers_.Signal(SIGKILL);
    workers_.Reap(false);
    service_->Drain();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // A federated search on pools, once a second: the trials' bills (each trial's run bills its
  // own participants) become the search's cost rows, so that results, the report and the
  // budget see them; once what is spent, plus one more round of every running trial at the
  // dearest round seen so far, would pass budget.max_cost, the study winds down (BUDGET_EXHAUSTED;
  // the trials pause at their checkpoints, and a resume with a raised cap goes on). Returns how the
  // run ended once it has.
  std::optional<absl::Status> StudyCostStep(ProgressReporter& progress) {
    if (env_.clock->Now() - costs_read_at_ < absl::Seconds(1)) return std::nullopt;
    costs_read_at_ = env_.clock->Now();
    absl::StatusOr<bool> over = ReadStudyCosts();
    if (!over.ok()) return over.status();
    if (!*over) return std::nullopt;
    return WindDown(progress,
                    absl::StrCat("budget.max_cost reached (", spec_.budget().max_cost(),
                                 "): one more round of the running trials could pass it"),
                    "--max-cost AMOUNT");
  }

  // StudyCostStep's reading, against the trials' states as of now (FederatedStudy::Record).
  absl::StatusOr<bool> ReadStudyCosts() {
    RunCore::Held held = core_->Hold();
    return study_->Record(held.dispatcher());
  }

  // Builds the provider and the fleet that launches, bills and scales the spec's pools.
  absl::Status StartFleet() {
    std::vector<CatalogError> errors;
    absl::StatusOr<Catalog> catalog = LoadCatalog(spec_.resources().catalog(), &errors);
    if (!catalog.ok()) return absl::InvalidArgumentError(catalog.status().message());
    SEXTANT_ASSIGN_OR_RETURN(
        provider_, MakePoolsProvider(spec_.resources(),
                                     {session_.worker_binary(), env_.launcher,
                                      options_.slurm_partition, options_.slurm_spot_partition}));
    FleetOptions fo;
    fo.connect = Target();
    fo.logs_dir = std::filesystem::absolute(run_dir_->logs_dir()).string();
    fo.credentials = WorkerDial();
    fo.time_scale = options_.time_scale;
    fo.seed = spec_.search().seed();
    fo.wind_down_seconds = kWindDownSeconds;
    if (options_.resume) SEXTANT_RETURN_IF_ERROR(LoadPriorBills(fo));
    auto fleet = Fleet::Create(spec_, *std::move(catalog), provider_.get(), env_.clock, fo);
    if (!fleet.ok()) return absl::InvalidArgumentError(fleet.status().message());
    fleet_ = *std::move(fleet);
    core_->AttachPools(std::make_unique<FleetDriver>(fleet_.get(), store_, env_.clock));
    if (!provider_->launches()) {  // static pools: their workers are started by hand
      *env_.out << "sextant: start workers with: sextant-worker --connect " << Target()
                << " --region REGION --pool POOL"
                << (options_.tls_dir.empty() ? " --secret-file " + session_.secrets().worker_file
                                             : " --tls-dir DIR --tls-name NAME")
                << "\n";
    }
    return absl::OkStatus();
  }

  // A resumed run keeps the bills and pool counters of its earlier sessions.
  absl::Status LoadPriorBills(FleetOptions& fo) {
    SEXTANT_ASSIGN_OR_RETURN(fo.prior_costs, store_->LoadCosts());
    auto started = store_->GetTimeMeta("started_at");
    if (started.ok() && *started) {
      fo.epoch_offset_seconds =
          std::max(0.0, absl::ToUnixMicros(env_.clock->Now()) / 1e6 - **started);
    }
    auto fleet = store_->GetMeta("fleet");
    if (fleet.ok() && *fleet) fo.prior_pools = PoolsFromFleetMeta(**fleet);
    return absl::OkStatus();
  }

  // Every trial the study's privacy allowed has ended: the run ends EPSILON_EXHAUSTED, with its
  // report, and a resume with a raised cap goes on.
  absl::Status EpsilonExhausted() {
    const std::string why = absl::StrFormat(
        "budget.max_epsilon %g reached: the study has spent epsilon %.4g; one more trial could "
        "bring it to %.4g",
        privacy_budget_->max_epsilon(), privacy_budget_->committed(), privacy_budget_->with_next());
    SEXTANT_RETURN_IF_ERROR(core_->End(v1::RUN_EPSILON_EXHAUSTED, why));
    *env_.out << "sextant: " << why << ". Continue with a raised budget: sextant resume "
              << run_dir_path_ << " --max-epsilon EPSILON\n";
    ReleaseBestModelOnly();
    PrintSummary();
    return absl::OkStatus();
  }

  // Random stopping releases the best trial's model only: the others' are deleted once the
  // study has ended and the best is known.
  void ReleaseBestModelOnly() {
    if (!RandomStoppingOf(spec_)) return;
    const int64_t best = core_->Stats().best_trial;
    const int64_t trials = core_->trial_count();
    const int deleted = DeleteUnreleasedModels(run_dir_path_, best, trials);
    (void)store_->AddEvent(absl::ToUnixMicros(env_.clock->Now()) / 1e6, "random_stopping", 0,
                           absl::StrCat("released trial ", best, "'s model; deleted the models of ",
                                        deleted, " other trials"));
    *env_.out << "sextant: random stopping released trial " << best
              << "'s model only; the models of " << deleted << " other trials were deleted\n";
  }

  // The budget is spent: nothing new starts, running trials get the preemption-style notice
  // (SIGTERM to their worker, through the provider for instances) so that they write their
  // checkpoint and hand themselves back; those still running after the wind-down are
  // cancelled. The run ends BUDGET_EXHAUSTED with its report: OK.
  // The failure policy ended the run (Dispatcher::FailureStop): running trials are cancelled
  // and the run is FAILED; the error quotes why, and the caller exits 1.
  absl::Status EndFailed(ProgressReporter& progress, const std::string& why) {
    progress.Finish(core_->Stats());
    SEXTANT_RETURN_IF_ERROR(core_->End(v1::RUN_FAILED, why));
    PrintSummary();
    return absl::AbortedError(absl::StrCat(
        "the run failed: ", why, ". Each trial's output is in ", run_dir_->logs_dir(),
        "; `sextant results ", run_dir_path_, "` lists every error. Once the cause is fixed, ",
        "`sextant resume ", run_dir_path_, "` goes on (--max-trials N for room)"));
  }

  absl::Status WindDown(ProgressReporter& progress, const std::string& why,
                        const std::string& raise) {
    progress.Finish(core_->Stats());
    SEXTANT_RETURN_IF_ERROR(core_->BeginWindDown(why));  // notices the pools' instances
    if (!fleet_) {
      workers_.Signal(SIGTERM);
    }
    const absl::Time deadline = env_.clock->Now() + absl::Seconds(kWindDownSeconds + 5);
    while (core_->running() > 0 && env_.clock->Now() < deadline) {
      env_.clock->SleepFor(absl::Milliseconds(50));
      core_->Round().IgnoreError();
      service_->ServeWaiting();
      if (!fleet_) workers_.Reap(/*replace=*/false);
    }
    SEXTANT_RETURN_IF_ERROR(core_->End(v1::RUN_BUDGET_EXHAUSTED));
    if (study_) SEXTANT_RETURN_IF_ERROR(ReadStudyCosts().status());  // the last bills
    *env_.out << "sextant: " << why << "; running trials checkpointed and stopped. Continue with a "
              << "raised budget: sextant resume " << run_dir_path_ << " " << raise << "\n";
    if (fleet_) FleetTeardown();
    PrintSummary();
    // The run ends with its report (DESIGN: "the run ends cleanly with a report"); a report that
    // cannot be written is said, and does not change the outcome.
    const std::string report = run_dir_path_ + "/report.html";
    auto written = WriteReport(run_dir_path_, report, env_.clock->Now());
    if (written.ok()) {
      *env_.out << "sextant: wrote " << report << "\n";
    } else {
      *env_.err << "sextant: cannot write the report: " << written.status().message() << "\n";
    }
    return absl::OkStatus();
  }

  // Lets workers see `done` and exit, stops every instance, and writes the final bills.
  void FleetTeardown() {
    if (torn_down_) return;
    torn_down_ = true;
    // The run core drives the pools under its lock: workers' calls reach them through the
    // dispatcher (each attempt's start and end is charged to its trial as it happens).
    core_->TerminatePools();
    const absl::Time deadline = env_.clock->Now() + absl::Seconds(5);
    while (core_->ReapPools(/*force=*/false) > 0 && env_.clock->Now() < deadline) {
      core_->ExpireLeases().IgnoreError();
      service_->ServeWaiting();
      env_.clock->SleepFor(absl::Milliseconds(50));
    }
    core_->ReapPools(/*force=*/true);
    (void)core_->WritePoolCosts();
    service_->Drain();
    // A hand-started worker learns that the run is over only from its next Lease, which on a
    // slow link may still be on its way: keep answering `done` (briefly) until each has heard.
    const absl::Time told_by = env_.clock->Now() + absl::Seconds(5);
    while (!provider_->launches() && !service_->AllToldDone() && env_.clock->Now() < told_by) {
      env_.clock->SleepFor(absl::Milliseconds(20));
    }
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  RunSession& session_;
  RunOptions options_;  // the session's, with the Slurm partitions the run keeps
  const RunEnv env_;
  const v1::ExperimentSpec& spec_;
  const std::string run_dir_path_;
  RunDir* const run_dir_;
  Store* const store_;
  std::unique_ptr<RunCore> core_;
  std::optional<StudyPrivacyBudget> privacy_budget_;  // budget.max_epsilon
  std::optional<FederatedStudy> study_;               // a federated search on pools
  absl::Time costs_read_at_ = absl::InfinitePast();   // when StudyCostStep last read the bills
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<AskTell> ask_tell_;                // search.mode: ask_tell
  std::unique_ptr<TrialServiceImpl> trial_service_;  // search.mode: ask_tell
  std::unique_ptr<AdminServiceImpl> admin_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  LocalWorkers workers_{env_.launcher, std::bind_front(&SearchRun::WorkerArgv, this),
                        run_dir_->logs_dir(), env_.err};
  std::unique_ptr<Provider> provider_;  // with resources.pools
  std::unique_ptr<Fleet> fleet_;        // with resources.pools (driven by core_)
  bool torn_down_ = false;
};

}  // namespace

absl::Status RunSearch(RunSession& session) { return SearchRun(session).Main(); }

int RunExperiment(const RunOptions& options, const RunEnv& env) {
  absl::StatusOr<std::unique_ptr<RunSession>> session = RunSession::Open(options, env);
  if (!session.ok()) return ExitCode(session.status(), *env.err);
  if (options.external_participants && !(*session)->federated()) {
    return ExitCode(absl::InvalidArgumentError(
                        "--external-participants applies to a federated run (a federation: block "
                        "without search:); a search's workers join with sextant-worker --connect"),
                    *env.err);
  }
  absl::Status end = (*session)->federated() ? RunFederated(**session) : RunSearch(**session);
  return ExitCode(end, *env.err);
}

}  // namespace sextant
