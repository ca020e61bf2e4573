#include "orchestrator/simulate/simulator.h"

#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/rung_record.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/trial_command.h"
#include "orchestrator/core/warm_start.h"
#include "orchestrator/cost/autoscaler.h"
#include "orchestrator/cost/budget_guard.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/cost/ledger.h"
#include "orchestrator/cost/placement_policy.h"
#include "orchestrator/cost/pool_offer.h"
#include "orchestrator/simulate/workload_model.h"

namespace sextant {
namespace {

constexpr double kEps = 1e-9;
constexpr double kEpoch = 1'700'000'000;  // the FakeClock's start, as unix seconds

enum class Ev { kReady, kStep, kNotice, kKill, kRelease, kRenew, kDeadline };

struct Event {
  double t;
  uint64_t seq;
  Ev type;
  int64_t a;
  int64_t gen;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct PoolRt {
  v1::Pool spec;
  Offer offer;
  InstanceType type;
  CostOwner owner;
  std::set<int64_t> idle;       // ready, idle, not draining
  std::deque<int64_t> waiting;  // trials placed here that no instance has taken yet
  int live = 0;
  int booting = 0;
  int64_t reservation = 0;  // the current reservation's ledger id (reserved pools)
  bool closed = false;      // a reservation lapsed for want of budget
  PoolSummary summary;
};

struct Inst {
  int64_t ledger_id = 0;
  int pool = 0;
  bool ready = false, dead = false, draining = false;
  int64_t trial = 0;
  double launched = 0, ready_at = 0, idle_since = 0;
  int64_t gen = 0;
  double notice_seconds = 0;
};

struct TrialRt {
  TrialRow row;
  Params params;
  double progress = 0, checkpoint = 0, reported = 0, target = 0, next_step = 0;
  double boundary_time = 0;  // when `progress` was last exact (after the attempt overhead)
  double attempt_start = 0;
  int64_t inst = -1;
  int pool = -1;
  int64_t gen = 0;
  int64_t seq = 0;
  std::optional<double> objective;
  double spu = 0;  // virtual seconds per unit of fidelity for this trial's parameters
  // Kept as attempts start and end so that no step scans every attempt of the run.
  size_t attempt_rec = 0;       // index in attempts_ of the latest attempt (attempts >= 1)
  double finished_seconds = 0;  // wall time of the attempts that have ended
};

struct AttemptRec {
  int64_t trial;
  int attempt;
  int64_t worker;
  double start, end = 0;
  std::string outcome;
};

}  // namespace

// Not thread-safe; one run.
class Simulator::Impl {
 public:
  Impl(v1::ExperimentSpec spec, Catalog catalog, SimulationSettings settings)
      : spec_(std::move(spec)),
        objectives_(spec_),
        uses_cost_(objectives_.Mentions(kCostMetric) || spec_.search().cost_aware()),
        catalog_(std::move(catalog)),
        settings_(std::move(settings)),
        model_(spec_),
        ledger_(&clock_),
        guard_(spec_.budget().has_max_cost() ? std::optional<double>(spec_.budget().max_cost())
                                             : std::nullopt),
        placement_(PlacementOptions{}),
        autoscaler_(AutoscalerOptions{}),
        interruptions_(model_.options().seed() * 0x9e3779b97f4a7c15ull + 17) {}

  absl::Status Init();
  absl::StatusOr<SimulationResult> Run();
  absl::Status WriteTo(Store* store) const;

 private:
  double Now() const { return now_; }
  void Push(double t, Ev type, int64_t a, int64_t gen = 0) {
    events_.push(Event{t, next_seq_++, type, a, gen});
  }
  void Log(const std::string& kind, int64_t trial, const std::string& message) {
    log_.push_back(EventRow{0, kEpoch + now_, kind, trial, message});
  }
  bool CanCreate() const {
    return !sampler_exhausted_ && static_cast<int>(trials_.size()) < spec_.search().max_trials();
  }
  double Minimised(double v) const {
    return objectives_.objectives()[0].goal() == v1::Objective::MAXIMIZE ? -v : v;
  }
  // The metric the workload model reports: the objective's, or with several objectives the
  // first that is not built in (cost and trial_seconds come from the ledger and the clock).
  std::string ModelMetric() const {
    for (const v1::Objective& o : objectives_.objectives()) {
      if (o.metric() != kCostMetric && o.metric() != kTrialSecondsMetric) return o.metric();
    }
    return objectives_.objectives()[0].metric();
  }
  // The trial's objectives and constraints now, from the model's value and the built-ins.
  TrialEvaluation EvaluateNow(const TrialRt& t) const {
    std::map<std::string, double> metrics;
    if (t.objective) metrics[ModelMetric()] = *t.objective;
    return objectives_.Evaluate(metrics, TrialCostNow(t.row.id), TrialSecondsNow(t));
  }
  double TrialCostNow(int64_t trial) const {
    if (!uses_cost_) return 0;
    const CostBreakdown b = ledger_.Breakdown();
    auto it = b.by_trial.find(trial);
    return it == b.by_trial.end() ? 0 : it->second;
  }
  double TrialSecondsNow(const TrialRt& t) const {
    if (t.row.attempts == 0) return 0;
    const AttemptRec& a = attempts_[t.attempt_rec];
    return a.end > 0 ? t.finished_seconds : t.finished_seconds + ((kEpoch + now_) - a.start);
  }
  // The trial's current attempt ends now with `outcome`.
  void CloseAttempt(TrialRt& t, const std::string& outcome) {
    AttemptRec& a = attempts_[t.attempt_rec];
    a.end = kEpoch + now_;
    a.outcome = outcome;
    t.finished_seconds += a.end - a.start;
  }
  // The ledger's committed spend, read only when something depends on it (it prices every
  // bill of the run, so reading it on every event would grow with the fleet).
  double CommittedIfBudgeted() const { return guard_.max_cost() ? ledger_.Committed() : 0.0; }
  double Tail() const {
    return draining_ ? 0
                     : autoscaler_.options().idle_timeout_seconds +
                           autoscaler_.options().release_window_seconds;
  }
  double Overhead() const { return model_.options().attempt_overhead_seconds(); }
  // The autoscaler in force: under budget pressure idle instances go as soon as their paid
  // increment allows, without waiting for the idle timeout.
  Autoscaler Scaler() const {
    return draining_
               ? Autoscaler(AutoscalerOptions{0, autoscaler_.options().release_window_seconds})
               : autoscaler_;
  }
  ScalingInstance View(int64_t id) const {
    const Inst& in = insts_[id];
    const absl::Time base = clock_.Now() - absl::Seconds(now_);
    return ScalingInstance{id,
                           in.pool,
                           in.trial == 0 && in.ready && !in.dead,
                           base + absl::Seconds(in.idle_since),
                           base + absl::Seconds(in.launched),
                           pools_[in.pool].offer.billing};
  }
  // Virtual seconds at which the idle instance will be released.
  double IdleRelease(int64_t id) const {
    const absl::Time base = clock_.Now() - absl::Seconds(now_);
    return absl::ToDoubleSeconds(Scaler().ReleaseAt(View(id), clock_.Now()) - base);
  }

