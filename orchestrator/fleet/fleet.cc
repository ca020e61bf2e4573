#include "orchestrator/fleet/fleet.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/cost/pool_offer.h"

namespace sextant {
Fleet::Fleet(const Clock* clock, FleetOptions options, std::optional<double> max_cost,
             PlacementOptions placement, AutoscalerOptions autoscaler, Provider* provider)
    : clock_(clock),
      options_(std::move(options)),
      provider_(provider),
      ledger_(clock),
      guard_(max_cost),
      placement_(placement),
      autoscaler_(autoscaler),
      sampler_(options_.seed) {
  for (const CostRow& c : options_.prior_costs) {
    if (c.kind == "trial") {
      prior_trial_cost_[c.ref] += c.cost;
    } else {
      prior_committed_ += c.cost;
    }
  }
}

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Create(const v1::ExperimentSpec& spec,
                                                     Catalog catalog, Provider* provider,
                                                     const Clock* clock, FleetOptions options) {
  const v1::Resources& res = spec.resources();
  if (res.pools_size() == 0) return absl::InvalidArgumentError("resources.pools is empty");
  PlacementOptions popts;
  SEXTANT_ASSIGN_OR_RETURN(
      popts.mode, ParsePlacementMode(res.placement().policy().empty() ? "spot_first"
                                                                      : res.placement().policy()));
  popts.preemption_cooldown_seconds = res.placement().preemption_cooldown_seconds();
  AutoscalerOptions aopts;
  aopts.idle_timeout_seconds = res.idle_timeout_seconds();
  std::optional<double> cap;
  if (spec.budget().has_max_cost()) cap = spec.budget().max_cost();
  std::unique_ptr<Fleet> fleet(new Fleet(clock, std::move(options), cap, popts, aopts, provider));
  for (const v1::Pool& p : res.pools()) {
    SEXTANT_ASSIGN_OR_RETURN(PoolOffer resolved, ResolvePoolOffer(catalog, p));
    Pool pool;
    pool.spec = p;
    pool.offer = resolved.offer;
    pool.type = resolved.type;
    pool.owner = resolved.owner;
    pool.stats = FleetPoolStats{p.name(), p.region(), MarketName(pool.offer.market)};
    auto prior = fleet->options_.prior_pools.find(p.name());
    if (prior != fleet->options_.prior_pools.end()) {
      pool.stats.launched = prior->second.launched;
      pool.stats.launch_failures = prior->second.launch_failures;
      pool.stats.interruptions = prior->second.interruptions;
      pool.stats.preemptions = prior->second.preemptions;
    }
    fleet->pools_.push_back(std::move(pool));
  }
  const v1::TrialResources& need = res.per_trial();
  fleet->request_.gpus = need.gpus();
  fleet->request_.gpu_memory_gb = need.gpu_memory_gb();
  fleet->request_.cpus = need.cpus();
  fleet->request_.checkpoints = need.checkpoints();
  return fleet;
}

FleetTick Fleet::Tick(const FleetView& view) {
  FleetTick tick;
  Bind(view, tick);
  Attribute(view);
  PollInstances(tick);
  Interrupt(tick);
  Renew(tick);
  CheckBudget(tick);
  if (!exhausted_ && !stopping_) Scale(view, tick);
  return tick;
}

// Workers that registered since the last tick are bound to the instance launched with their
// token; a static provider's hand-started workers become instances of the pool they name.
void Fleet::Bind(const FleetView& view, FleetTick& tick) {
  for (const auto& [id, w] : view.workers) {
    if (by_worker_.count(id)) continue;
    auto it = std::find_if(instances_.begin(), instances_.end(), [&](const Instance& i) {
      return !w.launch_token.empty() && i.token == w.launch_token && !i.billed_off;
    });
    if (it != instances_.end()) {
      // A job that Slurm requeued comes back with the same token as a new worker.
      if (it->trial != 0) ledger_.EndTrial(it->ledger_id).IgnoreError();
      it->trial = 0;
      it->worker = id;
      it->idle_since = clock_->Now();
      by_worker_[id] = static_cast<size_t>(it - instances_.begin());
      continue;
    }
    auto pool = std::find_if(pools_.begin(), pools_.end(),
                             [&](const Pool& p) { return p.spec.name() == w.pool; });
    by_worker_[id] = SIZE_MAX;  // seen
    if (pool == pools_.end() || provider_->Launches(w.pool)) {
      tick.events.push_back({"worker_unbilled", 0,
                             absl::StrCat("worker ", id, " (pool '", w.pool,
                                          "') was not launched by this run; it is not billed")});
      continue;
    }
    // Billing a hand-started worker is spending like a launch: the pool's max_instances and
    // the budget must allow it, so that one certificate cannot register ghost instances.
    std::string why;
    const int pool_index = static_cast<int>(pool - pools_.begin());
    const int live = static_cast<int>(
        std::count_if(instances_.begin(), instances_.end(),
                      [&](const Instance& i) { return !i.billed_off && i.pool == pool_index; }));
    if (live >= pool->spec.max_instances()) {
      why = absl::StrCat("the pool has its max_instances (", pool->spec.max_instances(), ")");
    }
    if (exhausted_ || !why.empty() ||
        !guard_.Allows(committed(), WindDown(), pool->ActionCost(options_.wind_down_seconds),
                       &why)) {
      tick.retire.push_back(id);
      tick.events.push_back(
          {"budget_refused", 0,
           absl::StrCat("worker ", id, " not adopted into pool ", pool->spec.name(), ": ",
                        exhausted_ ? "the budget is spent" : why, "; it gets no work")});
      continue;
    }
    Instance inst;
    inst.pool = static_cast<int>(pool - pools_.begin());
    inst.token = absl::StrCat("static-", id);
    inst.launched = clock_->Now();
    inst.idle_since = inst.launched;
    inst.worker = id;
    inst.ledger_id = ledger_.Launch(pool->owner, pool->offer.billing);
    ++pool->stats.launched;
    instances_.push_back(inst);
    by_worker_[id] = instances_.size() - 1;
    tick.events.push_back(
        {"instance_adopted", 0,
         absl::StrCat("worker ", id, " joins pool ", pool->spec.name(), "; billed from now")});
  }
}

void Fleet::Attribute(const FleetView& view) {
  for (Instance& inst : instances_) {
    if (inst.worker == 0 || inst.billed_off) continue;
    auto r = view.running.find(inst.worker);
    Assign(inst, r == view.running.end() ? 0 : r->second);
  }
}

void Fleet::Assign(Instance& inst, int64_t trial) {
  if (trial == inst.trial) return;
  if (inst.trial != 0) ledger_.EndTrial(inst.ledger_id).IgnoreError();
  if (trial != 0) ledger_.StartTrial(inst.ledger_id, trial).IgnoreError();
  if (trial == 0) inst.idle_since = clock_->Now();
  inst.trial = trial;
}

void Fleet::OnWorkerTrial(int64_t worker, int64_t trial) {
  auto it = by_worker_.find(worker);
  if (it == by_worker_.end() || it->second >= instances_.size()) return;
  Instance& inst = instances_[it->second];
  if (inst.billed_off || inst.worker != worker) return;
  Assign(inst, trial);
}

std::set<int64_t> Fleet::LiveWorkers() const {
  std::set<int64_t> out;
  for (const Instance& inst : instances_) {
    if (inst.worker != 0 && !inst.terminating && !inst.billed_off) out.insert(inst.worker);
  }
  return out;
}

void Fleet::EndBill(Instance& inst) {
  if (inst.billed_off) return;
  ledger_.Terminate(inst.ledger_id).IgnoreError();
  inst.billed_off = true;
  inst.trial = 0;
}

void Fleet::PollInstances(FleetTick& tick) {
  // Providers may run a command per poll (squeue): once a second is enough.
  const absl::Time now = clock_->Now();
  if (now - last_poll_ < absl::Seconds(1)) return;
  last_poll_ = now;
  for (Instance& inst : instances_) {
    if (inst.handle.empty() || inst.billed_off) continue;
    InstanceStatus st = provider_->Poll(inst.handle);
    if (!st.gone()) continue;
    EndBill(inst);
    if (!inst.terminating) {
      tick.events.push_back({"instance_gone", 0,
                             absl::StrCat("instance ", inst.token, " of pool ",
                                          pools_[inst.pool].spec.name(), ": ", st.detail)});
    }
    inst.terminating = true;
    if (inst.worker != 0) {
      tick.retire.push_back(inst.worker);
      tick.lost.push_back(inst.worker);
    }
  }
}

// Due spot interruptions: the notice (the worker checkpoints its trial and goes), then the
// instance is taken back; sometimes with no notice at all.
void Fleet::Interrupt(FleetTick& tick) {
  if (stopping_) return;
  const absl::Time now = clock_->Now();
  for (Instance& inst : instances_) {
    if (inst.billed_off || inst.interrupt_at == absl::InfiniteFuture()) continue;
    Pool& pool = pools_[inst.pool];
    if (!inst.noticed && inst.notice_seconds > 0 && now >= inst.notice_at) {
      inst.noticed = true;
      // Counted at the notice: the worker may hand its trial back and exit before the end.
      ++pool.stats.interruptions;
      if (inst.trial != 0) ++pool.stats.preemptions;
      placement_.OnPreemption(pool.spec.region(), now);
      provider_->Interrupt(inst.handle, /*notice=*/true).IgnoreError();
      tick.events.push_back({"spot_notice", inst.trial,
                             absl::StrFormat("instance %s of pool %s: interruption in %.1f s",
                                             inst.token, pool.spec.name(), inst.notice_seconds)});
    }
    if (now < inst.interrupt_at) continue;
    if (!inst.noticed) {
      ++pool.stats.interruptions;
      if (inst.trial != 0) ++pool.stats.preemptions;
      placement_.OnPreemption(pool.spec.region(), now);
    }
    provider_->Interrupt(inst.handle, /*notice=*/false).IgnoreError();
    tick.events.push_back({"spot_interrupted", inst.trial,
                           absl::StrCat("instance ", inst.token, " of pool ", pool.spec.name(),
                                        inst.noticed ? " taken back after its notice"
                                                     : " taken back without notice")});
    if (inst.worker != 0) {
      tick.retire.push_back(inst.worker);
      tick.lost.push_back(inst.worker);
    }
    inst.interrupt_at = absl::InfiniteFuture();
    inst.terminating = true;
    EndBill(inst);
  }
}

// A reservation that ran out while its pool still has live instances is made again.
void Fleet::Renew(FleetTick& tick) {
  const absl::Time now = clock_->Now();
  for (Pool& p : pools_) {
    if (p.reservation == 0 || now < p.reservation_end) continue;
    const bool used = std::any_of(instances_.begin(), instances_.end(), [&](const Instance& i) {
      return !i.billed_off && &pools_[i.pool] == &p;
    });
    if (!used) {
      p.reservation = 0;
      continue;
    }
    // A renewal is a new reservation, paid whole: the budget must allow it like a launch.
    p.reservation = 0;
    std::string why;
    if (!guard_.Allows(committed(), WindDown(), p.ActionCost(options_.wind_down_seconds), &why)) {
      tick.events.push_back({"budget_refused", 0,
                             absl::StrCat("reservation of pool ", p.spec.name(),
                                          " not renewed: ", why, "; its instances terminate")});
      for (Instance& inst : instances_) {
        if (!inst.billed_off && &pools_[inst.pool] == &p) {
          Release(inst, tick, "its reservation ended and the budget does not cover another");
        }
      }
      continue;
    }
    p.reservation = ledger_.Reserve(p.owner, p.offer.billing, p.spec.max_instances(),
                                    p.offer.reservation_seconds);
    p.reservation_end = now + absl::Seconds(p.offer.reservation_seconds);
    tick.events.push_back({"reservation", 0, absl::StrCat("pool ", p.spec.name(), ": renewed")});
  }
}

double Fleet::WindDown() const {
  double total = 0;
  for (const Instance& inst : instances_) {
    if (inst.billed_off) continue;
    const Pool& p = pools_[inst.pool];
    if (p.offer.market == Market::kReserved) continue;
    total += p.offer.billing.price_per_second *
             (options_.wind_down_seconds + p.offer.billing.increment_seconds);
  }
  return total;
}

void Fleet::CheckBudget(FleetTick& tick) {
  if (exhausted_) return;
  std::string why;
  if (!guard_.Allows(committed(), WindDown(), 0, &why)) {
    exhausted_ = true;
    tick.hold = true;
    tick.events.push_back(
        {"budget_exhausted", 0, absl::StrCat(why, "; running trials stop, instances terminate")});
  }
}

double Fleet::Pool::ActionCost(double wind_down_seconds) const {
  if (offer.market == Market::kReserved) {
    return reservation == 0
               ? offer.billing.price_per_second * offer.reservation_seconds * spec.max_instances()
               : 0;
  }
  return Ledger::LaunchCost(offer.billing, 0) + offer.billing.price_per_second * wind_down_seconds;
}

std::vector<PoolCandidate> Fleet::Candidates() const {
  const absl::Time now = clock_->Now();
  std::vector<PoolCandidate> out;
  for (size_t i = 0; i < pools_.size(); ++i) {
    const Pool& p = pools_[i];
    int live = 0;
    for (const Instance& inst : instances_)
      live += !inst.billed_off && inst.pool == static_cast<int>(i);
    PoolCandidate c;
    c.name = p.spec.name();
    c.region = p.spec.region();
    c.market = p.offer.market;
    c.price_per_second = p.offer.billing.price_per_second;
    c.instance = p.type;
    const bool can_launch = provider_->Launches(p.spec.name()) && !p.given_up && now >= p.retry_at;
    c.free_slots = can_launch ? std::max(0, p.spec.max_instances() - live) : 0;
    c.prepaid_idle = p.offer.market == Market::kReserved && p.reservation != 0;
    out.push_back(c);
  }
  return out;
}

// Long because one pass does the whole decision: place the unserved demand on pools, plan
// with the autoscaler, then launch (each launch checked against the budget) and release.
void Fleet::Scale(const FleetView& view, FleetTick& tick) {
  const absl::Time now = clock_->Now();
  std::vector<ScalingPool> sp(pools_.size());
  std::vector<ScalingInstance> si;
  int idle = 0, booting = 0;
  for (size_t i = 0; i < pools_.size(); ++i) {
    sp[i].min_instances = pools_[i].spec.min_instances();
    sp[i].max_instances = pools_[i].spec.max_instances();
    sp[i].prepaid = pools_[i].offer.market == Market::kReserved;
  }
  for (const Instance& inst : instances_) {
    if (inst.billed_off || inst.terminating) continue;
    ScalingPool& p = sp[inst.pool];
    ++p.live;
    if (inst.worker == 0) {
      ++p.booting;
      ++booting;
      continue;
    }
    if (inst.trial == 0) ++idle;
    si.push_back(ScalingInstance{inst.ledger_id, inst.pool, inst.trial == 0, inst.idle_since,
                                 inst.launched, pools_[inst.pool].offer.billing});
  }
  std::vector<PoolCandidate> cands = Candidates();
  // Top-rung jobs first: only instances of pools placement admits for them serve them.
  PlacementRequest top = request_;
  top.top_rung = true;
  int top_ready = 0;
  for (const Instance& inst : instances_) {
    if (inst.billed_off || inst.terminating || inst.trial != 0) continue;
    top_ready += placement_.Admits(top, cands, inst.pool) ? 1 : 0;
  }
  const int top_demand = std::min(view.top_rung_demand, view.demand);
  const int top_unserved = std::max(0, top_demand - top_ready);
  const int rest_unserved =
      std::max(0, view.demand - top_demand - (idle + booting - std::min(top_demand, top_ready)));
  auto place = [&](const PlacementRequest& request, int count) {
    for (; count > 0; --count) {
      Placement pl = placement_.Place(request, cands, now);
      if (!pl.placed()) break;
      ++sp[pl.pool].waiting;
      --cands[pl.pool].free_slots;
      if (last_reason_[pl.pool] != pl.reason) {
        last_reason_[pl.pool] = pl.reason;
        tick.events.push_back({"placement", 0, pl.reason});
      }
    }
  };
  place(top, top_unserved);
  place(request_, rest_unserved);
  for (ScalingPool& p : sp) p.waiting += p.booting;  // the autoscaler subtracts booting
  ScalingPlan plan = autoscaler_.Plan(now, sp, si);
  // The budget as it stands, kept up to date launch by launch rather than priced anew for each.
  BudgetSnapshot budget;
  if (guard_.max_cost()) budget = {committed(), WindDown()};
  for (size_t i = 0; i < pools_.size(); ++i) {
    for (int n = 0; n < plan.launch[i]; ++n) Launch(static_cast<int>(i), tick, budget);
  }
  if (plan.terminate.empty()) return;
  std::map<int64_t, Instance*> by_bill;
  for (Instance& inst : instances_) {
    if (!inst.billed_off) by_bill[inst.ledger_id] = &inst;
  }
  for (int64_t id : plan.terminate) {
    auto it = by_bill.find(id);
    if (it != by_bill.end())
      Release(*it->second, tick, "idle past the idle timeout, paid increment ending");
  }
}

void Fleet::Launch(int index, FleetTick& tick, BudgetSnapshot& budget) {
  Pool& p = pools_[index];
  const absl::Time now = clock_->Now();
  if (p.given_up || now < p.retry_at || !provider_->Launches(p.spec.name())) return;
  std::string why;
  if (guard_.max_cost() && !guard_.Allows(budget.committed, budget.wind_down,
                                          p.ActionCost(options_.wind_down_seconds), &why)) {
    launch_refused_ = true;
    tick.hold = ledger_.live_instances() > 0 ? tick.hold : true;
    if (why != last_refusal_) {
      last_refusal_ = why;
      tick.events.push_back(
          {"budget_refused", 0, absl::StrCat("launch in pool ", p.spec.name(), ": ", why)});
    }
    return;
  }
  launch_refused_ = false;
  Instance inst;
  inst.pool = index;
  inst.token = absl::StrCat(p.spec.name(), "-", next_token_++);
  InstanceRequest req{p.spec.name(),
                      p.spec.region(),
                      p.spec.instance(),
                      p.offer.market,
                      inst.token,
                      options_.connect,
                      absl::StrCat(options_.logs_dir, "/worker-", inst.token, ".log"),
                      0,
                      options_.credentials,
                      {}};
  Interruption intr;
  // A stop at the budget gives a trial on a non-spot instance the wind-down the budget projected.
  req.preempt_notice_seconds = std::max(0.5, options_.wind_down_seconds);
  if (p.offer.market == Market::kSpot) {
    intr = Scaled(sampler_.Sample(p.offer.interruption), options_.time_scale);
    req.preempt_notice_seconds = intr.notice_seconds;
  }
  absl::StatusOr<std::string> handle = provider_->Launch(req);
  if (!handle.ok()) {
    ++p.failures;
    ++p.stats.launch_failures;
    const double backoff =
        std::min(60.0, options_.launch_backoff_seconds * std::pow(2.0, p.failures - 1));
    p.retry_at = now + absl::Seconds(backoff);
    p.given_up = p.failures >= options_.max_launch_failures;
    tick.events.push_back(
        {"launch_failed", 0,
         absl::StrFormat("pool %s: %s; %s", p.spec.name(), handle.status().message(),
                         p.given_up
                             ? "giving this pool up, other pools take its work"
                             : absl::StrFormat("retrying in %.0f s, other pools first", backoff))});
    return;
  }
  p.failures = 0;
  int64_t prepaid = 0;
  if (p.offer.market == Market::kReserved) {
    if (p.reservation == 0) {
      p.reservation = ledger_.Reserve(p.owner, p.offer.billing, p.spec.max_instances(),
                                      p.offer.reservation_seconds);
      p.reservation_end = now + absl::Seconds(p.offer.reservation_seconds);
      budget.committed +=
          p.offer.billing.price_per_second * p.offer.reservation_seconds * p.spec.max_instances();
      tick.events.push_back({"reservation", 0,
                             absl::StrCat("pool ", p.spec.name(), ": ", p.spec.max_instances(),
                                          " instances reserved for ", p.offer.reservation_seconds,
                                          " s, charged whole")});
    }
    prepaid = p.reservation;
  }
  inst.handle = *handle;
  inst.launched = now;
  inst.idle_since = now;
  inst.ledger_id = ledger_.Launch(p.owner, p.offer.billing, prepaid);
  if (prepaid == 0) {
    budget.committed += Ledger::LaunchCost(p.offer.billing, 0);  // its bill at launch
    budget.wind_down += p.offer.billing.price_per_second *
                        (options_.wind_down_seconds + p.offer.billing.increment_seconds);
  }
  if (p.offer.market == Market::kSpot && std::isfinite(intr.after_seconds)) {
    inst.interrupt_at = now + absl::Seconds(intr.after_seconds);
    inst.notice_seconds = req.preempt_notice_seconds;
    inst.notice_at = inst.interrupt_at - absl::Seconds(inst.notice_seconds);
  }
  ++p.stats.launched;
  tick.events.push_back({"instance_launched", 0,
                         absl::StrCat("instance ", inst.token, " in pool ", p.spec.name(), " (",
                                      provider_->Label(inst.handle), ")")});
  instances_.push_back(std::move(inst));
}

void Fleet::Release(Instance& inst, FleetTick& tick, const std::string& why) {
  if (inst.terminating) return;
  inst.terminating = true;
  if (inst.worker != 0) tick.retire.push_back(inst.worker);
  provider_->Terminate(inst.handle).IgnoreError();
  EndBill(inst);  // the provider stops it now; its bill ends with this decision
  tick.events.push_back({"instance_released", 0,
                         absl::StrCat("instance ", inst.token, " of pool ",
                                      pools_[inst.pool].spec.name(), ": ", why)});
}

std::set<std::string> Fleet::PoolsOffTheTopRung(std::string* why) const {
  PlacementRequest top = request_;
  top.top_rung = true;
  const std::vector<PoolCandidate> cands = Candidates();
  std::set<std::string> out;
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (!placement_.Admits(top, cands, static_cast<int>(i))) out.insert(pools_[i].spec.name());
  }
  *why = absl::StrCat(PlacementModeName(placement_.options().mode),
                      " placement runs the top rung and final evaluations on on-demand or reserved "
                      "pools, not on ",
                      absl::StrJoin(out, ", "));
  return out;
}

