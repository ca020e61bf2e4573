#include "orchestrator/simulate/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/trial_command.h"
#include "orchestrator/core/warm_start.h"
#include "orchestrator/cost/placement_policy.h"
#include "orchestrator/cost/pool_offer.h"
#include "orchestrator/fleet/fleet.h"
#include "orchestrator/fleet/fleet_driver.h"
#include "orchestrator/fleet/provider.h"
#include "orchestrator/simulate/workload_model.h"

namespace sextant {
namespace {

constexpr double kEps = 1e-9;
// A simulated worker never goes silent: every loss comes from its instance (the fleet reports
// it), so leases never lapse.
constexpr double kNeverLapses = 1e12;

// The workers of a simulated cloud: each instance boots, registers its worker with the real
// Dispatcher and runs what it leases, step by step as the workload model says, on virtual
// time. It is the Provider the real Fleet launches, terminates and interrupts.
class SimulatedCloud : public Provider {
 public:
  SimulatedCloud(const v1::ExperimentSpec& spec, const WorkloadModel& model, FakeClock* clock,
                 Dispatcher* dispatcher)
      : spec_(spec),
        model_(model),
        clock_(clock),
        dispatcher_(dispatcher),
        space_(ToSearchSpace(spec)),
        metric_(ModelMetric(spec)) {}

  const char* name() const override { return "simulated"; }

  absl::StatusOr<std::string> Launch(const InstanceRequest& request) override {
    Instance inst;
    inst.request = request;
    inst.launched = Now();
    instances_.push_back(std::move(inst));
    const int64_t id = static_cast<int64_t>(instances_.size()) - 1;
    Push(Now() + absl::Seconds(model_.options().boot_seconds()), Kind::kReady, id);
    ++live_;
    max_live_ = std::max(max_live_, live_);
    return absl::StrCat(id);
  }

  // The worker stops: a trial it runs is checkpointed where it is and handed back.
  absl::Status Terminate(const std::string& handle) override {
    Instance* inst = Find(handle);
    if (inst == nullptr || inst->state == State::kGone) return absl::OkStatus();
    if (inst->state == State::kBusy) {
      HandBack(*inst, /*saved=*/Progress(*inst));
    }
    Exit(*inst, "terminated");
    return absl::OkStatus();
  }

  absl::Status Interrupt(const std::string& handle, bool notice) override {
    Instance* inst = Find(handle);
    if (inst == nullptr || inst->state == State::kGone) return absl::OkStatus();
    if (!notice) {
      // Killed: the trial loses what it did since its last checkpoint (the fleet reports the
      // worker lost and the dispatcher requeues the trial).
      if (inst->state == State::kBusy) EndWork(*inst, Checkpoint(inst->trial));
      Exit(*inst, "taken back by the market");
      return absl::OkStatus();
    }
    if (inst->state != State::kBusy) {
      Exit(*inst, "stopped at its notice");
      return absl::OkStatus();
    }
    if (inst->leaving) return absl::OkStatus();
    // The trial writes its checkpoint (when the notice leaves time for it) and the worker
    // hands it back once written, then exits.
    inst->leaving = true;
    ++inst->gen;  // no more steps
    const double warning = inst->request.preempt_notice_seconds;
    const double write = model_.options().checkpoint_seconds();
    inst->saved = warning >= write ? Progress(*inst) : Checkpoint(inst->trial);
    Push(Now() + absl::Seconds(std::min(write, warning)), Kind::kHandBack,
         &*inst - instances_.data(), inst->gen);
    return absl::OkStatus();
  }

  InstanceStatus Poll(const std::string& handle) override {
    const Instance* inst = Find(handle);
    if (inst == nullptr || inst->state == State::kGone) {
      return InstanceStatus::Gone(inst == nullptr ? "unknown" : inst->gone_why);
    }
    return inst->state == State::kBooting ? InstanceStatus::Pending() : InstanceStatus::Running();
  }

  // Handles the workers' events up to `until`, in time order, moving the clock to each.
  absl::Status RunUntil(absl::Time until) {
    while (!events_.empty() && events_.top().at <= until) {
      const Event e = events_.top();
      events_.pop();
      if (e.at > clock_->Now()) clock_->Advance(e.at - clock_->Now());
      ++events_handled_;
      SEXTANT_RETURN_IF_ERROR(Handle(e));
    }
    if (until > clock_->Now()) clock_->Advance(until - clock_->Now());
    return absl::OkStatus();
  }