  double ReservationCost(size_t pool) const {
    const PoolRt& p = pools_[pool];
    return p.offer.billing.price_per_second * p.offer.reservation_seconds * p.spec.max_instances();
  }

  void Handle(const Event& e);
  void Dispatch();
  std::vector<PoolCandidate> Candidates() const;
  double Projected() const;
  double JobExtra(int pool, int64_t idle_inst, double duration) const;
  int64_t CreateTrial(std::string* why);
  void StartAttempt(int64_t trial, int64_t inst);
  void ScheduleStep(TrialRt& t);
  void OnStep(int64_t trial, int64_t gen);
  void EndAttempt(TrialRt& t, const std::string& outcome);
  void FreeInstance(int64_t inst);
  void Preempt(int64_t inst, bool saved_at_notice, bool count);
  void Launch(int pool);
  void Terminate(int64_t inst);
  void Scale();
  void ReviewIdle(int64_t inst, int64_t gen);
  void Renew(int pool);
  void AddRung(TrialRt& t, const std::string& decision);
  void Stop(const std::string& state, const std::string& why);
  void CheckFinished();
  double CurrentProgress(const TrialRt& t) const;
  // The sampler's observation of t now (values, feasibility and cost), recorded in t.row too.
  Observation Observed(TrialRt& t, Observation::Outcome outcome) {
    const TrialEvaluation ev = EvaluateNow(t);
    if (objectives_.multi()) t.row.values = ev.values;
    t.row.feasible = ev.feasible();
    t.row.seconds = TrialSecondsNow(t);
    return objectives_.ToObservation(t.params, outcome, ev, TrialCostNow(t.row.id));
  }
  std::vector<Observation> ModelHistory() const;

