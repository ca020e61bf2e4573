#include "orchestrator/core/trial_book.h"

#include <utility>

namespace sextant {

TrialEntry& TrialBook::Add(TrialEntry e) {
  entries_.push_back(std::move(e));
  return entries_.back();
}

TrialEntry* TrialBook::TakeQueued(const std::function<bool(const TrialEntry&)>& skip) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    TrialEntry& e = at(*it);
    if (skip && skip(e)) continue;
    queue_.erase(it);
    return &e;
  }
  return nullptr;
}

void TrialBook::SetRunning(TrialEntry& e, int64_t worker) {
  e.worker_id = worker;
  running_.insert(e.row.id);
  if (on_worker_) on_worker_(worker, e.row.id);
}

int64_t TrialBook::ClearRunning(TrialEntry& e) {
  const int64_t worker = e.worker_id;
  running_.erase(e.row.id);
  e.worker_id = 0;
  if (on_worker_ && worker != 0) on_worker_(worker, 0);
  return worker;
}

std::vector<TrialEntry*> TrialBook::Running() {
  std::vector<TrialEntry*> out;
  out.reserve(running_.size());
  for (int64_t id : running_) out.push_back(&at(id));
  return out;
}

std::map<int64_t, int64_t> TrialBook::RunningByWorker() const {
  std::map<int64_t, int64_t> out;
  for (int64_t id : running_) {
    const TrialEntry& e = at(id);
    if (e.worker_id != 0) out[e.worker_id] = e.row.id;
  }
  return out;
}

}  // namespace sextant
