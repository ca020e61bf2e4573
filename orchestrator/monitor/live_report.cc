#include "orchestrator/monitor/live_report.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "orchestrator/report/report.h"
#include "orchestrator/report/report_data.h"

namespace sextant {

LiveReport::LiveReport(std::string run_dir, Clock* clock, LiveReportOptions options)
    : run_dir_(std::move(run_dir)), clock_(clock), options_(options) {}

absl::StatusOr<std::string> LiveReport::Page() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (!page_.empty() && now - made_ < options_.max_age) return page_;
  absl::StatusOr<std::string> page = Make();
  if (!page.ok()) return page.status();
  page_ = *std::move(page);
  made_ = now;
  return page_;
}

void LiveReport::RunEnded() {
  ended_.store(true);
  absl::MutexLock lock(&mu_);
  page_.clear();
}

absl::StatusOr<std::string> LiveReport::Make() {
  // The report's JSON and SQLite readers may throw on a store caught mid-change; that is a
  // failed page, never a crashed run.
  try {
    absl::StatusOr<ReportData> data = LoadReportData(run_dir_, clock_->Now());
    if (!data.ok()) return data.status();
    // The run's own process holds the lock until it exits, after its end.
    if (ended_.load()) data->in_progress = false;
    ReportHtmlOptions html;
    html.refresh_seconds = options_.refresh_seconds;
    return RenderReportHtml(*data, html);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the report of ", run_dir_, ": ", e.what()));
  }
}

}  // namespace sextant