Fleet::StuckOn Fleet::Stuck(std::string* why) const {
  for (const Instance& inst : instances_) {
    if (!inst.billed_off) return StuckOn::kNone;
  }
  if (!provider_->launches()) return StuckOn::kNone;  // hand-started workers may still come
  const bool all_given_up =
      std::all_of(pools_.begin(), pools_.end(), [](const Pool& p) { return p.given_up; });
  if (all_given_up) {
    *why = "every pool failed to launch instances";
    return StuckOn::kLaunchFailed;
  }
  if (launch_refused_) {
    *why = absl::StrCat("the budget pays for no instance: ", last_refusal_);
    return StuckOn::kBudget;
  }
  return StuckOn::kNone;
}

int Fleet::NoticeAll() {
  stopping_ = true;
  int told = 0;
  for (Instance& inst : instances_) {
    if (inst.billed_off || inst.terminating) continue;
    inst.terminating = true;
    ++told;
    if (inst.trial != 0 && provider_->Interrupt(inst.handle, /*notice=*/true).ok()) continue;
    provider_->Terminate(inst.handle).IgnoreError();
  }
  return told;
}

int Fleet::TerminateAll() {
  int live = 0;
  for (Instance& inst : instances_) {
    if (inst.billed_off) continue;
    if (!inst.terminating) provider_->Terminate(inst.handle).IgnoreError();
    inst.terminating = true;
    ++live;
  }
  return live;
}