  v1::ExperimentSpec spec_;
  ObjectiveSet objectives_;
  bool uses_cost_ = false;  // an objective or constraint is `cost`, or the search is cost_aware
  Catalog catalog_;
  SimulationSettings settings_;
  WorkloadModel model_;
  FakeClock clock_;
  double now_ = 0;
  Ledger ledger_;
  BudgetGuard guard_;
  PlacementPolicy placement_;
  Autoscaler autoscaler_;
  InterruptionSampler interruptions_;
  std::unique_ptr<Sampler> sampler_;
  WarmStart warm_;  // search.warm_start's priors, recorded with the run
  std::unique_ptr<Scheduler> scheduler_;
  bool bohb_ = false;

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_seq_ = 0;
  std::vector<PoolRt> pools_;
  std::vector<Inst> insts_;
  std::vector<TrialRt> trials_;  // trials_[id - 1]
  std::vector<Observation> history_;
  std::deque<int64_t> requeue_;
  std::vector<AttemptRec> attempts_;
  std::vector<MeasurementRow> measurements_;
  std::vector<EventRow> log_;
  int active_ = 0;  // trials running or placed and waiting for an instance
  int live_ = 0;
  bool sampler_exhausted_ = false;
  bool draining_ = false;
  bool refused_ = false;  // the last dispatch stopped on the budget or the wall time
  std::string refused_why_;
  std::string stall_why_;
  bool finished_ = false;
  SimulationResult result_;
  double deadline_ = 0;
};

absl::Status Simulator::Impl::Init() {
  if (spec_.resources().pools_size() == 0) {
    return absl::InvalidArgumentError("simulate needs resources.pools (region, instance, market)");
  }
  PlacementOptions popts;
  std::string policy = settings_.placement.value_or(spec_.resources().placement().policy());
  if (policy.empty()) policy = "spot_first";
  SEXTANT_ASSIGN_OR_RETURN(popts.mode, ParsePlacementMode(policy));
  popts.preemption_cooldown_seconds = spec_.resources().placement().preemption_cooldown_seconds();
  placement_ = PlacementPolicy(popts);
  AutoscalerOptions aopts;
  aopts.idle_timeout_seconds = spec_.resources().idle_timeout_seconds();
  autoscaler_ = Autoscaler(aopts);
  for (const v1::Pool& p : spec_.resources().pools()) {
    SEXTANT_ASSIGN_OR_RETURN(PoolOffer resolved, ResolvePoolOffer(catalog_, p));
    PoolRt rt;
    rt.spec = p;
    rt.offer = resolved.offer;
    if (rt.offer.market == Market::kSpot) {
      if (settings_.spot_rate_per_day)
        rt.offer.interruption.rate_per_day = *settings_.spot_rate_per_day;
      if (settings_.notice_seconds)
        rt.offer.interruption.notice_seconds = *settings_.notice_seconds;
      if (settings_.notice_probability)
        rt.offer.interruption.notice_probability = *settings_.notice_probability;
    }
    rt.type = resolved.type;
    rt.owner = resolved.owner;
    rt.summary = PoolSummary{p.name(), p.region(), MarketName(rt.offer.market), 0, 0, 0};
    pools_.push_back(std::move(rt));
  }
  SEXTANT_ASSIGN_OR_RETURN(warm_, ReadWarmStart(spec_));
  SEXTANT_ASSIGN_OR_RETURN(sampler_, MakeSampler(spec_, warm_.Observations(objectives_)));
  scheduler_ = MakeScheduler(spec_);
  bohb_ = spec_.search().scheduler() == v1::Search::BOHB;
  if (scheduler_) Log("schedule", 0, scheduler_->Describe());
  Log("simulation", 0,
      absl::StrCat("placement ", PlacementModeName(popts.mode), ", ", pools_.size(),
                   " pools, seed ", model_.options().seed(), ", objective ",
                   model_.options().objective()));
  return absl::OkStatus();
}

std::vector<Observation> Simulator::Impl::ModelHistory() const {
  return BestFidelityHistory(
      *scheduler_, static_cast<int>(ToSearchSpace(spec_).params.size()), objectives_.multi(),
      static_cast<int64_t>(trials_.size()),
      [this](int64_t id) -> const Params& { return trials_[id - 1].params; },
      [this](int64_t id) { return trials_[id - 1].row.state == v1::RUNNING; },
      [this](int64_t id) { return EvaluateNow(trials_[id - 1]).violations; });
}

int64_t Simulator::Impl::CreateTrial(std::string* why) {
  const int64_t number = static_cast<int64_t>(trials_.size());
  std::vector<Observation> model_history;
  if (bohb_ && scheduler_) model_history = ModelHistory();
  std::vector<std::string> notes;
  SampleRequest request{
      number,
      bohb_ && scheduler_ ? absl::MakeConstSpan(model_history) : absl::MakeConstSpan(history_),
      &notes};
  request.budget_used = BudgetUsed(spec_, CommittedIfBudgeted(), number);
  absl::StatusOr<Params> params = sampler_->Ask(request);
  // The same events as the Dispatcher's (CreateTrialInTx).
  for (const std::string& note : notes) Log("sampler_note", 0, note);
  if (!params.ok()) {
    sampler_exhausted_ = true;
    *why = std::string(params.status().message());
    const bool out_of_range = params.status().code() == absl::StatusCode::kOutOfRange;
    Log(out_of_range ? "sampler_exhausted" : "sampler_error", 0, *why);
    return 0;
  }
  TrialRt t;
  t.params = *std::move(params);
  t.row.id = number + 1;
  t.row.state = v1::PENDING;
  t.row.params_json = ParamsToJson(t.params);
  t.row.created_at = kEpoch + now_;
  t.spu = model_.seconds_per_unit(t.params);
  trials_.push_back(std::move(t));
  history_.emplace_back().params = trials_.back().params;
  return number + 1;
}

std::vector<PoolCandidate> Simulator::Impl::Candidates() const {
  std::vector<PoolCandidate> out;
  for (const PoolRt& p : pools_) {
    PoolCandidate c;
    c.name = p.spec.name();
    c.region = p.spec.region();
    c.market = p.offer.market;
    c.price_per_second = p.offer.billing.price_per_second;
    c.instance = p.type;
    c.free_slots = p.closed ? 0
                            : static_cast<int>(p.idle.size()) + p.spec.max_instances() - p.live +
                                  p.booting - static_cast<int>(p.waiting.size());
    c.prepaid_idle = p.offer.market == Market::kReserved && p.reservation != 0;
    out.push_back(std::move(c));
  }
  return out;
}

double Simulator::Impl::CurrentProgress(const TrialRt& t) const {
  if (now_ <= t.boundary_time) return t.progress;
  return std::min(t.next_step, t.progress + (now_ - t.boundary_time) / t.spu);
}

// Everything already under way, priced to its end: running attempts to their target plus the
// idle tail, idle instances to their release, booting instances to the end of the job that
// waits for them, and launches still needed for waiting jobs.
double Simulator::Impl::Projected() const {
  const absl::Time base = clock_.Now() - absl::Seconds(now_);
  auto at = [&](double t) { return base + absl::Seconds(t); };
  double total = 0;
  std::vector<std::deque<double>> waiting(pools_.size());
  for (size_t p = 0; p < pools_.size(); ++p) {
    for (int64_t id : pools_[p].waiting) {
      const TrialRt& t = trials_[id - 1];
      waiting[p].push_back(Overhead() + (t.target - t.checkpoint) * t.spu);
    }
  }
  for (const Inst& in : insts_) {
    if (in.dead) continue;
    double until;
    if (in.trial != 0) {
      const TrialRt& t = trials_[in.trial - 1];
      until = std::max(now_, t.boundary_time) + (t.target - CurrentProgress(t)) * t.spu + Tail();
    } else if (!in.ready) {
      double d = 0;
      if (!waiting[in.pool].empty()) {
        d = waiting[in.pool].front();
        waiting[in.pool].pop_front();
      }
      until = in.ready_at + d + Tail();
    } else {
      until = IdleRelease(static_cast<int64_t>(&in - insts_.data()));
    }
    total += ledger_.ExtraUntil(in.ledger_id, at(until));
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (pools_[p].offer.market == Market::kReserved) {
      // A reservation is made with the pool's first launch: charged whole, once.
      if (pools_[p].reservation == 0 && !waiting[p].empty()) total += ReservationCost(p);
      continue;
    }
    for (double d : waiting[p]) {
      total +=
          Ledger::LaunchCost(pools_[p].offer.billing, model_.options().boot_seconds() + d + Tail());
    }
  }
  return total;
}

double Simulator::Impl::JobExtra(int pool, int64_t idle_inst, double duration) const {
  const PoolRt& p = pools_[pool];
  if (p.offer.market == Market::kReserved) {
    return p.reservation == 0 && p.waiting.empty() ? ReservationCost(pool) : 0;
  }
  if (idle_inst < 0) {
    return Ledger::LaunchCost(p.offer.billing, model_.options().boot_seconds() + duration + Tail());
  }
  const Inst& in = insts_[idle_inst];
  const absl::Time base = clock_.Now() - absl::Seconds(now_);
  const absl::Time release = base + absl::Seconds(IdleRelease(idle_inst));
  const double with =
      ledger_.ExtraUntil(in.ledger_id, clock_.Now() + absl::Seconds(duration + Tail()));
  return std::max(0.0, with - ledger_.ExtraUntil(in.ledger_id, release));
}

// Long because it is the dispatch protocol of orchestrator/core/dispatcher.cc in one place: the
// next job, its pool, the budget and wall-time checks, and only then the trial and the start.
void Simulator::Impl::Dispatch() {
  if (finished_) return;
  const int max_concurrent = std::max(1, spec_.search().max_concurrent());
  refused_ = false;
  while (active_ < max_concurrent) {
    int64_t trial = 0;
    Job job;
    bool fresh = false, requeued = false;
    double target = 1;
    if (!requeue_.empty()) {
      trial = requeue_.front();
      target = trials_[trial - 1].target;
      requeued = true;
    } else if (scheduler_) {
      job = scheduler_->NextJob(CanCreate());
      if (job.kind == Job::Kind::kWait || job.kind == Job::Kind::kDone) break;
      target = job.target;
      if (job.kind == Job::Kind::kPromote)
        trial = job.trial;
      else
        fresh = true;
    } else {
      if (!CanCreate()) break;
      fresh = true;
    }
    PlacementRequest req;
    const v1::TrialResources& need = spec_.resources().per_trial();
    req.gpus = need.gpus();
    req.gpu_memory_gb = need.gpu_memory_gb();
    req.cpus = need.cpus();
    req.checkpoints = need.checkpoints();
    req.top_rung = scheduler_ && target >= model_.max_fidelity() - kEps;
    Placement pl = placement_.Place(req, Candidates(), clock_.Now());
    if (!pl.placed()) {
      stall_why_ = pl.reason;
      break;
    }
    PoolRt& pool = pools_[pl.pool];
    const int64_t idle = pool.idle.empty() ? -1 : *pool.idle.begin();
    const double from = trial ? trials_[trial - 1].checkpoint : 0;
    const double spu = trial ? trials_[trial - 1].spu : model_.seconds_per_unit();
    const double duration = Overhead() + (target - from) * spu;
    const double start_in = idle >= 0 ? 0 : model_.options().boot_seconds();
    if (deadline_ > 0 && now_ + start_in + duration > deadline_) {
      refused_ = true;
      refused_why_ = "max_wall_time: the next job would end after the deadline";
      break;
    }
    std::string why;
    if (guard_.max_cost() &&
        !guard_.Allows(ledger_.Committed(), Projected(), JobExtra(pl.pool, idle, duration), &why)) {
      if (refused_why_ != why) Log("budget_refused", trial, why);
      refused_ = true;
      refused_why_ = why;
      if (!draining_) {
        draining_ = true;
        std::vector<int64_t> idle_now;
        for (const PoolRt& p : pools_)
          idle_now.insert(idle_now.end(), p.idle.begin(), p.idle.end());
        for (int64_t id : idle_now) ReviewIdle(id, insts_[id].gen);
      }
      break;
    }
    if (fresh) {
      std::string none;
      trial = CreateTrial(&none);
      if (trial == 0) break;
      if (scheduler_) scheduler_->OnStart(trial, job);
    } else if (requeued) {
      requeue_.pop_front();
    } else {
      TrialRt& t = trials_[trial - 1];
      t.row.paused = false;
      t.row.target = target;
      AddRung(t, "promoted");
      Log("trial_promoted", trial, PromotionMessage(spec_, target));
      scheduler_->OnStart(trial, job);
    }
    TrialRt& t = trials_[trial - 1];
    t.target = target;
    t.row.target = scheduler_ ? target : 0;
    t.pool = pl.pool;
    ++active_;
    Log("placement", trial, pl.reason);
    if (idle >= 0) {
      StartAttempt(trial, idle);
    } else {
      pool.waiting.push_back(trial);
      t.row.state = v1::PENDING;
    }
  }
  Scale();
}

void Simulator::Impl::Scale() {
  std::vector<ScalingPool> sp;
  for (const PoolRt& p : pools_) {
    ScalingPool s;
    s.min_instances = p.closed ? 0 : p.spec.min_instances();
    s.max_instances = p.closed ? 0 : p.spec.max_instances();
    s.live = p.live;
    s.booting = p.booting;
    s.waiting = static_cast<int>(p.waiting.size());
    s.prepaid = p.offer.market == Market::kReserved;
    sp.push_back(s);
  }
  ScalingPlan plan = autoscaler_.Plan(clock_.Now(), sp, {});
  for (size_t p = 0; p < plan.launch.size(); ++p) {
    if (plan.launch[p] > 0) {
      Log("autoscale", 0,
          absl::StrCat("pool ", pools_[p].spec.name(), ": launching ", plan.launch[p], " for ",
                       sp[p].waiting, " waiting jobs (", sp[p].live, " live)"));
    }
    for (int i = 0; i < plan.launch[p]; ++i) Launch(static_cast<int>(p));
  }
}

void Simulator::Impl::Launch(int pool) {
  PoolRt& p = pools_[pool];
  if (p.offer.market == Market::kReserved && p.reservation == 0) {
    p.reservation = ledger_.Reserve(p.owner, p.offer.billing, p.spec.max_instances(),
                                    p.offer.reservation_seconds);
    Push(now_ + p.offer.reservation_seconds, Ev::kRenew, pool);
    Log("reservation", 0,
        absl::StrCat("pool ", p.spec.name(), ": ", p.spec.max_instances(),
                     " instances reserved for ", p.offer.reservation_seconds, " s"));
  }
  Inst in;
  in.pool = pool;
  in.ledger_id = ledger_.Launch(p.owner, p.offer.billing,
                                p.offer.market == Market::kReserved ? p.reservation : 0);
  in.launched = now_;
  in.ready_at = now_ + model_.options().boot_seconds();
  const int64_t id = static_cast<int64_t>(insts_.size());
  if (p.offer.market == Market::kSpot) {
    Interruption i = interruptions_.Sample(p.offer.interruption);
    if (std::isfinite(i.after_seconds)) {
      if (i.notice) {
        in.notice_seconds = i.notice_seconds;
        Push(now_ + i.after_seconds - i.notice_seconds, Ev::kNotice, id);
      }
      Push(now_ + i.after_seconds, Ev::kKill, id);
    }
  }
  insts_.push_back(in);
  ++p.live;
  ++p.booting;
  ++p.summary.launched;
  ++live_;
  result_.max_live_instances = std::max(result_.max_live_instances, live_);
  Push(in.ready_at, Ev::kReady, id);
}

void Simulator::Impl::Terminate(int64_t id) {
  Inst& in = insts_[id];
  if (in.dead) return;
  in.dead = true;
  PoolRt& p = pools_[in.pool];
  p.idle.erase(id);
  --p.live;
  if (!in.ready) --p.booting;
  --live_;
  (void)ledger_.Terminate(in.ledger_id);
}

void Simulator::Impl::StartAttempt(int64_t trial, int64_t inst) {
  TrialRt& t = trials_[trial - 1];
  Inst& in = insts_[inst];
  pools_[in.pool].idle.erase(inst);
  in.trial = trial;
  ++in.gen;
  t.inst = inst;
  t.row.attempts += 1;
  t.row.state = v1::RUNNING;
  t.progress = t.checkpoint;
  t.attempt_start = now_;
  t.boundary_time = now_ + Overhead();
  t.seq = 0;
  ++t.gen;
  (void)ledger_.StartTrial(in.ledger_id, trial);
  t.attempt_rec = attempts_.size();
  attempts_.push_back(AttemptRec{trial, t.row.attempts, inst + 1, kEpoch + now_, 0, ""});
  ScheduleStep(t);
}

void Simulator::Impl::ScheduleStep(TrialRt& t) {
  t.next_step = std::min(std::floor(t.progress + kEps) + 1, t.target);
  Push(t.boundary_time + (t.next_step - t.progress) * t.spu, Ev::kStep, t.row.id, t.gen);
}

void Simulator::Impl::AddRung(TrialRt& t, const std::string& decision) {
  if (scheduler_) AppendRung(t.row, t.objective, decision);
}

// Long because each way a step can end the attempt (pruned, paused, completed) needs its own
// bookkeeping, mirroring Dispatcher::FinishScheduledInTx.
void Simulator::Impl::OnStep(int64_t trial, int64_t gen) {
  TrialRt& t = trials_[trial - 1];
  if (gen != t.gen || t.inst < 0) return;
  result_.busy_seconds += (now_ - t.boundary_time);
  t.progress = t.next_step;
  t.boundary_time = now_;
  if (std::fabs(std::remainder(t.progress, model_.options().checkpoint_every())) < kEps ||
      t.progress >= t.target - kEps) {
    t.checkpoint = t.progress;
  }
  Decision d = Decision::Continue();
  if (t.progress > t.reported + kEps) {
    t.reported = t.progress;
    const double fidelity = model_.has_fidelity() ? t.progress : 0;
    const double v = model_.Value(t.params, trial, model_.has_fidelity() ? t.progress : 1);
    t.objective = v;
    nlohmann::json m = {{ModelMetric(), v}};
    if (model_.has_fidelity()) m[spec_.search().fidelity().name()] = t.progress;
    measurements_.push_back(
        MeasurementRow{trial, t.row.attempts, ++t.seq, now_ - t.attempt_start, m.dump()});
    if (model_.has_fidelity()) t.row.fidelity = std::max(t.row.fidelity, fidelity);
    if (scheduler_ && objectives_.multi()) {
      const TrialEvaluation ev = EvaluateNow(t);
      if (ev.ok()) {
        d = scheduler_->OnReportValues(trial, t.progress, objectives_.Minimised(ev.values),
                                       ev.feasible());
      }
    } else if (scheduler_) {
      d = scheduler_->OnReport(trial, t.progress, Minimised(v));
    }
  }
  const bool at_target = t.progress >= t.target - kEps;
  if (d.kind == Decision::Kind::kStop) {
    t.row.state = v1::PRUNED;
    t.row.finished_at = kEpoch + now_;
    t.row.value = t.objective;
    AddRung(t, "pruned");
    history_[trial - 1] = Observed(t, Observation::Outcome::kPruned);
    scheduler_->OnEnd(trial, false);
    Log("trial_pruned", trial, d.reason);
    EndAttempt(t, "PRUNED");
  } else if (scheduler_ && (d.kind == Decision::Kind::kPause ||
                            (at_target && t.target < model_.max_fidelity() - kEps))) {
    t.row.state = v1::PENDING;
    t.row.paused = true;
    t.checkpoint = t.progress;
    AddRung(t, "paused");
    history_[trial - 1] = Observed(t, Observation::Outcome::kPruned);
    scheduler_->OnEnd(trial, true);
    EndAttempt(t, "PAUSED");
  } else if (at_target) {
    const TrialEvaluation ev = EvaluateNow(t);
    if (!ev.ok()) {
      t.row.state = v1::FAILED;
      t.row.error = ev.error;
      t.row.finished_at = kEpoch + now_;
      history_[trial - 1].outcome = Observation::Outcome::kFailed;
      if (scheduler_) scheduler_->OnEnd(trial, false);
      Log("trial_failed", trial, ev.error);
      EndAttempt(t, "FAILED");
      return;
    }
    t.row.state = v1::COMPLETED;
    t.row.value = ev.values[0];
    t.row.finished_at = kEpoch + now_;
    history_[trial - 1] = Observed(t, Observation::Outcome::kCompleted);
    for (const std::string& missing : ev.missing_constraints) {
      Log("constraint_missing", trial,
          absl::StrCat("the trial never reported the constraint metric '", missing,
                       "'; it is infeasible"));
    }
    if (scheduler_) {
      AddRung(t, "completed");
      scheduler_->OnEnd(trial, true);
    }
    ++result_.completed;
    if (!objectives_.multi() && t.row.feasible &&
        (!result_.best_value || Minimised(*t.objective) < Minimised(*result_.best_value))) {
      result_.best_value = t.objective;
      result_.best_trial = trial;
    }
    EndAttempt(t, "COMPLETED");
  } else {
    ScheduleStep(t);
  }
}

void Simulator::Impl::EndAttempt(TrialRt& t, const std::string& outcome) {
  CloseAttempt(t, outcome);
  const int64_t inst = t.inst;
  t.inst = -1;
  ++t.gen;
  --active_;
  Inst& in = insts_[inst];
  (void)ledger_.EndTrial(in.ledger_id);
  in.trial = 0;
  FreeInstance(inst);
}

void Simulator::Impl::FreeInstance(int64_t inst) {
  Inst& in = insts_[inst];
  if (in.dead || in.draining) return;
  PoolRt& p = pools_[in.pool];
  if (!p.waiting.empty()) {
    const int64_t next = p.waiting.front();
    p.waiting.pop_front();
    StartAttempt(next, inst);
    return;
  }
  in.idle_since = now_;
  ++in.gen;
  p.idle.insert(inst);
  Push(IdleRelease(inst), Ev::kRelease, inst, in.gen);
}

void Simulator::Impl::ReviewIdle(int64_t inst, int64_t gen) {
  Inst& in = insts_[inst];
  if (in.dead || in.gen != gen || in.trial != 0 || !in.ready) return;
  const PoolRt& p = pools_[in.pool];
  const absl::Time base = clock_.Now() - absl::Seconds(now_);
  const ScalingInstance si = View(inst);
  ScalingPool sp{p.spec.min_instances(),
                 p.spec.max_instances(),
                 p.live,
                 p.booting,
                 static_cast<int>(p.waiting.size()),
                 p.offer.market == Market::kReserved};
  std::vector<ScalingPool> pools(pools_.size());
  pools[in.pool] = sp;
  const Autoscaler scaler = Scaler();
  ScalingPlan plan = scaler.Plan(clock_.Now(), pools, {si});
  if (!plan.terminate.empty()) {
    Log("autoscale", 0,
        absl::StrCat("pool ", p.spec.name(), ": released idle instance ", inst + 1));
    Terminate(inst);
    return;
  }
  const absl::Time next = scaler.ReleaseAt(si, clock_.Now());
  // Pools at their minimum or prepaid keep the instance; look again only when that may change.
  if (next > clock_.Now()) Push(absl::ToDoubleSeconds(next - base), Ev::kRelease, inst, gen);
}

void Simulator::Impl::Preempt(int64_t inst, bool saved_at_notice, bool count) {
  Inst& in = insts_[inst];
  TrialRt& t = trials_[in.trial - 1];
  const double current = CurrentProgress(t);
  const double saved = saved_at_notice ? current : t.checkpoint;
  result_.lost_seconds += (current - saved) * t.spu + std::min(now_ - t.attempt_start, Overhead());
  result_.busy_seconds += std::max(0.0, now_ - std::max(t.boundary_time, t.attempt_start));
  t.checkpoint = saved;
  PoolRt& p = pools_[in.pool];
  if (count) {
    t.row.preemptions += 1;
    ++result_.preemptions;
    ++p.summary.preemptions;
  }
  t.row.state = v1::PREEMPTED;
  Log("trial_preempted", t.row.id,
      absl::StrFormat(
          "instance %d in %s (%s) %s; %s=%g saved, %.0f s of work lost; requeued", inst + 1,
          p.spec.name(), p.spec.region(),
          count ? (saved_at_notice ? "got a preemption notice" : "was taken back without notice")
                : "lost its reservation",
          model_.has_fidelity() ? spec_.search().fidelity().name() : "progress", saved,
          (current - saved) * t.spu));
  CloseAttempt(t, "PREEMPTED");
  (void)ledger_.EndTrial(in.ledger_id);
  in.trial = 0;
  t.inst = -1;
  ++t.gen;
  --active_;
  requeue_.push_front(t.row.id);
}

void Simulator::Impl::Renew(int pool) {
  PoolRt& p = pools_[pool];
  if (finished_ || p.reservation == 0) return;
  bool used = !p.waiting.empty();
  for (const Inst& in : insts_) used = used || (!in.dead && in.pool == pool && in.trial != 0);
  const double cost = ReservationCost(pool);
  if (used && guard_.Allows(ledger_.Committed(), Projected(), cost)) {
    p.reservation = ledger_.Reserve(p.owner, p.offer.billing, p.spec.max_instances(),
                                    p.offer.reservation_seconds);
    Push(now_ + p.offer.reservation_seconds, Ev::kRenew, pool);
    Log("reservation", 0, absl::StrCat("pool ", p.spec.name(), ": renewed"));
    return;
  }
  // The reservation lapses: its instances go, their trials checkpoint and are requeued.
  Log("reservation_lapsed", 0,
      absl::StrCat("pool ", p.spec.name(), used ? ": not renewed within the budget" : ": unused"));
  p.reservation = 0;
  p.closed = used;
  for (size_t i = 0; i < insts_.size(); ++i) {
    if (insts_[i].dead || insts_[i].pool != pool) continue;
    if (insts_[i].trial != 0) Preempt(static_cast<int64_t>(i), true, false);
    Terminate(static_cast<int64_t>(i));
  }
  while (!p.waiting.empty()) {
    requeue_.push_back(p.waiting.front());
    p.waiting.pop_front();
    --active_;
  }
}

void Simulator::Impl::Handle(const Event& e) {
  switch (e.type) {
    case Ev::kReady: {
      Inst& in = insts_[e.a];
      if (in.dead) return;
      in.ready = true;
      --pools_[in.pool].booting;
      FreeInstance(e.a);
      break;
    }
    case Ev::kStep:
      OnStep(e.a, e.gen);
      break;
    case Ev::kNotice:
    case Ev::kKill: {
      // On a notice the trial checkpoints (when the notice is long enough) and the instance is
      // released at once: nothing more runs on it, so keeping it would only cost.
      Inst& in = insts_[e.a];
      if (in.dead) return;
      ++result_.interruptions;
      placement_.OnPreemption(pools_[in.pool].spec.region(), clock_.Now());
      const bool saved =
          e.type == Ev::kNotice && in.notice_seconds >= model_.options().checkpoint_seconds();
      if (in.trial != 0) Preempt(e.a, saved, true);
      Terminate(e.a);
      break;
    }
    case Ev::kRelease:
      ReviewIdle(e.a, e.gen);
      break;
    case Ev::kRenew:
      Renew(static_cast<int>(e.a));
      break;
    case Ev::kDeadline:
      Stop("BUDGET_EXHAUSTED", "max_wall_time reached");
      return;
  }
  if (guard_.Exhausted(CommittedIfBudgeted())) {
    Stop("BUDGET_EXHAUSTED", "max_cost reached");
    return;
  }
  Dispatch();
  CheckFinished();
}

void Simulator::Impl::CheckFinished() {
  if (finished_ || active_ > 0) return;
  if (!requeue_.empty()) {
    if (refused_) Stop("BUDGET_EXHAUSTED", refused_why_);
    return;
  }
  if (scheduler_) {
    if (scheduler_->NextJob(CanCreate()).kind == Job::Kind::kDone) {
      for (TrialRt& t : trials_) PrunePausedAtScheduleEnd(t.row, t.objective, kEpoch + now_);
      Log("schedule_finished", 0, scheduler_->Describe());
      Stop("COMPLETED", "the schedule finished");
      return;
    }
  } else if (!CanCreate()) {
    Stop("COMPLETED", "every trial finished");
    return;
  }
  if (refused_) Stop("BUDGET_EXHAUSTED", refused_why_);
}

void Simulator::Impl::Stop(const std::string& state, const std::string& why) {
  if (finished_) return;
  finished_ = true;
  for (size_t i = 0; i < insts_.size(); ++i) {
    Inst& in = insts_[i];
    if (in.dead) continue;
    if (in.trial != 0) {
      TrialRt& t = trials_[in.trial - 1];
      t.checkpoint = CurrentProgress(t);
      t.row.state = v1::CANCELLED;
      CloseAttempt(t, "CANCELLED");
      (void)ledger_.EndTrial(in.ledger_id);
      in.trial = 0;
    }
    Terminate(static_cast<int64_t>(i));
  }
  for (PoolRt& p : pools_) {
    for (int64_t id : p.waiting) trials_[id - 1].row.state = v1::CANCELLED;
    p.waiting.clear();
  }
  for (int64_t id : requeue_) trials_[id - 1].row.state = v1::CANCELLED;
  result_.state = state;
  result_.message = why;
  Log("run_finished", 0, absl::StrCat(state, ": ", why));
}

absl::StatusOr<SimulationResult> Simulator::Impl::Run() {
  const auto real_start = std::chrono::steady_clock::now();
  if (spec_.budget().max_wall_time_seconds() > 0) {
    deadline_ = spec_.budget().max_wall_time_seconds();
    Push(deadline_, Ev::kDeadline, 0);
  }
  for (size_t p = 0; p < pools_.size(); ++p) {
    for (int i = 0; i < pools_[p].spec.min_instances(); ++i) Launch(static_cast<int>(p));
  }
  Dispatch();
  CheckFinished();
  while (!finished_ && !events_.empty()) {
    Event e = events_.top();
    events_.pop();
    if (e.t > now_) {
      clock_.Advance(absl::Seconds(e.t - now_));
      now_ = e.t;
    }
    ++result_.events;
    Handle(e);
  }
  if (!finished_)
    Stop("FAILED",
         absl::StrCat("nothing more can run: ", stall_why_.empty() ? "no event left" : stall_why_));
  result_.wall_seconds = now_;
  CostBreakdown b = ledger_.Breakdown();
  result_.cost = b.total;
  result_.trials = static_cast<int>(trials_.size());
  for (PoolRt& p : pools_) {
    p.summary.cost = b.by_pool.count(p.spec.name()) ? b.by_pool[p.spec.name()] : 0;
    result_.pools.push_back(p.summary);
    result_.overshoot_allowance += p.offer.billing.price_per_second *
                                   p.offer.billing.increment_seconds *
                                   std::min(p.spec.max_instances(), result_.max_live_instances);
  }
  result_.real_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  return result_;
}

absl::Status Simulator::Impl::WriteTo(Store* store) const {
  SEXTANT_RETURN_IF_ERROR(store->Begin());
  auto body = [&]() -> absl::Status {
    SEXTANT_RETURN_IF_ERROR(store->PutMeta("spec", spec_.SerializeAsString()));
    SEXTANT_RETURN_IF_ERROR(store->PutMeta("started_at", absl::StrCat(kEpoch)));
    SEXTANT_RETURN_IF_ERROR(store->PutMeta("finished_at", absl::StrCat(kEpoch + now_)));
    SEXTANT_RETURN_IF_ERROR(store->PutMeta("state", result_.state));
    nlohmann::json summary = {{"cost", result_.cost},
                              {"wall_seconds", result_.wall_seconds},
                              {"preemptions", result_.preemptions},
                              {"lost_seconds", result_.lost_seconds},
                              {"events", result_.events},
                              {"simulated", true}};
    SEXTANT_RETURN_IF_ERROR(store->PutMeta("simulation", summary.dump()));
    // The same per-pool counters as a live run's fleet, for `results` and the report.
    nlohmann::json pools = nlohmann::json::object();
    for (const PoolSummary& p : result_.pools) {
      pools[p.name] = {{"region", p.region},
                       {"market", p.market},
                       {"launched", p.launched},
                       {"preemptions", p.preemptions}};
    }
    SEXTANT_RETURN_IF_ERROR(store->PutMeta(
        "fleet", nlohmann::json({{"provider", "simulated"}, {"pools", pools}}).dump()));
    for (const TrialRt& t : trials_) SEXTANT_RETURN_IF_ERROR(store->PutTrial(t.row));
    for (const AttemptRec& a : attempts_) {
      SEXTANT_RETURN_IF_ERROR(store->StartAttempt(a.trial, a.attempt, a.worker, a.start));
      if (!a.outcome.empty()) {
        SEXTANT_RETURN_IF_ERROR(store->FinishAttempt(a.trial, a.attempt, a.outcome, 0, "", a.end));
      }
    }
    for (const MeasurementRow& m : measurements_)
      SEXTANT_RETURN_IF_ERROR(store->AddMeasurement(m).status());
    SEXTANT_RETURN_IF_ERROR(RecordWarmStart(warm_, spec_, store, kEpoch));
    for (const EventRow& e : log_)
      SEXTANT_RETURN_IF_ERROR(store->AddEvent(e.time, e.kind, e.trial_id, e.message));
    for (const InstanceBill& b : ledger_.Bills()) {
      SEXTANT_RETURN_IF_ERROR(store->AddCost(
          CostRow{b.reservation ? "reservation" : "instance", b.id, b.owner.pool, b.owner.region,
                  MarketName(b.owner.market), b.launched_at, b.terminated_at, b.cost}));
    }
    for (const auto& [trial, cost] : ledger_.Breakdown().by_trial) {
      SEXTANT_RETURN_IF_ERROR(store->AddCost(CostRow{"trial", trial, "", "", "", 0, 0, cost}));
    }
    return absl::OkStatus();
  };
  absl::Status s = body();
  if (!s.ok()) {
    store->Rollback();
    return s;
  }
  return store->Commit();
}

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::~Simulator() = default;

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(v1::ExperimentSpec spec,
                                                             Catalog catalog,
                                                             SimulationSettings settings) {
  auto impl = std::make_unique<Impl>(std::move(spec), std::move(catalog), std::move(settings));
  SEXTANT_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Simulator>(new Simulator(std::move(impl)));
}

absl::StatusOr<SimulationResult> Simulator::Run() { return impl_->Run(); }

absl::Status Simulator::WriteTo(Store* store) const { return impl_->WriteTo(store); }

}  // namespace sextant