  // Idle workers ask for work again (a real worker's lease retry).
  absl::Status LeaseIdle() {
    const std::vector<int64_t> idle(idle_.begin(), idle_.end());
    for (int64_t id : idle) SEXTANT_RETURN_IF_ERROR(AskForWork(instances_[id]));
    return absl::OkStatus();
  }

  bool Quiet() const { return events_.empty() && live_ == 0; }
  int64_t events_handled() const { return events_handled_; }
  int max_live() const { return max_live_; }
  double busy_seconds() const { return busy_seconds_; }
  double lost_seconds() const { return lost_seconds_; }

 private:
  enum class State { kBooting, kIdle, kBusy, kGone };
  enum class Kind { kReady, kStep, kHandBack };
  struct Instance {
    InstanceRequest request;
    State state = State::kBooting;
    absl::Time launched;
    std::string gone_why;
    int64_t worker = 0;
    // The attempt it runs.
    int64_t trial = 0;
    int attempt = 0;
    double target = 1;      // fidelity units to reach (1 without a fidelity)
    double progress = 0;    // units done at step_start
    double next_step = 0;   // the units the next step ends at
    absl::Time step_start;  // when progress was last exact
    absl::Time attempt_start;
    double spu = 0;  // virtual seconds per unit for its parameters
    Params params;
    int64_t sequence = 0;
    uint64_t gen = 0;  // bumped whenever scheduled events of the attempt no longer apply
    bool leaving = false;
    double saved = 0;  // units checkpointed at the notice
  };
  struct Event {
    absl::Time at;
    uint64_t seq;
    Kind kind;
    int64_t instance;
    uint64_t gen;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  // The metric the model reports: the objective's, or with several objectives the first that
  // is not built in (cost and trial_seconds come from the ledger and the clock).
  static std::string ModelMetric(const v1::ExperimentSpec& spec) {
    const ObjectiveSet objectives(spec);
    for (const v1::Objective& o : objectives.objectives()) {
      if (o.metric() != kCostMetric && o.metric() != kTrialSecondsMetric) return o.metric();
    }
    return objectives.objectives()[0].metric();
  }

  absl::Time Now() const { return clock_->Now(); }
  void Push(absl::Time at, Kind kind, int64_t instance, uint64_t gen = 0) {
    events_.push(Event{at, next_seq_++, kind, instance, gen});
  }

  Instance* Find(const std::string& handle) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(handle, &id) || id < 0 || id >= static_cast<int64_t>(instances_.size()))
      return nullptr;
    return &instances_[id];
  }

  double Checkpoint(int64_t trial) const {
    auto it = checkpoints_.find(trial);
    return it == checkpoints_.end() ? 0 : it->second;
  }

  // Units done by now (the attempt's start-up counts for nothing).
  double Progress(const Instance& inst) const {
    if (Now() <= inst.step_start) return inst.progress;
    return std::min(inst.next_step,
                    inst.progress + absl::ToDoubleSeconds(Now() - inst.step_start) / inst.spu);
  }

