#ifndef SEXTANT_ORCHESTRATOR_REPORT_REPORT_H_
#define SEXTANT_ORCHESTRATOR_REPORT_REPORT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/report/report_data.h"

namespace sextant {

// The report as one self-contained HTML page: inline CSS, inline SVG charts, and one small
// inline script that only checks the charts rendered (it sets data-render-check on <body>);
// nothing is fetched, except by the live page, which fetches itself to update. Every text from the run is escaped. Stable hooks for tools and tests:
//   svg.chart#chart-* or div.nodata#chart-* per chart, with data-marks = marks drawn from data;
//   table#summary with td#summary-{experiment,state,trials,best-trial,best-value,cost-total}
//   carrying data-value (JSON text of the value in `results --format json`), tr.best-param
//   [data-name][data-value] and td.state-count[data-state][data-value];
//   div#run-in-progress when the run is live, div#no-completed when nothing completed; on the
//   live page, data-live-updates on <body> (the updates shown so far) and div#run-ended once
//   it has found the run ended.
struct ReportHtmlOptions {
  // The live page (`/` of --metrics-port): while the run is in progress the page fetches
  // itself this often and shows the new page in place, and says so. Once a fetched page is no
  // longer in progress, or the server no longer answers (it stops with the run), it stops and
  // shows div#run-ended: the run has ended, with the `sextant report` and `sextant results`
  // commands for its directory. 0 = a file (`sextant report`), which never updates; default 0.
  int refresh_seconds = 0;
};
std::string RenderReportHtml(const ReportData& data, const ReportHtmlOptions& options = {});

struct ReportFile {
  size_t bytes = 0;
  size_t trials = 0;
  // A federated run (one, not a search over them): its global rounds listed; -1 otherwise.
  int64_t rounds = -1;
  bool in_progress = false;
  bool any_completed = false;
};

// Loads run_dir (read-only) and writes the report to out_path atomically (a temporary file
// renamed into place). Returns NotFound for a missing or non-Sextant directory (nothing
// written), Internal when the file cannot be written.
absl::StatusOr<ReportFile> WriteReport(const std::string& run_dir, const std::string& out_path,
                                       absl::Time now);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_REPORT_REPORT_H_
