#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_PARTICIPANTS_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_PARTICIPANTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/federated/federated_billing.h"
#include "orchestrator/fleet/provider.h"

namespace sextant {

struct ParticipantsEnv {
  Provider* provider = nullptr;  // where participants run (local, slurm); not owned
  Clock* clock = nullptr;        // not owned
  Store* store = nullptr;        // its events; not owned
  std::ostream* err = nullptr;   // launch failures
  std::string logs_dir;          // every participant's log goes here
  double time_scale = 1;         // multiplies spot interruption times (--time-scale)
};

// A federated run's participants (each region's aggregator and clients), each an instance of
// the provider (a process here, a Slurm job in its pool's partition) with its log in logs_dir
// and a `federation_launch` event. On pools (SetMarket) each is billed on its pool from its
// start to its end, and one on a spot pool is taken back at its pool's interruption model
// (SIGTERM at the notice, when there is one, and killed at its end) and replaced in its place: a
// client with its argv (so its region, index and data), an aggregator on its region's port. Not
// thread-safe; runs on the run's loop. Everything env names must outlive it.
class Participants {
 public:
  explicit Participants(ParticipantsEnv env) : env_(std::move(env)) {}

  // From now on, participants started are billed on `billing` (not owned) at their placement,
  // and spot ones draw their interruptions from `seed`.
  void SetMarket(FederatedPlacement placement, FederatedBilling* billing, uint64_t seed);
  // Starts a participant of `region` (its aggregator, or a client) named `what` ("client
  // east/0"), its output in logs_dir/log. A launch failure is said on err and skipped.
  void Launch(const std::vector<std::string>& argv, const std::string& log, const std::string& what,
              const std::string& region, bool aggregator);
  // The port `region`'s aggregator serves its clients on: a replacement listens there again.
  void SetRegionPort(const std::string& region, int port) { ports_[region] = port; }

  // Takes back the spot participants that are due (a `federation_preempted` event each),
  // replaces those gone, and records every other exit as a `federation_exit` event. False once
  // an aggregator has exited on its own.
  bool Poll();
  // Clients alive.
  int clients() const;
  // Waits up to `grace` for every participant to exit (clients left once every aggregator has
  // exited are told to stop, SIGTERM), then kills those left; their bills end.
  void StopAll(absl::Duration grace);

  // By pool, this session: participants started, and those the market took back.
  const std::map<std::string, int>& launched() const { return launched_; }
  const std::map<std::string, int>& preemptions() const { return preemptions_; }

 private:
  struct Child {
    std::string handle;  // the provider's: a pid, a Slurm job id
    std::string what;
    int64_t bill = 0;  // its instance on billing_, when billed
    // How to start it again (a replacement after a spot interruption).
    std::vector<std::string> argv;
    std::string log;  // its first log's name (a replacement's is NAME.2.log, ...)
    std::string region;
    bool aggregator = false;
    std::string pool;  // its pool on the market, else empty
    // A spot instance: the market's notice (SIGTERM) at notice_at, when it has one, and the
    // instance taken back (killed) at interrupt_at, as the search's fleet does.
    absl::Time notice_at = absl::InfiniteFuture();
    absl::Time interrupt_at = absl::InfiniteFuture();
    bool interrupted = false;  // noticed or taken back by the market: its exit is a preemption
    bool killed = false;       // taken back
  };

  // Launch, with the log of the participant's first instance (Child::log) apart from this one's.
  void Start(const std::vector<std::string>& argv, const std::string& log,
             const std::string& first_log, const std::string& what, const std::string& region,
             bool aggregator);
  void DrawInterruption(Child& c);
  void InterruptSpotInstances();
  void Replace(const Child& c);
  // Ends a child that exited: its bill stops.
  void Ended(const Child& c);
  double EventTime() const { return absl::ToUnixMicros(env_.clock->Now()) / 1e6; }
  // Asks the provider, at most once per kStatusInterval for a provider other than local (a
  // Slurm query is a command), whether each child has ended; those that have leave children_
  // and are returned with why they ended.
  std::vector<std::pair<Child, std::string>> Reap(bool now);

  ParticipantsEnv env_;
  std::optional<FederatedPlacement> placement_;  // with billing_
  FederatedBilling* billing_ = nullptr;
  std::optional<InterruptionSampler> spot_;
  std::vector<Child> children_;
  std::map<std::string, int> launched_, preemptions_;  // by pool
  std::map<std::string, int> ports_;                   // each region's aggregator's port
  std::map<std::string, int> replaced_;                // replacements of each participant
  absl::Time next_status_ = absl::InfinitePast();
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_PARTICIPANTS_H_
