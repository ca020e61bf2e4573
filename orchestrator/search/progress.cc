#include "orchestrator/search/progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/duration.h"
#include "common/error_line.h"

namespace sextant {

ProgressReporter::ProgressReporter(std::ostream* out, bool tty, Clock* clock, std::string metric,
                                   double plain_interval_seconds)
    : out_(out),
      tty_(tty),
      clock_(clock),
      metric_(std::move(metric)),
      plain_interval_(plain_interval_seconds),
      start_(clock->Now()) {}

std::string ProgressReporter::Line(const DispatchStats& stats, const std::string& metric,
                                   double elapsed, bool with_bar) {
  const int total = std::max(stats.max_trials, 1);
  const int done = stats.finished;
  std::string line;
  if (with_bar) {
    const int width = 20;
    int filled = std::min(width, done * width / total);
    line = absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '-'), "] ");
  }
  absl::StrAppend(&line, done, "/", stats.max_trials, " trials");
  auto running = stats.by_state.find(TrialStateName(v1::RUNNING));
  if (running != stats.by_state.end() && running->second > 0) {
    absl::StrAppend(&line, " (", running->second, " running)");
  }
  if (stats.failed > 0) absl::StrAppend(&line, "  ", stats.failed, " FAILED");
  if (stats.preemptions > 0) absl::StrAppend(&line, " ", stats.preemptions, " preempted");
  if (stats.best_value) {
    absl::StrAppend(&line, "  best ", metric, "=", *stats.best_value, " (#", stats.best_trial, ")");
  }
  if (stats.hypervolume) {
    absl::StrAppend(&line, "  front ", stats.front_size, " hypervolume ",
                    absl::StrFormat("%.4g", *stats.hypervolume));
  }
  if (stats.spend) {
    absl::StrAppend(&line, "  spend ", absl::StrFormat("%.2f", *stats.spend));
    if (stats.budget) absl::StrAppend(&line, absl::StrFormat("/%.2f", *stats.budget));
  }
  absl::StrAppend(&line, "  elapsed ", FormatClock(elapsed));
  if (done > 0 && done < total) {
    absl::StrAppend(&line, "  eta ", FormatClock(elapsed / done * (total - done)));
  }
  return line;
}

void ProgressReporter::ShowNewFailures(const DispatchStats& stats) {
  for (const auto& [trial, why] : stats.recent_failures) {
    if (!shown_failures_.insert(trial).second) continue;
    const std::string error = ErrorLine(why, 240);
    // A failure is news: its own line, above the redrawn progress line on a terminal.
    *out_ << (tty_ ? "\r\033[K" : "") << "sextant: trial " << trial << " failed: " << error
          << "\n";
    last_draw_ = absl::InfinitePast();
  }
}

void ProgressReporter::Update(const DispatchStats& stats) {
  ShowNewFailures(stats);
  absl::Time now = clock_->Now();
  double elapsed = absl::ToDoubleSeconds(now - start_);
  if (tty_) {
    if (now - last_draw_ < absl::Milliseconds(100)) return;
    *out_ << "\r\033[K" << Line(stats, metric_, elapsed, true) << std::flush;
  } else {
    if (stats.finished == last_finished_ || now - last_draw_ < absl::Seconds(plain_interval_)) {
      return;
    }
    *out_ << Line(stats, metric_, elapsed, false) << "\n" << std::flush;
    last_finished_ = stats.finished;
  }
  last_draw_ = now;
}

void ProgressReporter::Finish(const DispatchStats& stats) {
  ShowNewFailures(stats);
  double elapsed = absl::ToDoubleSeconds(clock_->Now() - start_);
  if (tty_) {
    *out_ << "\r\033[K" << Line(stats, metric_, elapsed, true) << "\n" << std::flush;
  } else {
    *out_ << Line(stats, metric_, elapsed, false) << "\n" << std::flush;
  }
}

}  // namespace sextant
