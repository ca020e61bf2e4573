#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_REGION_LAUNCH_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_REGION_LAUNCH_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "orchestrator/federated/hand_joins.h"
#include "orchestrator/federated/participants.h"
#include "rpc/server_security.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// What the run needs to start its own participants: those of every region not started by hand.
struct RegionLaunch {
  const v1::ExperimentSpec* spec = nullptr;  // not owned
  const HandJoins* hand_joins = nullptr;     // the regions to leave out; not owned
  std::string worker_binary;                 // sextant-worker
  std::string tls_dir;      // the run's CA (--tls-dir); empty: loopback with secret_file
  std::string secret_file;  // the run's worker secret
  std::string fed_dir;      // the run's federation folder (certificates, addresses, work dirs)
  std::string logs_dir;     // where the participants' logs go (Participants')
  std::string experiment_id;
  std::string spec_file;            // the experiment as the participants read it
  size_t model_size = 0;            // the global model's floats
  double startup_wait_seconds = 0;  // an aggregator's wait for its clients to come up
  Clock* clock = nullptr;           // not owned
};

// Gives every participant the run starts a certificate of its own identity
// (sextant://aggregator/R/aggregator, sextant://client/R/I) from the CA in tls_dir, so that each
// may speak only as itself, and enrols the aggregators' on `security`: only they call the
// global tier. Each region's aggregator admits its own clients' certificates.
absl::Status IssueParticipantCertificates(const RegionLaunch& l, ServerSecurity* security);

// What region `region`'s aggregator starts with beside the experiment, as its flags: its region,
// the run's id and the global model's floats. It derives its settings from the experiment
// (ApplyExperiment, aggregator/tier_settings.h): the run gives it --spec, and the plan of one
// started by hand carries the signed experiment.
std::vector<std::string> AggregatorRunFlags(const std::string& region,
                                            const std::string& experiment_id, size_t model_size);

// Starts, in each region not started by hand, its aggregator (dialling the global tier at
// `tier_target`, serving its clients on its host's address toward it, which it writes to
// fed_dir/regions/REGION.address), then its clients once it serves, each with its own
// credentials and its share of federation.client_data_dirs, on `participants`. A client dials
// that address, and reads the file again while its aggregator is unreachable: a replacement
// may serve from another host. Unavailable, naming its log, when an aggregator has not served
// within 60 s.
absl::Status LaunchRegions(const RegionLaunch& l, const std::string& tier_target,
                           Participants& participants);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_REGION_LAUNCH_H_
