#include "orchestrator/search/local_workers.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sextant {

absl::Status LocalWorkers::Launch(int index) {
  SEXTANT_ASSIGN_OR_RETURN(
      pid_t pid,
      launcher_->Launch(argv_(index), absl::StrCat(logs_dir_, "/worker-", index, ".log")));
  workers_.push_back(Local{pid, index});
  return absl::OkStatus();
}

void LocalWorkers::Reap(bool replace) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (!launcher_->Poll(it->pid)) {
      ++it;
      continue;
    }
    const int index = it->index;
    it = workers_.erase(it);
    if (replace && respawns_left_ > 0) {
      --respawns_left_;
      if (absl::Status s = Launch(index); !s.ok()) *err_ << "sextant: " << s.message() << "\n";
      return;  // the iterator is stale after push_back
    }
  }
}

void LocalWorkers::Signal(int sig) {
  for (const Local& w : workers_) launcher_->Signal(w.pid, sig);
}

}  // namespace sextant
