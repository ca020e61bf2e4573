// Ask and tell: clients that run the training themselves ask the run for trials and tell it
// their results, over the same Dispatcher (store, leases, scheduler, exactly-once measurements)
// that serves workers.
#ifndef SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_H_
#define SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"
#include "sextant/v1/trial_service.pb.h"

namespace sextant {

// Bounds on what one caller may send.
inline constexpr int kMaxAskCount = 1024;    // AskRequest.count
inline constexpr int kMaxTellMetrics = 256;  // metrics in one report or tell
inline constexpr size_t kMaxMetricNameBytes = 256;
inline constexpr size_t kMaxTellErrorBytes = 4096;             // a longer error is cut
inline constexpr int64_t kMaxStepSequence = int64_t{1} << 40;  // ReportStep sequences below it
inline constexpr double kMaxAskWaitSeconds = 30;               // a longer long-poll is cut
// How long an asked trial is held after its last ask, report or touch when the experiment's
// search.lease is not set.
inline constexpr double kDefaultAskTellLeaseSeconds = 600;

// The lease of an ask/tell run: search.lease_seconds, else kDefaultAskTellLeaseSeconds.
double AskTellLeaseSeconds(const v1::ExperimentSpec& spec);

// The leases of asked trials as recorded in the store (for DispatcherOptions::held_leases), so
// that a trial asked by one process stays held when another process loads the run. Empty when
// none are recorded; DataLoss when the record does not parse.
absl::StatusOr<std::map<int64_t, HeldLease>> LoadHeldLeases(Store& store);

// The ask/tell core over a Dispatcher, with no gRPC in it. An asked trial is leased from the
// dispatcher like a worker's (one dispatcher worker per asker identity) and its lease is
// recorded in the store in the same transaction, so that it survives the process: the lease
// lapses lease_seconds after the last Ask, ReportStep or Touch naming it, and the trial is then
// requeued (by Dispatcher::Tick live, or when the next process loads the run).
//
// `identity` is the caller's certificate identity ("" when it has none); a trial asked by one
// identity may be reported, touched or told only by the same one (PermissionDenied).
// Every refusal leaves the store unchanged. Codes: NotFound (no such trial), InvalidArgument
// (malformed: a value that is not finite, a bound exceeded, another run's run_id), Aborted (the
// attempt no longer holds its lease: ask again), PermissionDenied (another identity's trial);
// any other code is a store failure. Not thread-safe: call it under the dispatcher's lock.
class AskTell {
 public:
  // Random fills n bytes (for the run id); default: the OS's CSPRNG.
  using Random = std::function<void(uint8_t* out, size_t n)>;

  // dispatcher, store and clock must outlive it; the dispatcher must have been built over
  // this store with held_leases from LoadHeldLeases. Records a run id in the store when it has
  // none.
  static absl::StatusOr<std::unique_ptr<AskTell>> Create(Dispatcher* dispatcher, Store* store,
                                                         Clock* clock, Random random = nullptr);

  // This run's id (AskedTrial.run_id); every later call must carry it back.
  const std::string& run_id() const { return run_id_; }

  // Leases up to count trials (fewer when no more can start now; none and done when the run
  // has ended). count 0 means 1; more than kMaxAskCount is InvalidArgument.
  absl::StatusOr<v1::AskResponse> Ask(const v1::AskRequest& request, const std::string& identity);

  // Stores an intermediate measurement exactly once per (trial, attempt, sequence), renews the
  // lease and returns what the scheduler wants (continue, stop, pause, notice).
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& request,
                                                    const std::string& identity);

  // Renews the lease.
  absl::StatusOr<v1::TouchResponse> Touch(const v1::TouchRequest& request,
                                          const std::string& identity);

  // Ends the attempt: COMPLETED with every objective's value (values, or the objectives'
  // metrics), PRUNED, or FAILED (requeued while failures <= trial.max_restarts). A second tell
  // of an attempt that was told returns the stored result with already_told, unchanged.
  absl::StatusOr<v1::TellResponse> Tell(const v1::TellRequest& request,
                                        const std::string& identity);

 private:
  struct Lease {
    int attempt = 0;
    int64_t worker_id = 0;
    absl::Time deadline;
    double started = 0;  // unix seconds
    std::string identity;
    int64_t sequence = 0;  // the largest step sequence stored in this attempt
  };

  // Why an ask that got no trial cannot get one until an asked trial is told or lapses (no new
  // trial may be created): the held trials and their leases' ends. Empty otherwise.
  std::string WaitingFor() const;

  AskTell(Dispatcher* dispatcher, Store* store, Clock* clock)
      : dispatcher_(dispatcher), store_(store), clock_(clock) {}
  // The lease of the trial's attempt (0: the current one), checked against run_id and identity.
  absl::StatusOr<std::pair<int64_t, Lease*>> Held(const std::string& run_id, int64_t trial_id,
                                                  int attempt, const std::string& identity);
  // Forgets leases whose attempt no longer runs (lapsed, or ended by the dispatcher).
  void ForgetEnded();
  absl::StatusOr<int64_t> WorkerFor(const std::string& identity);
  absl::Status CheckRunId(const std::string& run_id) const;
  absl::Status SaveLeasesInTx();
  // Runs f in one store transaction with the lease record; rolls back on error.
  template <typename F>
  auto Transaction(F&& f) -> decltype(f());
  // The stored result of trial_id as a TellResponse.
  v1::TellResponse Result(int64_t trial_id, int attempt) const;
  double Now() const;

  Dispatcher* dispatcher_;
  Store* store_;
  Clock* clock_;
  std::string run_id_;
  std::map<int64_t, Lease> leases_;         // trial id -> its asked attempt's lease
  std::map<std::string, int64_t> workers_;  // identity -> dispatcher worker id
  std::string saved_leases_;                // the lease record as last written
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_H_
