// Which clients take part in a synchronous round (federation.client_selection), and how fast each
// has been: persistent stragglers stop holding rounds up once their speed is known.
#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_CLIENT_SELECTION_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_CLIENT_SELECTION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

struct Participant {
  std::string region;
  int index = 0;
};

// How long each client takes to deliver its update after a round opens: an exponentially
// weighted mean of its observed seconds (weight 0.5 on the newest). A client that missed the
// round's close is observed at the round's length, a lower bound on its time.
class ClientSpeeds {
 public:
  void Observe(const std::string& client_id, double seconds);
  // Seconds expected of client_id; nullopt before its first observation.
  std::optional<double> Estimate(const std::string& client_id) const;
  const std::map<std::string, double>& estimates() const { return seconds_; }

  // {"east/0": 1.25, ...}, and back. InvalidArgument for text that is not such an object.
  std::string ToJson() const;
  static absl::StatusOr<ClientSpeeds> FromJson(absl::string_view json);

 private:
  std::map<std::string, double> seconds_;
};

// The clients of `round` under f.client_selection, sampled within each region to its
// RegionQuotas under secure aggregation and across all clients otherwise, seeded by f.seed and the
// round alone (a resumed run selects the same clients from the same speeds):
//   random (default): a uniform sample of ClientsPerRound clients;
//   fastest: the ClientsPerRound clients with the lowest expected seconds, a client never
//     observed counting as 0 (each is tried once), ties in random order;
//   power_of_choice: the fastest ClientsPerRound of a uniform sample of twice as many (the
//     "power of d choices" of load balancing, d = 2): a client is left out only when the sample
//     holds enough faster ones, so the rounds spread over all the fast clients (and their data)
//     instead of always the same few, and a slow client still takes part when the sample holds
//     too few fast ones.
// Buffered rounds (mode: buffered): every client, each version; clients_per_round there limits
// how many start on each version, which each region's aggregator draws (RegionVersionStarts).
std::vector<Participant> SelectClients(const v1::Federation& f, int64_t round,
                                       const ClientSpeeds& speeds);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_CLIENT_SELECTION_H_
