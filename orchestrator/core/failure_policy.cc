#include "orchestrator/core/failure_policy.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_line.h"

namespace sextant {
namespace {

// A trial's error as a run-ending message quotes it: one line, at most 300 characters.
std::string Quote(const std::string& error) { return absl::StrCat("\"", ErrorLine(error), "\""); }

}  // namespace

int MaxFailedTrials(const v1::Search& search) {
  if (search.max_failed_trials() > 0) return search.max_failed_trials();
  return std::max(5, (search.max_trials() + 4) / 5);
}

int MaxFailedInARow(const v1::Search& search) {
  return search.max_failed_in_a_row() > 0 ? search.max_failed_in_a_row() : 5;
}

std::optional<std::string> EveryTrialFailed(const TrialBook& book) {
  const TrialEntry* last = nullptr;  // the trial that failed last
  int failed = 0;
  for (const TrialEntry& e : book.entries()) {
    if (e.row.state == v1::COMPLETED || e.row.state == v1::PRUNED) return std::nullopt;
    if (e.row.state != v1::FAILED) continue;
    ++failed;
    if (last == nullptr || e.row.finished_at >= last->row.finished_at) last = &e;
  }
  if (last == nullptr) return std::nullopt;
  return absl::StrCat("every trial failed (", failed, " of ", failed,
                      "); the last error: ", Quote(last->row.error), " (trial ", last->row.id, ")");
}

std::optional<std::string> FailureBoundsPassed(const TrialBook& book, const v1::Search& search,
                                               double session_started) {
  std::vector<const TrialRow*> ended;
  int failed = 0;
  for (const TrialEntry& e : book.entries()) {
    if (!TrialEnded(e.row.state) || e.row.finished_at < session_started) continue;
    ended.push_back(&e.row);
    failed += e.row.state == v1::FAILED;
  }
  if (failed == 0) return std::nullopt;
  std::stable_sort(ended.begin(), ended.end(), [](const TrialRow* a, const TrialRow* b) {
    return a->finished_at > b->finished_at;
  });
  const TrialRow* last = nullptr;  // the trial that failed last
  int in_a_row = 0;
  for (const TrialRow* r : ended) {
    if (r->state != v1::FAILED || (last != nullptr && r->error != last->error)) break;
    if (last == nullptr) last = r;
    ++in_a_row;
  }
  if (last == nullptr) {  // the latest ended trial succeeded: quote the latest failure
    for (const TrialRow* r : ended) {
      if (r->state == v1::FAILED) {
        last = r;
        break;
      }
    }
  }
  const std::string quoted = absl::StrCat(Quote(last->error), " (trial ", last->id, ")");
  if (in_a_row >= MaxFailedInARow(search)) {
    return absl::StrCat(in_a_row, " trials in a row failed with the same error: ", quoted,
                        " (search.max_failed_in_a_row: ", MaxFailedInARow(search), ")");
  }
  if (failed >= MaxFailedTrials(search)) {
    return absl::StrCat(failed,
                        " trials failed (search.max_failed_trials: ", MaxFailedTrials(search),
                        "); the last error: ", quoted);
  }
  return std::nullopt;
}

}  // namespace sextant
