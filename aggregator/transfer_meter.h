// The bytes a tier's server moved for each sender: what a federated run bills as transfer
// between regions.
#ifndef SEXTANT_AGGREGATOR_TRANSFER_METER_H_
#define SEXTANT_AGGREGATOR_TRANSFER_METER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"

namespace sextant {

// Bytes of FederationService messages (their serialized size, gRPC's framing aside) a tier's
// server wrote to and read from each sender id, once the gate has accepted the sender for the
// call. Thread-safe.
class TransferMeter {
 public:
  struct Bytes {
    int64_t sent = 0;      // from this tier to the sender
    int64_t received = 0;  // from the sender to this tier
  };

  void Sent(const std::string& sender, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    totals_[sender].sent += bytes;
  }
  void Received(const std::string& sender, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    totals_[sender].received += bytes;
  }
  // Every sender's bytes since the tier started.
  std::map<std::string, Bytes> Totals() const {
    absl::MutexLock lock(&mu_);
    return totals_;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Bytes> totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_TRANSFER_METER_H_
