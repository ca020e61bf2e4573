#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_RUN_PARTICIPANTS_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_RUN_PARTICIPANTS_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/tier.h"
#include "orchestrator/federated/hand_joins.h"
#include "orchestrator/federated/participants.h"
#include "orchestrator/federated/region_launch.h"
#include "orchestrator/fleet/providers.h"
#include "orchestrator/session/run_session.h"

namespace sextant {

// How long an aggregator waits for its clients to connect before its first round.
inline constexpr double kStartupWaitSeconds = 120;

// The participants of a federated run and the global tier they send to: where they run (the
// pools' providers: Slurm jobs, processes here, or hosts where they are started by hand),
// their credentials and certificates, the signed plans of those started by hand, their launch,
// their liveness and their teardown. Not thread-safe; the tier serves on its own threads.
class RunParticipants {
 public:
  // fed_dir: the run's federation folder; spec_file: the experiment the participants read.
  RunParticipants(RunSession& session, std::string fed_dir, std::string spec_file);

  HandJoins& hand_joins() { return hand_joins_; }
  const HandJoins& hand_joins() const { return hand_joins_; }
  Participants& participants() { return *participants_; }
  const Participants& participants() const { return *participants_; }
  // The global tier; null before Serve.
  Tier* tier() { return tier_.get(); }

  // Starts the global tier of experiment_id's model (model_size floats) on the session's
  // listen address and security: it serves the signed plans of the participants started by
  // hand, and the participants this run starts get certificates (with a TLS folder).
  // InvalidArgument when they cannot be issued.
  absl::Status Serve(const std::string& experiment_id, size_t model_size);
  // Launches the participants of each region not started by hand (after Serve).
  absl::Status Launch();
  // Waits until every region's aggregator has asked for the round just published (it asks once
  // its clients are up, or after its own startup wait; those started by hand, without a time
  // limit), then starts that round's deadline afresh. Returns the regions not up by then, or
  // the status interrupt() ended the wait with.
  absl::StatusOr<std::vector<std::string>> AwaitRegions(
      const std::function<absl::Status()>& interrupt);
  // Ends the experiment for every participant, then stops what is left.
  void Teardown();

 private:
  // How this run starts its own participants (region_launch.h).
  RegionLaunch LaunchPlan() const;

  RunSession& session_;
  const v1::ExperimentSpec& spec_;
  const std::string fed_dir_;
  const std::string spec_file_;
  std::string experiment_id_;  // from Serve on
  size_t model_size_ = 0;      // from Serve on
  HandJoins hand_joins_;       // its join handlers outlive the tier that calls them
  std::unique_ptr<Provider> provider_;
  std::optional<Participants> participants_;  // from the constructor on
  std::unique_ptr<Tier> tier_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_RUN_PARTICIPANTS_H_