  absl::Status Handle(const Event& e) {
    Instance& inst = instances_[e.instance];
    switch (e.kind) {
      case Kind::kReady:
        return Ready(inst);
      case Kind::kStep:
        if (inst.state != State::kBusy || e.gen != inst.gen) return absl::OkStatus();
        return Step(inst);
      case Kind::kHandBack:
        if (inst.state != State::kBusy || e.gen != inst.gen) return absl::OkStatus();
        HandBack(inst, inst.saved);
        Exit(inst, "handed its trial back at the notice and stopped");
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::Status Ready(Instance& inst) {
    if (inst.state != State::kBooting) return absl::OkStatus();
    v1::RegisterRequest reg;
    reg.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    reg.set_region(inst.request.region);
    reg.set_pool(inst.request.pool);
    reg.set_launch_token(inst.request.launch_token);
    SEXTANT_ASSIGN_OR_RETURN(v1::RegisterResponse r, dispatcher_->Register(reg));
    inst.worker = r.worker_id();
    inst.state = State::kIdle;
    return AskForWork(inst);
  }

  absl::Status AskForWork(Instance& inst) {
    SEXTANT_ASSIGN_OR_RETURN(v1::LeaseResponse lease, dispatcher_->Lease(inst.worker));
    return Take(inst, lease);
  }

  // What a worker does with a lease answer: start the assignment, wait, or exit when done.
  absl::Status Take(Instance& inst, const v1::LeaseResponse& lease) {
    const int64_t id = &inst - instances_.data();
    if (lease.has_assignment()) {
      idle_.erase(id);
      return Start(inst, lease.assignment());
    }
    if (lease.done()) {
      idle_.erase(id);
      Exit(inst, "the run is over");
      return absl::OkStatus();
    }
    inst.state = State::kIdle;
    idle_.insert(id);
    return absl::OkStatus();
  }

  absl::Status Start(Instance& inst, const v1::Assignment& a) {
    const TrialRow* row = dispatcher_->trials().row(a.trial_id());
    if (row == nullptr) return absl::InternalError("lease of an unknown trial");
    SEXTANT_ASSIGN_OR_RETURN(inst.params, ParamsFromJson(row->params_json, space_));
    inst.state = State::kBusy;
    inst.trial = a.trial_id();
    inst.attempt = a.attempt();
    inst.target = a.fidelity_target() > 0 ? a.fidelity_target() : model_.max_fidelity();
    inst.spu = model_.seconds_per_unit(inst.params);
    inst.progress = a.resume() ? Checkpoint(inst.trial) : 0;
    inst.sequence = 0;
    inst.leaving = false;
    inst.attempt_start = Now();
    inst.step_start = Now() + absl::Seconds(model_.options().attempt_overhead_seconds());
    ++inst.gen;
    ScheduleStep(inst);
    return absl::OkStatus();
  }

  void ScheduleStep(Instance& inst) {
    inst.next_step = std::min(std::floor(inst.progress + kEps) + 1, inst.target);
    Push(inst.step_start + absl::Seconds((inst.next_step - inst.progress) * inst.spu), Kind::kStep,
         &inst - instances_.data(), inst.gen);
  }

  // A step ends: the trial checkpoints on its period, reports, and goes on, or its attempt ends.
  absl::Status Step(Instance& inst) {
    busy_seconds_ += absl::ToDoubleSeconds(Now() - inst.step_start);
    inst.progress = inst.next_step;
    inst.step_start = Now();
    const double every = model_.options().checkpoint_every();
    if (std::fabs(std::remainder(inst.progress, every)) < kEps ||
        inst.progress >= inst.target - kEps) {
      checkpoints_[inst.trial] = inst.progress;
    }
    v1::ReportRequest report;
    report.set_worker_id(inst.worker);
    v1::Measurement* m = report.add_measurements();
    m->set_trial_id(inst.trial);
    m->set_attempt(inst.attempt);
    m->set_sequence(++inst.sequence);
    m->set_elapsed_seconds(absl::ToDoubleSeconds(Now() - inst.attempt_start));
    const double fidelity = model_.has_fidelity() ? inst.progress : 1;
    (*m->mutable_metrics())[metric_] = model_.Value(inst.params, inst.trial, fidelity);
    if (model_.has_fidelity()) {
      (*m->mutable_metrics())[spec_.search().fidelity().name()] = inst.progress;
    }
    SEXTANT_ASSIGN_OR_RETURN(v1::TrialAction action, dispatcher_->Report(report));
    if (action == v1::ACTION_CONTINUE && inst.progress < inst.target - kEps) {
      ScheduleStep(inst);
      return absl::OkStatus();
    }
    v1::CompleteRequest done;
    done.set_worker_id(inst.worker);
    done.set_trial_id(inst.trial);
    done.set_attempt(inst.attempt);
    if (action != v1::ACTION_CONTINUE) done.set_stopped_for(action);
    done.set_lease_next(true);
    ++inst.gen;
    inst.trial = 0;
    SEXTANT_ASSIGN_OR_RETURN(v1::CompleteResponse r, dispatcher_->Complete(done));
    return Take(inst, r.next());
  }

  // The attempt ends off its steps: units past `saved` are lost.
  void EndWork(Instance& inst, double saved) {
    const double progress = Progress(inst);
    const double ran = absl::ToDoubleSeconds(Now() - std::max(inst.step_start, inst.attempt_start));
    busy_seconds_ += std::max(0.0, ran);
    lost_seconds_ += std::max(0.0, progress - saved) * inst.spu +
                     std::min(absl::ToDoubleSeconds(Now() - inst.attempt_start),
                              model_.options().attempt_overhead_seconds());
    checkpoints_[inst.trial] = std::max(saved, Checkpoint(inst.trial));
    ++inst.gen;
  }

  // The worker hands its trial back as preempted, checkpointed at `saved` units.
  void HandBack(Instance& inst, double saved) {
    EndWork(inst, saved);
    v1::CompleteRequest done;
    done.set_worker_id(inst.worker);
    done.set_trial_id(inst.trial);
    done.set_attempt(inst.attempt);
    done.set_preempted(true);
    // Aborted when the attempt is no longer this worker's (the dispatcher moved on).
    (void)dispatcher_->Complete(done);
    inst.trial = 0;
  }

  void Exit(Instance& inst, const std::string& why) {
    if (inst.state == State::kGone) return;
    inst.state = State::kGone;
    inst.gone_why = why;
    ++inst.gen;
    idle_.erase(&inst - instances_.data());
    --live_;
  }

  const v1::ExperimentSpec& spec_;
  const WorkloadModel& model_;
  FakeClock* clock_;
  Dispatcher* dispatcher_;
  SearchSpace space_;
  std::string metric_;
  std::vector<Instance> instances_;
  std::set<int64_t> idle_;                 // registered workers waiting for work
  std::map<int64_t, double> checkpoints_;  // trial -> units its checkpoint holds
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_seq_ = 0;
  int64_t events_handled_ = 0;
  int live_ = 0;
  int max_live_ = 0;
  double busy_seconds_ = 0;
  double lost_seconds_ = 0;
};

}  // namespace

// Not thread-safe; one run.
class Simulator::Impl {
 public:
  Impl(v1::ExperimentSpec spec, Catalog catalog) : spec_(std::move(spec)), model_(spec_) {
    catalog_ = std::move(catalog);
  }

