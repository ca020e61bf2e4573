#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_SELECTION_RECORD_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_SELECTION_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "aggregator/federation_hub.h"
#include "orchestrator/core/store.h"
#include "orchestrator/federated/client_selection.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// federation.client_selection across a run's sessions: the clients' speeds and how often each
// was selected, kept in the store's meta `client_speeds` and `client_selection` (which
// `results` reads) after every round. Not thread-safe; runs on the run's loop.
class SelectionRecord {
 public:
  // store is not owned and must outlive it.
  explicit SelectionRecord(Store* store) : store_(store) {}

  // Takes up an earlier session's speeds and counts; nothing stored is not an error.
  absl::Status Restore();
  // The clients of `round` (SelectClients on the speeds known so far).
  std::vector<Participant> Select(const v1::Federation& f, int64_t round) const {
    return SelectClients(f, round, speeds_);
  }
  // Counts `chosen` as `round`'s selection under f's policy, stores it, and says it in a
  // `selection` event at `event_time`.
  absl::Status Record(const v1::Federation& f, int64_t round,
                      const std::vector<Participant>& chosen, double event_time);
  // Learns each client's delivery time from its region's report of a closed round, and stores
  // the speeds when any was reported.
  absl::Status Observe(const std::vector<SenderReport>& senders);

 private:
  Store* store_;
  ClientSpeeds speeds_;
  std::map<std::string, int64_t> selected_;  // rounds each client was selected for
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_SELECTION_RECORD_H_
