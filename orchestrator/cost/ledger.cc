#include "orchestrator/cost/ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sextant {

Ledger::Ledger(const Clock* clock) : clock_(clock), epoch_(clock->Now()) {}

int64_t Ledger::Launch(const CostOwner& owner, const BillingTerms& terms, int64_t reservation) {
  Account a;
  a.owner = owner;
  a.terms = terms;
  a.launched = clock_->Now();
  a.prepaid_by = reservation;
  accounts_.push_back(a);
  ++live_;
  const int64_t id = static_cast<int64_t>(accounts_.size());
  live_ids_.insert(id);
  return id;
}

absl::Status Ledger::Terminate(int64_t instance) {
  if (instance < 1 || instance > static_cast<int64_t>(accounts_.size()) ||
      accounts_[instance - 1].reservation) {
    return absl::NotFoundError(absl::StrCat("no instance ", instance));
  }
  Account& a = accounts_[instance - 1];
  if (a.terminated != absl::InfiniteFuture()) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", instance, " already terminated"));
  }
  Attribute(a, clock_->Now());
  SetTrial(a, instance, 0);
  a.terminated = clock_->Now();
  --live_;
  live_ids_.erase(instance);
  closed_ += Bill(a, a.terminated);
  return absl::OkStatus();
}

int64_t Ledger::Reserve(const CostOwner& owner, const BillingTerms& terms, int count,
                        double seconds) {
  Account a;
  a.owner = owner;
  a.terms = terms;
  a.launched = clock_->Now();
  a.terminated = a.launched + absl::Seconds(seconds);
  a.reservation = true;
  a.reserved_cost = terms.price_per_second * seconds * count;
  accounts_.push_back(a);
  closed_ += a.reserved_cost;
  return static_cast<int64_t>(accounts_.size());
}

absl::Status Ledger::StartTrial(int64_t instance, int64_t trial) {
  if (instance < 1 || instance > static_cast<int64_t>(accounts_.size())) {
    return absl::NotFoundError(absl::StrCat("no instance ", instance));
  }
  Account& a = accounts_[instance - 1];
  if (a.reservation || a.terminated != absl::InfiniteFuture() || a.trial != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("instance ", instance, " cannot start trial ", trial));
  }
  SetTrial(a, instance, trial);
  a.trial_since = clock_->Now();
  return absl::OkStatus();
}

absl::Status Ledger::EndTrial(int64_t instance) {
  if (instance < 1 || instance > static_cast<int64_t>(accounts_.size())) {
    return absl::NotFoundError(absl::StrCat("no instance ", instance));
  }
  Attribute(accounts_[instance - 1], clock_->Now());
  SetTrial(accounts_[instance - 1], instance, 0);
  return absl::OkStatus();
}

void Ledger::SetTrial(Account& a, int64_t instance, int64_t trial) {
  if (a.trial != 0) {
    auto it = running_on_.find(a.trial);
    if (it != running_on_.end()) {
      it->second.erase(instance);
      if (it->second.empty()) running_on_.erase(it);
    }
  }
  a.trial = trial;
  if (trial != 0) running_on_[trial].insert(instance);
}

double Ledger::TrialCost(int64_t trial) const {
  double cost = 0;
  if (auto done = trial_cost_.find(trial); done != trial_cost_.end()) cost = done->second;
  auto running = running_on_.find(trial);
  if (running == running_on_.end()) return cost;
  const absl::Time now = clock_->Now();
  for (int64_t instance : running->second) {
    const Account& a = accounts_[instance - 1];
    cost += Rate(a) * absl::ToDoubleSeconds(now - a.trial_since);
  }
  return cost;
}

double Ledger::Rate(const Account& a) const {
  if (a.prepaid_by > 0) return accounts_[a.prepaid_by - 1].terms.price_per_second;
  return a.terms.price_per_second;
}

void Ledger::Attribute(Account& a, absl::Time until) {
  if (a.trial == 0) return;
  trial_cost_[a.trial] += Rate(a) * absl::ToDoubleSeconds(until - a.trial_since);
  a.trial_since = until;
}

double Ledger::Bill(const Account& a, absl::Time at) const {
  if (a.reservation) return a.reserved_cost;
  if (a.prepaid_by > 0) return 0;
  absl::Time end = std::min(at, a.terminated);
  return a.terms.price_per_second * BilledSeconds(absl::ToDoubleSeconds(end - a.launched), a.terms);
}

double Ledger::Committed() const {
  const absl::Time now = clock_->Now();
  double total = closed_;
  for (int64_t id : live_ids_) total += Bill(accounts_[id - 1], now);
  return total;
}

double Ledger::ExtraUntil(int64_t instance, absl::Time t) const {
  if (instance < 1 || instance > static_cast<int64_t>(accounts_.size())) return 0;
  const Account& a = accounts_[instance - 1];
  if (a.reservation || a.terminated != absl::InfiniteFuture()) return 0;
  const absl::Time now = clock_->Now();
  return std::max(0.0, Bill(a, std::max(t, now)) - Bill(a, now));
}

double Ledger::LaunchCost(const BillingTerms& terms, double seconds) {
  return terms.price_per_second * BilledSeconds(seconds, terms);
}

absl::Time Ledger::PaidUntil(int64_t instance) const {
  const Account& a = accounts_[instance - 1];
  const absl::Time now = std::min(clock_->Now(), a.terminated);
  return a.launched +
         absl::Seconds(BilledSeconds(absl::ToDoubleSeconds(now - a.launched), a.terms));
}

CostBreakdown Ledger::Breakdown() const {
  CostBreakdown b;
  const absl::Time now = clock_->Now();
  b.by_trial = trial_cost_;
  for (const Account& a : accounts_) {
    if (a.trial != 0) {
      b.by_trial[a.trial] += Rate(a) * absl::ToDoubleSeconds(now - a.trial_since);
    }
    const double bill = Bill(a, now);
    b.total += bill;
    b.by_pool[a.owner.pool] += bill;
    b.by_region[a.owner.region] += bill;
  }
  double attributed = 0;
  for (const auto& [trial, cost] : b.by_trial) attributed += cost;
  b.unattributed = b.total - attributed;
  return b;
}

std::vector<InstanceBill> Ledger::Bills() const {
  std::vector<InstanceBill> out;
  const absl::Time now = clock_->Now();
  for (size_t i = 0; i < accounts_.size(); ++i) {
    const Account& a = accounts_[i];
    InstanceBill b;
    b.id = static_cast<int64_t>(i + 1);
    b.owner = a.owner;
    b.launched_at = absl::ToDoubleSeconds(a.launched - epoch_);
    b.terminated_at =
        a.terminated == absl::InfiniteFuture() ? 0 : absl::ToDoubleSeconds(a.terminated - epoch_);
    b.cost = Bill(a, now);
    b.reservation = a.reservation;
    out.push_back(b);
  }
  return out;
}

}  // namespace sextant