  absl::Status Init(const SimulationSettings& settings);
  absl::StatusOr<SimulationResult> Run();
  absl::Status WriteTo(Store* store) const;

 private:
  double Elapsed() const { return absl::ToDoubleSeconds(clock_.Now() - start_); }
  // One round of the orchestrator's loop: leases and the fleet (RunCore::Round), then idle
  // workers ask for work.
  absl::Status Round();
  // Runs rounds every tick until no trial runs or the wind-down is over.
  absl::Status WindDown(const std::string& why);
  absl::Status Finish(v1::RunState state, const std::string& why);
  absl::Status Event(const std::string& kind, const std::string& message);

  v1::ExperimentSpec spec_;
  WorkloadModel model_;
  Catalog catalog_;
  FakeClock clock_;
  absl::Time start_;
  absl::Duration tick_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<SimulatedCloud> cloud_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<RunCore> core_;  // drives fleet_ (declared after it: destroyed first)
  SimulationResult result_;
  bool ran_ = false;
  bool has_scheduler_ = false;
  double wind_down_seconds_ = 0;
  // The cloud's lost work when the run began to stop: what the stop itself then cuts off
  // (trials handed back unfinished) is not work that preemptions made it redo.
  std::optional<double> lost_before_stop_;
};

absl::Status Simulator::Impl::Init(const SimulationSettings& settings) {
  if (spec_.resources().pools_size() == 0) {
    return absl::InvalidArgumentError("simulate needs resources.pools (region, instance, market)");
  }
  if (settings.placement)
    spec_.mutable_resources()->mutable_placement()->set_policy(*settings.placement);
  if (spec_.resources().placement().policy().empty()) {
    spec_.mutable_resources()->mutable_placement()->set_policy("spot_first");
  }
  SEXTANT_RETURN_IF_ERROR(ParsePlacementMode(spec_.resources().placement().policy()).status());
  catalog_.OverrideSpotInterruptions(settings.spot_rate_per_day, settings.notice_seconds,
                                     settings.notice_probability);
  start_ = clock_.Now();
  tick_ = absl::Seconds(model_.options().tick_seconds());
  SEXTANT_ASSIGN_OR_RETURN(store_, Store::Open(":memory:", /*create=*/true));
  SEXTANT_RETURN_IF_ERROR(store_->PutMeta("spec", spec_.SerializeAsString()));
  SEXTANT_RETURN_IF_ERROR(store_->PutTimeMeta("started_at", absl::ToUnixMicros(start_) / 1e6));
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler,
                           MakeRunSampler(spec_, store_.get(), absl::ToUnixSeconds(start_)));
  DispatcherOptions options;
  options.lease_seconds = kNeverLapses;
  std::unique_ptr<Scheduler> scheduler = MakeScheduler(spec_);
  has_scheduler_ = scheduler != nullptr;
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<Dispatcher> dispatcher,
                           Dispatcher::Create(spec_, store_.get(), std::move(sampler), &clock_,
                                              options, std::move(scheduler)));
  // The simulation runs on one thread, and its workers call the dispatcher directly, as they
  // must from inside the fleet's round (Launch registers the instance's worker), where the
  // core's lock is already held.
  cloud_ = std::make_unique<SimulatedCloud>(spec_, model_, &clock_, dispatcher.get());
  core_ = std::make_unique<RunCore>(std::move(dispatcher), &clock_, start_);
  FleetOptions fo;
  fo.connect = "simulated";
  fo.logs_dir = "simulated";
  fo.seed = model_.options().seed() * 0x9e3779b97f4a7c15ull + 17;
  // What stopping takes here: the fleet sees the budget once a round, and a trial then writes
  // its checkpoint before it hands itself back.
  wind_down_seconds_ = model_.options().tick_seconds() + model_.options().checkpoint_seconds();
  fo.wind_down_seconds = wind_down_seconds_;
  auto fleet = Fleet::Create(spec_, catalog_, cloud_.get(), &clock_, fo);
  if (!fleet.ok()) return absl::InvalidArgumentError(fleet.status().message());
  fleet_ = *std::move(fleet);
  FleetDriverOptions dopts;
  dopts.cost_write_period = absl::InfiniteDuration();  // once, at the end
  core_->AttachPools(std::make_unique<FleetDriver>(fleet_.get(), store_.get(), &clock_, dopts));
  return Event("simulation",
               absl::StrCat("placement ", spec_.resources().placement().policy(), ", ",
                            spec_.resources().pools_size(), " pools, seed ",
                            model_.options().seed(), ", objective ", model_.options().objective(),
                            ", a round every ", model_.options().tick_seconds(), " s"));
}

