#ifndef SEXTANT_ORCHESTRATOR_REPORT_INTERNAL_REPORT_CHARTS_H_
#define SEXTANT_ORCHESTRATOR_REPORT_INTERNAL_REPORT_CHARTS_H_

#include <string>

#include "orchestrator/report/report_data.h"

namespace sextant::report {

// Each function returns one HTML fragment: an inline <svg class="chart" id="chart-..."> whose
// data-marks attribute counts the marks drawn from the run's records, or, when the run holds
// nothing to draw, a <div class="nodata" id="chart-..."> that says so and why.

// The charts of one objective (history, parallel coordinates, importance, intermediate values)
// draw the first objective of a multi-objective run, and label it so.

// True when the experiment has several objectives (spec.objectives()).
bool MultiObjective(const ReportData& d);
// "metric (maximize)" or "metric (minimize)".
std::string ObjectiveLabel(const v1::Objective& objective);
// The objective the one-objective charts draw: its metric, and in a multi-objective run also
// "(objective 1 of N, goal)".
std::string PrimaryObjectiveLabel(const ReportData& d);

// The objective of each finished trial and the best feasible value so far, against the trial
// number (by_time false) or against the time since the run started (by_time true). Infeasible
// trials are crosses.
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
// Per-round accuracy and loss (global and per region), participation, and cumulative epsilon,
// all on one round axis whose ticks are whole rounds. Under the accuracy chart a note
// (#federated-accuracy-note) says what the global and the regional lines measure.
std::string FederatedCharts(const ReportData& d);
// A federated run's dollars per round (results' rounds[].cost), compute and transfer stacked,
// one bar per round on the round axis (chart-federated-cost).
std::string RoundCostChart(const ReportData& d);

// Several objectives: every completed trial valued in all of them, the Pareto front's points
// highlighted and infeasible trials as crosses. Two objectives: one scatter (chart-pareto) with
// the front's staircase; three or four: one panel per pair (chart-pareto-I-J, 1-based). Marks:
// one per trial in each panel, plus one for the staircase.
std::string ParetoFrontCharts(const ReportData& d);
// Several objectives: hypervolume after each trial against the trial number and against the
// dollars spent on trials (a placeholder when nothing was billed), and a note that gives the
// reference point, whether it was given or derived, and why the hypervolume is 0 when it is.
// Marks: the line, plus one for each trial that raised the hypervolume.
std::string HypervolumeCharts(const ReportData& d);
// One objective, cost-aware search: each completed trial's value and the best feasible value so
// far against the cumulative dollars of the trials up to it, in trial id order. Marks: one per
// trial, plus the best-so-far line.
std::string BestValueByCostChart(const ReportData& d);
// A federated search with DP: the study's epsilon after each trial (results'
// privacy.per_trial[].study_epsilon, a line) and each trial's own (points), against the trial
// (chart-study-privacy).
std::string StudyPrivacyChart(const ReportData& d);

// The placeholder panel for a chart with no data.
std::string NoData(const std::string& id, const std::string& why);

}  // namespace sextant::report

#endif  // SEXTANT_ORCHESTRATOR_REPORT_INTERNAL_REPORT_CHARTS_H_
