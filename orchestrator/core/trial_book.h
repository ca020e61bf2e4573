#ifndef SEXTANT_ORCHESTRATOR_CORE_TRIAL_BOOK_H_
#define SEXTANT_ORCHESTRATOR_CORE_TRIAL_BOOK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "orchestrator/core/store.h"
#include "strategies/sampler.h"
#include "strategies/scheduler.h"
#include "strategies/search_space.h"

namespace sextant {

// One trial as the dispatcher holds it between store writes: its stored row and what the
// current attempt has told so far.
struct TrialEntry {
  TrialRow row;
  Params params;
  int64_t worker_id = 0;  // the worker running it; 0 when none
  absl::Time lease_deadline;
  std::optional<double> objective;       // last reported value of the (first) objective metric
  std::map<std::string, double> latest;  // last value of each objective or constraint metric
  double attempt_started = 0;            // when the current attempt was leased; 0 when none
  // Multi-fidelity bookkeeping for the current attempt.
  Decision::Kind action = Decision::Kind::kContinue;  // what the scheduler last asked
  std::string action_reason;
  double attempt_fidelity = -1;    // last fidelity reported in this attempt (-1: none yet)
  std::string fidelity_error;      // set when the fidelity went backwards
  std::set<std::string> reported;  // every metric name the trial has reported (at most 64)
};

// The run's trials in memory: each by id (1, 2, ...), the queue of PENDING ids, the RUNNING
// ones, and the sampler's view of each (history). No store and no policy: the caller writes
// each change through and decides what runs. Not thread-safe.
class TrialBook {
 public:
  // Told whenever a trial starts running on a worker (worker, trial) or stops (worker, 0).
  explicit TrialBook(std::function<void(int64_t worker, int64_t trial)> on_worker = nullptr)
      : on_worker_(std::move(on_worker)) {}

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  // Trial id; the caller checks 1 <= id <= size().
  TrialEntry& at(int64_t id) { return entries_[id - 1]; }
  const TrialEntry& at(int64_t id) const { return entries_[id - 1]; }
  // The stored row of trial id as of now; null when there is no such trial.
  const TrialRow* row(int64_t id) const {
    return id >= 1 && id <= size() ? &entries_[id - 1].row : nullptr;
  }
  const std::vector<TrialEntry>& entries() const { return entries_; }
  std::vector<TrialEntry>& entries() { return entries_; }
  // Appends trial size() + 1 (e.row.id must say so) and returns it.
  TrialEntry& Add(TrialEntry e);

  // PENDING trial ids, oldest first; a requeued attempt goes to the front.
  std::deque<int64_t>& queue() { return queue_; }
  const std::deque<int64_t>& queue() const { return queue_; }
  // Takes the first queued trial for which skip() is false off the queue; null when none.
  TrialEntry* TakeQueued(const std::function<bool(const TrialEntry&)>& skip);

  // e runs on worker now / no longer runs (returns the worker it ran on, 0 when none).
  void SetRunning(TrialEntry& e, int64_t worker);
  int64_t ClearRunning(TrialEntry& e);
  int running() const { return static_cast<int>(running_.size()); }
  // The running trials, by id; a copy, so the caller may end them while walking it.
  std::vector<TrialEntry*> Running();
  // The running trial of each busy worker (worker id -> trial id).
  std::map<int64_t, int64_t> RunningByWorker() const;

  // What the sampler knows of each trial, history()[id - 1].
  std::vector<Observation>& history() { return history_; }

 private:
  std::function<void(int64_t, int64_t)> on_worker_;
  std::vector<TrialEntry> entries_;
  std::deque<int64_t> queue_;
  std::set<int64_t> running_;  // RUNNING ids, so that no tick walks every trial
  std::vector<Observation> history_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_TRIAL_BOOK_H_