int Fleet::Reap(bool force) {
  int live = 0;
  for (Instance& inst : instances_) {
    if (inst.billed_off) continue;
    if (!inst.handle.empty() && provider_->Poll(inst.handle).gone()) {
      EndBill(inst);
      continue;
    }
    if (force) {
      if (!inst.handle.empty()) provider_->Interrupt(inst.handle, false).IgnoreError();
      EndBill(inst);
      continue;
    }
    // A hand-started worker is not ours to wait for: its bill ends with the run.
    if (inst.handle.empty()) {
      EndBill(inst);
      continue;
    }
    ++live;
  }
  return live;
}

std::vector<FleetPoolStats> Fleet::pool_stats() const {
  std::vector<FleetPoolStats> out;
  for (const Pool& p : pools_) out.push_back(p.stats);
  return out;
}

absl::Status Fleet::WriteCosts(Store* store) const {
  std::vector<CostRow> rows;
  // Earlier sessions' bills stay as they were; this session's ids follow theirs.
  int64_t first_id = 0;
  std::map<int64_t, double> by_trial;
  for (const CostRow& c : options_.prior_costs) {
    if (c.kind == "trial") {
      by_trial[c.ref] += c.cost;
      continue;
    }
    first_id = std::max(first_id, c.ref);
    rows.push_back(c);
  }
  const double off = options_.epoch_offset_seconds;
  for (const InstanceBill& b : ledger_.Bills()) {
    rows.push_back(CostRow{b.reservation ? "reservation" : "instance", first_id + b.id,
                           b.owner.pool, b.owner.region, MarketName(b.owner.market),
                           off + b.launched_at, b.terminated_at > 0 ? off + b.terminated_at : 0,
                           b.cost});
  }
  for (const auto& [trial, cost] : ledger_.Breakdown().by_trial) by_trial[trial] += cost;
  for (const auto& [trial, cost] : by_trial) {
    rows.push_back(CostRow{"trial", trial, "", "", "", 0, 0, cost});
  }
  SEXTANT_RETURN_IF_ERROR(store->ReplaceCosts(rows));
  FleetMeta meta{provider_->name(), committed(), ledger_.live_instances(), {}};
  for (const Pool& p : pools_) meta.pools[p.spec.name()] = p.stats;
  return store->PutMeta("fleet", FleetMetaToJson(meta));
}

double Fleet::TrialCost(int64_t trial) const {
  auto prior = prior_trial_cost_.find(trial);
  return (prior == prior_trial_cost_.end() ? 0.0 : prior->second) + ledger_.TrialCost(trial);
}

}  // namespace sextant