absl::Status Simulator::Impl::Event(const std::string& kind, const std::string& message) {
  return WithinTransaction(store_.get(), [&]() -> absl::Status {
    return store_->AddEvent(absl::ToUnixMicros(clock_.Now()) / 1e6, kind, 0, message);
  });
}

absl::Status Simulator::Impl::Round() {
  SEXTANT_RETURN_IF_ERROR(core_->Round().status());
  return cloud_->LeaseIdle();
}

absl::Status Simulator::Impl::WindDown(const std::string& why) {
  lost_before_stop_ = cloud_->lost_seconds();
  SEXTANT_RETURN_IF_ERROR(core_->BeginWindDown(why));  // notices every busy instance
  const absl::Time deadline = clock_.Now() + absl::Seconds(wind_down_seconds_ + 5);
  while (core_->running() > 0 && clock_.Now() < deadline) {
    SEXTANT_RETURN_IF_ERROR(cloud_->RunUntil(std::min(deadline, clock_.Now() + tick_)));
    SEXTANT_RETURN_IF_ERROR(Round());
  }
  return Finish(v1::RUN_BUDGET_EXHAUSTED, why);
}

absl::Status Simulator::Impl::Finish(v1::RunState state, const std::string& why) {
  if (!lost_before_stop_) lost_before_stop_ = cloud_->lost_seconds();
  SEXTANT_RETURN_IF_ERROR(core_->End(state));
  core_->TerminatePools();
  core_->ReapPools(/*force=*/true);
  result_.state = state;
  result_.message = why;
  return core_->WritePoolCosts();
}

