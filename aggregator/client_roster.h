// The places of one region's clients and who holds them, for clients started by hand.
#ifndef SEXTANT_AGGREGATOR_CLIENT_ROSTER_H_
#define SEXTANT_AGGREGATOR_CLIENT_ROSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace sextant {

// The orchestrator samples a region's clients by place (REGION/0 .. REGION/n-1), and a client's
// place picks its share of the data; a client started by hand speaks as REGION/NAME of its
// certificate. A client whose NAME is a free place ("0" .. "n-1") holds that place; any other
// takes the lowest free place when it first joins. Places are written to a file as they are
// taken, so that an aggregator started again gives each client the place it had. Thread-safe.
class ClientRoster {
 public:
  // `places` (>= 1) places of `region` in experiment_id's run, kept in `file` (a line
  // "experiment ID", then lines "PLACE NAME"), which is read when it exists. InvalidArgument
  // naming the file and line when a line does not parse, names a place out of range, holds a
  // place or name twice, or the file is another experiment's.
  static absl::StatusOr<std::unique_ptr<ClientRoster>> Open(std::string region, int64_t places,
                                                            const std::string& experiment_id,
                                                            std::string file);

  // The place of the client NAME (an id, checked by its caller), taking one on its first join.
  // ResourceExhausted when every place is held by others; Unavailable when the file cannot be
  // written (the place is then not taken; the file is replaced whole, never left half written).
  absl::StatusOr<int64_t> Join(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

  // The id (REGION/NAME) of whoever holds the place id REGION/I, or the place id itself when no
  // one has taken it yet.
  std::string Holder(const std::string& place_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // The place id of a holder's id, or the id itself when it holds no place.
  std::string PlaceOf(const std::string& id) const ABSL_LOCKS_EXCLUDED(mu_);
  // How many places are held.
  int64_t held() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ClientRoster(std::string region, int64_t places, std::string experiment_id, std::string file)
      : region_(std::move(region)),
        places_(places),
        experiment_id_(std::move(experiment_id)),
        file_(std::move(file)) {}

  const std::string region_;
  const int64_t places_;
  const std::string experiment_id_;
  const std::string file_;
  mutable absl::Mutex mu_;
  std::map<int64_t, std::string> holder_ ABSL_GUARDED_BY(mu_);  // place -> NAME
  std::map<std::string, int64_t> place_ ABSL_GUARDED_BY(mu_);   // NAME -> place
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_CLIENT_ROSTER_H_
