#ifndef SEXTANT_ORCHESTRATOR_COST_LEDGER_H_
#define SEXTANT_ORCHESTRATOR_COST_LEDGER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/cost/catalog.h"

namespace sextant {

// Where an instance or a reservation belongs.
struct CostOwner {
  std::string pool;
  std::string region;
  Market market = Market::kOnDemand;
};

// Spend split by trial, pool and region. Pool and region totals hold whole bills (idle time
// and rounding included); a trial holds only the seconds it ran times its instance's rate, so
// `unattributed` = total - sum(by_trial) is idle time, rounding and unused reservations.
struct CostBreakdown {
  double total = 0;
  std::map<int64_t, double> by_trial;
  std::map<std::string, double> by_pool;
  std::map<std::string, double> by_region;
  double unattributed = 0;
};

// One instance's bill, for the store.
struct InstanceBill {
  int64_t id = 0;
  CostOwner owner;
  double launched_at = 0;    // seconds since the ledger's epoch (its clock at construction)
  double terminated_at = 0;  // 0 while live
  double cost = 0;           // billed so far (as if terminated now when live)
  bool reservation = false;  // a Reserve() entry (terminated_at = the end of its term)
};

// The cost ledger: every instance is charged per second, rounded up to its increment with the
// minimum, from launch to termination, idle time included; a reservation is charged whole
// when it is made, whether used or not. Not thread-safe; runs on the orchestrator loop.
class Ledger {
 public:
  // Times are read from `clock` (not owned; must outlive the ledger).
  explicit Ledger(const Clock* clock);

  // Starts billing a new instance now. Returns its id (1, 2, ...). With `reservation` (an id
  // from Reserve), the instance runs on prepaid capacity: it adds nothing to the bill, and
  // trials on it are attributed the reservation's rate.
  int64_t Launch(const CostOwner& owner, const BillingTerms& terms, int64_t reservation = 0);

  // Stops billing. NotFound for an unknown id, FailedPrecondition when already terminated.
  absl::Status Terminate(int64_t instance);

  // Prepays `count` instances for `seconds` from now at terms.price_per_second, charged whole
  // at once. Returns the reservation id (shared id space with instances).
  int64_t Reserve(const CostOwner& owner, const BillingTerms& terms, int count, double seconds);

  // A trial starts or stops running on an instance (for attribution). Start fails with
  // FailedPrecondition when the instance is terminated or already runs a trial.
  absl::Status StartTrial(int64_t instance, int64_t trial);
  absl::Status EndTrial(int64_t instance);

  // Everything owed now: terminated instances' final bills, live instances' bills as if they
  // were terminated now (whole increments, minimum included), reservations whole.
  double Committed() const;

  // What a live instance will have cost in all if it is terminated at `t` (>= now), minus what
  // it costs if terminated now: the extra spend of keeping it until t. 0 for reserved capacity.
  double ExtraUntil(int64_t instance, absl::Time t) const;

  // The bill of an instance launched now and terminated after `seconds`.
  static double LaunchCost(const BillingTerms& terms, double seconds);

  // The end of the instance's current paid increment (launch + billed seconds so far).
  absl::Time PaidUntil(int64_t instance) const;

  CostBreakdown Breakdown() const;
  // Breakdown().by_trial[trial] (0 for a trial never run) without pricing every bill:
  // logarithmic in the trials, plus the instances the trial runs on now.
  double TrialCost(int64_t trial) const;
  std::vector<InstanceBill> Bills() const;
  int live_instances() const { return live_; }

 private:
  struct Account {
    CostOwner owner;
    BillingTerms terms;
    absl::Time launched;
    absl::Time terminated = absl::InfiniteFuture();
    bool reservation = false;  // a Reserve() entry rather than an instance
    int64_t prepaid_by = 0;    // instance on reserved capacity
    double reserved_cost = 0;  // Reserve(): the whole charge
    int64_t trial = 0;         // running now, 0 when idle
    absl::Time trial_since;
  };
  double Bill(const Account& a, absl::Time at) const;
  double Rate(const Account& a) const;
  void Attribute(Account& a, absl::Time until);
  // a (account `instance`) runs `trial` (0: none) from now on; keeps running_on_.
  void SetTrial(Account& a, int64_t instance, int64_t trial);

  const Clock* clock_;
  absl::Time epoch_;
  std::vector<Account> accounts_;  // accounts_[id - 1]
  std::map<int64_t, double> trial_cost_;                 // finished stints, by trial
  std::map<int64_t, std::set<int64_t>> running_on_;  // trial -> instances running it now
  int live_ = 0;
  // Committed() in time with the live instances, not all those ever launched: the final bills
  // of terminated instances and reservations (which no longer change), and the live ids.
  double closed_ = 0;
  std::set<int64_t> live_ids_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_LEDGER_H_