// Long because it is `sextant run`'s loop on virtual time: rounds every tick, between them the
// workers' events, and the same endings (done, wall time, budget, stuck).
absl::StatusOr<SimulationResult> Simulator::Impl::Run() {
  if (ran_) return absl::FailedPreconditionError("the simulation has already run");
  ran_ = true;
  const auto real_start = std::chrono::steady_clock::now();
  const double wall = spec_.budget().max_wall_time_seconds();
  int64_t rounds = 0;
  int quiet_rounds = 0;
  while (true) {
    // The orchestrator's step, with the idle workers' asks between its round and its verdict.
    SEXTANT_ASSIGN_OR_RETURN(Ending e, core_->Step([&] { return cloud_->LeaseIdle(); }));
    ++rounds;
    if (e.end == RunEnd::kOutOfBudget) {
      SEXTANT_RETURN_IF_ERROR(WindDown(e.why));
      break;
    }
    if (e.end != RunEnd::kGoesOn) {
      if (e.end == RunEnd::kCompleted && has_scheduler_) e.why = "the schedule finished";
      const bool finished = e.end == RunEnd::kCompleted || e.end == RunEnd::kEpsilonExhausted;
      SEXTANT_RETURN_IF_ERROR(Finish(finished ? v1::RUN_COMPLETED : v1::RUN_FAILED, e.why));
      break;
    }
    // Nothing runs, boots or is due, and the fleet starts nothing: the run cannot go on.
    quiet_rounds = cloud_->Quiet() ? quiet_rounds + 1 : 0;
    if (quiet_rounds > 3) {
      SEXTANT_RETURN_IF_ERROR(
          Finish(v1::RUN_FAILED, "nothing more can run: no instance and no work"));
      break;
    }
    absl::Time next = clock_.Now() + tick_;
    if (wall > 0) next = std::min(next, start_ + absl::Seconds(wall));
    SEXTANT_RETURN_IF_ERROR(cloud_->RunUntil(next));
  }
  const DispatchStats stats = core_->Stats();
  CostBreakdown b = fleet_->ledger().Breakdown();
  result_.cost = b.total;
  result_.wall_seconds = Elapsed();
  result_.trials = stats.created;
  auto completed = stats.by_state.find(TrialStateName(v1::COMPLETED));
  result_.completed = completed == stats.by_state.end() ? 0 : completed->second;
  result_.best_value = stats.best_value;
  result_.best_trial = stats.best_trial;
  result_.events = cloud_->events_handled() + rounds;
  result_.max_live_instances = cloud_->max_live();
  result_.busy_seconds = cloud_->busy_seconds();
  result_.lost_seconds = lost_before_stop_.value_or(cloud_->lost_seconds());
  result_.stopped_seconds = cloud_->lost_seconds() - result_.lost_seconds;
  result_.max_trials = stats.max_trials;
  result_.finished = stats.finished;
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> trials, store_->LoadTrials());
  int started = 0;
  for (const TrialRow& t : trials) {
    started += t.attempts > 0;
    result_.paused += t.paused;
    result_.units_done += model_.has_fidelity() ? t.fidelity : 0;
  }
  if (!model_.has_fidelity()) result_.units_done = stats.finished;
  result_.cut_off = std::max(0, started - stats.finished - result_.paused);
  result_.never_started = std::max(0, stats.max_trials - started);
  for (const FleetPoolStats& p : fleet_->pool_stats()) {
    PoolSummary s{p.name, p.region, p.market, 0, p.launched, p.preemptions};
    s.cost = b.by_pool.count(p.name) ? b.by_pool[p.name] : 0;
    result_.preemptions += p.preemptions;
    result_.interruptions += p.interruptions;
    result_.pools.push_back(std::move(s));
  }
  for (const v1::Pool& p : spec_.resources().pools()) {
    absl::StatusOr<PoolOffer> offer = ResolvePoolOffer(catalog_, p);
    if (!offer.ok()) continue;
    result_.overshoot_allowance += offer->offer.billing.price_per_second *
                                   offer->offer.billing.increment_seconds *
                                   std::min(p.max_instances(), result_.max_live_instances);
  }
  result_.real_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  nlohmann::json summary = {{"cost", result_.cost},
                            {"wall_seconds", result_.wall_seconds},
                            {"preemptions", result_.preemptions},
                            {"lost_seconds", result_.lost_seconds},
                            {"stopped_seconds", result_.stopped_seconds},
                            {"events", result_.events},
                            {"simulated", true}};
  SEXTANT_RETURN_IF_ERROR(store_->PutMeta("simulation", summary.dump()));
  SEXTANT_RETURN_IF_ERROR(
      store_->PutTimeMeta("finished_at", absl::ToUnixMicros(clock_.Now()) / 1e6));
  return result_;
}

absl::Status Simulator::Impl::WriteTo(Store* store) const {
  if (!ran_) return absl::FailedPreconditionError("WriteTo before Run");
  return store_->CopyTo(store);
}

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::~Simulator() = default;

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(v1::ExperimentSpec spec,
                                                             Catalog catalog,
                                                             SimulationSettings settings) {
  auto impl = std::make_unique<Impl>(std::move(spec), std::move(catalog));
  SEXTANT_RETURN_IF_ERROR(impl->Init(settings));
  return std::unique_ptr<Simulator>(new Simulator(std::move(impl)));
}

absl::StatusOr<SimulationResult> Simulator::Run() { return impl_->Run(); }

absl::Status Simulator::WriteTo(Store* store) const { return impl_->WriteTo(store); }

}  // namespace sextant
