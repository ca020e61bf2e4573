#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_HAND_JOINS_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_HAND_JOINS_H_

#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/tier.h"
#include "orchestrator/core/store.h"
#include "orchestrator/federated/federated_billing.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// A federated run's participants started by hand on their own hosts: the regions that are
// theirs (every region under --external-participants, else each region whose pools are all
// static), the signed plans their aggregators ask for (FederationService.Join, by certificate),
// and the pools they name, billed from their join to the end of the run. Queue may be called
// from any thread (the tier's); everything else runs on the run's loop.
class HandJoins {
 public:
  // `spec` is not owned and must outlive it. `external`: --external-participants.
  HandJoins(const v1::ExperimentSpec& spec, bool external);

  // True when `region`'s participants are started by hand.
  bool Of(const std::string& region) const { return regions_.contains(region); }
  bool any() const { return !regions_.empty(); }
  // Every region is started by hand: the run launches no participant.
  bool all() const {
    return static_cast<int>(regions_.size()) == spec_.federation().regions_size();
  }
  // OK, or InvalidArgument when some region is started by hand and `tls_dir` is empty: such
  // participants join with certificates of the run's CA.
  absl::Status CheckCredentials(const std::string& tls_dir) const;

  // Serves the hand-started regions on `o`: an aggregator certificate of such a region gets its
  // plan (the experiment without its secrets, search, budget and resources, signed with the
  // orchestrator key of `tls_dir` for experiment_id, valid for `lifetime` from `now`, and its
  // region's aggregator `flags`); any other caller is refused. A pool named on the way is
  // queued for its bill. No-op when no region is started by hand.
  absl::Status Serve(
      TierOptions* o, const std::string& tls_dir, const std::string& experiment_id, absl::Time now,
      absl::Duration lifetime,
      const std::function<std::vector<std::string>(const v1::FederatedRegion&)>& flags);

  // A participant started by hand named `pool` (`who`: "aggregator R", "client R/I"): checked
  // against the run's pools and queued for Bill. InvalidArgument naming what is wrong.
  absl::Status Queue(std::string who, const std::string& region, bool aggregator,
                     const std::string& pool) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the bill on `billing` of each participant queued since the last call (once per
  // participant: one that joins again keeps its bill), with a `federation_joined` event at
  // `event_time` each. Without billing (null) the queue is dropped.
  void Bill(FederatedBilling* billing, Store* store, double event_time) ABSL_LOCKS_EXCLUDED(mu_);
  // Participants billed so far, by pool.
  const std::map<std::string, int>& billed() const { return billed_by_pool_; }

  // Says on `out` what to start where, for each region started by hand: its aggregator dialling
  // THIS_HOST:`port`, then its clients dialling it, each with its pool.
  void Announce(std::ostream& out, int port, const std::string& experiment_id) const;

 private:
  const v1::ExperimentSpec& spec_;
  std::set<std::string> regions_;
  absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> queued_ ABSL_GUARDED_BY(mu_);  // (who, pool)
  std::map<std::string, std::string> billed_;                                     // who -> pool
  std::map<std::string, int> billed_by_pool_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_HAND_JOINS_H_
