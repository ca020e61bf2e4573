#ifndef SEXTANT_ORCHESTRATOR_SEARCH_FEDERATED_STUDY_H_
#define SEXTANT_ORCHESTRATOR_SEARCH_FEDERATED_STUDY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// A search of federated runs on pools: the spec has a federation and resources.pools.
bool FederatedOnPools(const v1::ExperimentSpec& spec);

// The money side of a federated search on pools. Each trial is the global tier of its own
// federated run, on this host, and its run places and bills its participants on the pools
// (federated_run.h). The trials that run at once are those the pools' max_instances hold
// (slots()). The trials' bills become the search's cost rows, so that results, the report and
// the budget see them; with budget.max_cost a trial starts only when the budget holds it.
// Not thread-safe: the caller holds the run core while it reads the dispatcher.
class FederatedStudy {
 public:
  // run_dir: where the trials' runs write their bills. spec and store outlive this object.
  FederatedStudy(const v1::ExperimentSpec& spec, std::string run_dir, Store* store)
      : spec_(spec), run_dir_(std::move(run_dir)), store_(store) {}

  // Places the trials' participants on the pools (InvalidArgument when the pools cannot hold
  // one trial's), reads a resume's earlier bills, and with budget.max_cost makes the budget
  // the dispatcher's lease gate (CanStart).
  absl::Status Plan(Dispatcher& d);
  // The trials whose participants the pools hold at once.
  int slots() const { return slots_; }
  // Stores the trials' bills as the search's cost rows; true when budget.max_cost would not
  // hold one more round of the running trials, or nothing runs and nothing can start.
  absl::StatusOr<bool> Record(const Dispatcher& d);
  // Whether budget.max_cost holds what the trials have been billed (read afresh: an attempt
  // that just ended is counted), one more round of every running trial, and the one about to
  // start: its participants' first billing increments (billed at their launch, they pay for
  // its first rounds) and a round.
  bool CanStart(const Dispatcher& d);

 private:
  // Every trial's bills as the search's cost rows (FederatedTrialCosts), read afresh; keeps
  // what they add up to and the dearest round so far for the budget.
  absl::StatusOr<std::vector<CostRow>> Bills(const Dispatcher& d);

  const v1::ExperimentSpec& spec_;
  const std::string run_dir_;
  Store* const store_;
  int slots_ = 0;
  double first_increments_ = 0;  // what starting one trial's participants costs at least
  double spent_ = 0;             // the trials' bills, as last read
  double round_ = 0;             // the dearest round seen, per round a trial ran (CostPerRound)
  double pending_ = 0;           // what the running trials may still add (Bills)
  std::map<int64_t, double> attempt_billed_from_;  // a running trial's bill when first seen
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SEARCH_FEDERATED_STUDY_H_
