#ifndef SEXTANT_ORCHESTRATOR_INTERNAL_REPORT_CHARTS_H_
#define SEXTANT_ORCHESTRATOR_INTERNAL_REPORT_CHARTS_H_

#include <string>

#include "orchestrator/report_data.h"

namespace sextant::report {

// Each function returns one HTML fragment: an inline <svg class="chart" id="chart-..."> whose
// data-marks attribute counts the marks drawn from the run's records, or, when the run holds
// nothing to draw, a <div class="nodata" id="chart-..."> that says so and why.

// The objective of each finished trial and the best so far, against the trial number
// (by_time false) or against the time since the run started (by_time true).
std::string HistoryChart(const ReportData& d, bool by_time);
// Parameters against the objective, one polyline per completed trial.
std::string ParallelCoordinatesChart(const ReportData& d);
// MainEffectImportance of each parameter as bars, with the method stated under them.
std::string ImportanceChart(const ReportData& d);
// Learning curves (objective against fidelity, or against the report number without one),
// with rungs as dashed lines and promotions and prunes marked.
std::string IntermediateValuesChart(const ReportData& d);
// Cumulative cost by pool with the budget line and preemption events.
std::string CostChart(const ReportData& d);
// One row per worker with a bar per attempt; GPU utilisation when recorded.
std::string WorkerTimelineChart(const ReportData& d);
// Per-round accuracy and loss (global and per region), participation, and cumulative epsilon.
std::string FederatedCharts(const ReportData& d);

// The placeholder panel for a chart with no data.
std::string NoData(const std::string& id, const std::string& why);

}  // namespace sextant::report

#endif  // SEXTANT_ORCHESTRATOR_INTERNAL_REPORT_CHARTS_H_
