#include "orchestrator/report/report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/report/internal/report_charts.h"
#include "orchestrator/report/svg_canvas.h"

namespace sextant {
namespace {

constexpr const char* kStyle = R"css(
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px auto;max-width:960px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:14px;margin:14px 0 4px;color:#444}
.meta{color:#555;font-size:13px}
.banner{padding:10px 14px;margin:12px 0;border-radius:4px;font-size:14px}
.live{background:#fff4ce;border:1px solid #e0b400}.warn{background:#fde2e1;border:1px solid #d62728}
.nodata{padding:18px;margin:6px 0;background:#f6f6f6;border:1px dashed #bbb;color:#555;font-size:13px}
.note,.method{font-size:12px;color:#555;margin:4px 0 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums}
svg.chart{display:block;max-width:100%;height:auto}
.panels{display:grid;grid-template-columns:1fr 1fr;gap:8px}
)css";

// Fills data-render-check on <body>: "ok" when every chart has a non-empty box, otherwise the
// ids of those that do not; also where each chart lies, for screenshot checks.
constexpr const char* kScript = R"js(
addEventListener('load',function(){var c=document.querySelectorAll('svg.chart,div.nodata'),bad=[],box={};
for(var i=0;i<c.length;i++){var r=c[i].getBoundingClientRect();if(!(r.width>0&&r.height>0))bad.push(c[i].id);
box[c[i].id]=[Math.round(r.left+scrollX),Math.round(r.top+scrollY),Math.round(r.width),Math.round(r.height)];}
var b=document.body;b.setAttribute('data-chart-boxes',JSON.stringify(box));
b.setAttribute('data-page-height',document.documentElement.scrollHeight);
b.setAttribute('data-render-ms',Math.round(performance.now()));
b.setAttribute('data-render-check',bad.length?'blank:'+bad.join(','):'ok');});
)js";

// The live page's update: every REFRESH ms it fetches itself and, while the run goes on, shows
// the new page in place. A meta refresh would reload into "connection refused" once the run
// and its server are gone; this page instead says, when the run has ended or its server no
// longer answers, that the run is over and how to get its report and results.
constexpr const char* kLiveScript = R"js(
(function(){var every=REFRESH,updates=0;
function say(){var b=document.getElementById('run-in-progress')||document.getElementById('run-ended');
if(!b){var m=document.querySelector('p.meta');b=document.createElement('div');m.parentNode.insertBefore(b,m.nextSibling);}
var c=document.querySelector('p.meta code'),dir=c?c.textContent:'RUN_DIR';
b.id='run-ended';b.className='banner';b.textContent='';
var s=document.createElement('strong');s.textContent='The run has ended.';b.appendChild(s);
b.appendChild(document.createTextNode(' This live page stops with it. The report: '));
var r=document.createElement('code');r.textContent='sextant report '+dir+' -o report.html';b.appendChild(r);
b.appendChild(document.createTextNode('; the results: '));
var t=document.createElement('code');t.textContent='sextant results '+dir;b.appendChild(t);
b.appendChild(document.createTextNode('.'));}
function poll(){fetch(location.href,{cache:'no-store'}).then(function(r){
if(!r.ok){setTimeout(poll,every);return;}
return r.text().then(function(h){var n=new DOMParser().parseFromString(h,'text/html');
document.title=n.title;document.body.innerHTML=n.body.innerHTML;
document.body.setAttribute('data-live-updates',++updates);
if(n.getElementById('run-in-progress'))setTimeout(poll,every);else say();});
},function(){say();});}
setTimeout(poll,every);})();
)js";

std::string Attr(const nlohmann::json& v) { return EscapeXml(v.dump()); }

std::string Show(const nlohmann::json& v) {
  if (v.is_string()) return EscapeXml(v.get<std::string>());
  if (v.is_number_float()) return absl::StrFormat("%.6g", v.get<double>());
  return EscapeXml(v.dump());
}

std::string Time(double unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z",
                          absl::FromUnixMicros(static_cast<int64_t>(unix_seconds * 1e6)),
                          absl::LocalTimeZone());
}

bool AnyCompleted(const ReportData& d) {
  return std::any_of(d.trials.begin(), d.trials.end(),
                     [](const TrialRow& t) { return t.state == v1::COMPLETED; });
}

// A best value (one objective) or a front point (several) exists: some completed trial is
// feasible and valued.
bool AnyResult(const ReportData& d) {
  if (report::MultiObjective(d)) {
    return d.results.contains("pareto") && d.results["pareto"].is_array() &&
           !d.results["pareto"].empty();
  }
  return !d.results["best"].is_null();
}

std::string Banners(const ReportData& d, bool any_completed, int refresh_seconds) {
  std::string out;
  if (d.in_progress) {
    absl::StrAppend(&out,
                    "<div class=\"banner live\" id=\"run-in-progress\"><strong>Run in "
                    "progress.</strong> This report shows the run so far, as of ",
                    EscapeXml(Time(d.generated_at)),
                    refresh_seconds > 0
                        ? absl::StrCat("; this page updates every ", refresh_seconds,
                                       " s and says when the run has ended.</div>")
                        : "; run <code>sextant report</code> again for newer data.</div>");
  } else if (d.state == v1::RUN_RUNNING) {
    absl::StrAppend(&out,
                    "<div class=\"banner warn\" id=\"run-stopped\"><strong>The run stopped "
                    "without finishing</strong> (no orchestrator holds its directory). "
                    "Continue it with <code>sextant resume ",
                    EscapeXml(d.run_dir), "</code>.</div>");
  }
  const bool multi = report::MultiObjective(d);
  if (!any_completed) {
    absl::StrAppend(&out,
                    "<div class=\"banner warn\" id=\"no-completed\"><strong>No trial has "
                    "completed yet</strong>, so there is no ",
                    multi ? "Pareto front" : "best value",
                    "; the charts below show what has been recorded.</div>");
  } else if (!AnyResult(d)) {
    absl::StrAppend(&out,
                    "<div class=\"banner warn\" id=\"no-feasible\"><strong>No completed "
                    "trial met every constraint</strong>, so there is no ",
                    multi ? "Pareto front" : "best value",
                    "; infeasible trials are drawn as crosses.</div>");
  }
  for (const std::string& n : d.notes)
    absl::StrAppend(&out, "<p class=\"note\">", EscapeXml(n), "</p>");
  return out;
}

// The summary rows of a multi-objective run: the front's size and trials, and the hypervolume.
template <typename Row>
void FrontRows(const nlohmann::json& r, const Row& row) {
  const nlohmann::json& pareto = r.contains("pareto") ? r["pareto"] : nlohmann::json::array();
  std::vector<std::string> ids;
  for (const auto& p : pareto) ids.push_back(absl::StrCat("#", Show(p["trial"])));
  row("Pareto front", "summary-front-size", pareto.size(),
      pareto.empty() ? std::string("no feasible completed trial")
                     : absl::StrCat(pareto.size(), " trials (", absl::StrJoin(ids, ", "), ")"));
  nlohmann::json hv = r.contains("hypervolume") ? r["hypervolume"] : nlohmann::json(nullptr);
  std::vector<std::string> ref;
  if (r.contains("reference_point") && r["reference_point"].is_array()) {
    for (const auto& v : r["reference_point"]) ref.push_back(Show(v));
  }
  row("Hypervolume", "summary-hypervolume", hv,
      absl::StrCat(Show(hv), " (reference point (", absl::StrJoin(ref, ", "), "), ",
                   Show(r.value("reference_point_source", "derived")), ")"));
}

// The trials of the Pareto front with their values and parameters (at most 200 rows).
std::string FrontTable(const nlohmann::json& r) {
  if (!r.contains("pareto") || !r["pareto"].is_array() || r["pareto"].empty()) return "";
  std::string out =
      "<h3>Trials on the Pareto front</h3><table id=\"pareto-trials\"><tr><th>trial</th>";
  for (const auto& o : r["objectives"]) {
    absl::StrAppend(&out, "<th>", Show(o["metric"]), " (", Show(o["goal"]), ")</th>");
  }
  out += "<th>parameters</th></tr>";
  size_t shown = 0;
  for (const auto& p : r["pareto"]) {
    if (++shown > 200) break;
    absl::StrAppend(&out, "<tr class=\"pareto-trial\" data-trial=\"", Attr(p["trial"]), "\"><td>#",
                    Show(p["trial"]), "</td>");
    for (const auto& v : p["values"]) absl::StrAppend(&out, "<td class=\"num\">", Show(v), "</td>");
    absl::StrAppend(&out, "<td>", EscapeXml(p["params"].dump()), "</td></tr>");
  }
  out += "</table>";
  if (r["pareto"].size() > 200) {
    absl::StrAppend(&out, "<p class=\"note\">The first 200 of ", r["pareto"].size(),
                    " front trials; <code>sextant results</code> lists them all.</p>");
  }
  return out;
}

// One row of the summary table: its label, an id for tests and links, the value as data (the
// results' exact value) and as shown.
void AddSummaryRow(std::string* out, const std::string& label, const std::string& id,
                   const nlohmann::json& v, const std::string& shown) {
  absl::StrAppend(out, "<tr><th>", label, "</th><td id=\"", id, "\" data-value=\"", Attr(v), "\">",
                  shown, "</td></tr>");
}
using SummaryRow = std::function<void(const std::string&, const std::string&, const nlohmann::json&,
                                      const std::string&)>;

// The summary table's opening and the rows every run has: the experiment and its state.
std::string SummaryStart(const ReportData& d) {
  const nlohmann::json& r = d.results;
  std::string out = "<table id=\"summary\">";
  AddSummaryRow(&out, "Experiment", "summary-experiment", r["experiment"], Show(r["experiment"]));
  AddSummaryRow(&out, "State", "summary-state", r["state"],
                absl::StrCat(Show(r["state"]), d.in_progress ? " (in progress)" : ""));
  return out;
}

// The preemptions row: the results' total and each pool's count.
void PreemptionsRow(const nlohmann::json& r, const SummaryRow& row) {
  if (!r.contains("preemptions") || !r["preemptions"].is_object()) return;
  const nlohmann::json& pre = r["preemptions"];
  std::string shown = Show(pre["total"]);
  std::vector<std::string> pools;
  for (const auto& [pool, n] : pre["by_pool"].items())
    pools.push_back(absl::StrCat(EscapeXml(pool), " ", Show(n)));
  if (!pools.empty()) absl::StrAppend(&shown, " (by pool: ", absl::StrJoin(pools, ", "), ")");
  row("Preemptions", "summary-preemptions", pre, shown);
}

std::string Summary(const ReportData& d) {
  const nlohmann::json& r = d.results;
  std::map<std::string, int> counts;
  for (const auto& t : r["trials"]) ++counts[t["state"].get<std::string>()];
  std::string out = SummaryStart(d);
  const SummaryRow row = [&](const std::string& label, const std::string& id,
                             const nlohmann::json& v, const std::string& shown) {
    AddSummaryRow(&out, label, id, v, shown);
  };
  row("Trials", "summary-trials", r["trials"].size(), absl::StrCat(r["trials"].size()));
  const nlohmann::json& best = r["best"];
  const bool multi = report::MultiObjective(d);
  if (multi) {
    std::vector<std::string> names;
    for (const auto& o : r["objectives"]) {
      names.push_back(absl::StrCat(Show(o["goal"]), " ", Show(o["metric"])));
    }
    row("Objectives", "summary-objectives", r["objectives"], absl::StrJoin(names, ", "));
  } else {
    row("Objective", "summary-objective", r["objective"],
        absl::StrCat(Show(r["objective"]["goal"]), " ", Show(r["objective"]["metric"])));
  }
  if (r.contains("constraints") && r["constraints"].is_array()) {
    std::vector<std::string> shown;
    for (const auto& c : r["constraints"]) {
      std::string s = Show(c["metric"]);
      if (c.contains("min")) s = absl::StrCat(Show(c["min"]), " &#8804; ", s);
      if (c.contains("max")) absl::StrAppend(&s, " &#8804; ", Show(c["max"]));
      shown.push_back(s);
    }
    row("Constraints", "summary-constraints", r["constraints"], absl::StrJoin(shown, ", "));
    int infeasible = 0;
    for (const auto& t : r["trials"]) {
      if (t["state"] == TrialStateName(v1::COMPLETED) && !t.value("feasible", true)) ++infeasible;
    }
    row("Infeasible trials", "summary-infeasible", infeasible,
        absl::StrCat(infeasible, " completed trials broke a constraint"));
  }
  if (multi) {
    FrontRows(r, row);
  } else if (best.is_null()) {
    row("Best trial", "summary-best-trial", nullptr,
        AnyCompleted(d) ? "none feasible" : "none completed");
    row(absl::StrCat("Best ", Show(r["objective"]["metric"])), "summary-best-value", nullptr,
        "&#8212;");
  } else {
    row("Best trial", "summary-best-trial", best["trial"], absl::StrCat("#", Show(best["trial"])));
    row(absl::StrCat("Best ", Show(r["objective"]["metric"])), "summary-best-value", best["value"],
        Show(best["value"]));
  }
  row("Total cost", "summary-cost-total", r["cost"]["total"],
      absl::StrCat(Show(r["cost"]["total"]), " ", Show(r["cost"]["currency"])));
  PreemptionsRow(r, row);
  out += "</table>";
  if (multi) out += FrontTable(r);
  if (!best.is_null() && best["params"].is_object()) {
    out +=
        "<h3>Parameters of the best trial</h3><table "
        "id=\"best-params\"><tr><th>parameter</th><th>value</th></tr>";
    for (const auto& [k, v] : best["params"].items()) {
      absl::StrAppend(&out, "<tr class=\"best-param\" data-name=\"", EscapeXml(k),
                      "\" data-value=\"", Attr(v), "\"><td>", EscapeXml(k),
                      "</td><td class=\"num\">", Show(v), "</td></tr>");
    }
    out += "</table>";
  }
  out += "<h3>Trials by state</h3><table id=\"state-counts\"><tr>";
  for (const auto& [state, n] : counts) absl::StrAppend(&out, "<th>", EscapeXml(state), "</th>");
  out += "</tr><tr>";
  for (const auto& [state, n] : counts) {
    absl::StrAppend(&out, "<td class=\"state-count num\" data-state=\"", EscapeXml(state),
                    "\" data-value=\"", n, "\">", n, "</td>");
  }
  out += "</tr></table>";
  return out;
}

// A plain federated run's summary: what a federation user asks first (rounds, the model's
// score, clients, privacy, dollars, preemptions), from the same results as `sextant results`.
std::string FederatedSummary(const ReportData& d) {
  const nlohmann::json& r = d.results;
  const nlohmann::json& fed = r["federation"];
  std::string out = SummaryStart(d);
  const SummaryRow row = [&](const std::string& label, const std::string& id,
                             const nlohmann::json& v, const std::string& shown) {
    AddSummaryRow(&out, label, id, v, shown);
  };
  row("Federation", "summary-federation", fed["description"], Show(fed["description"]));
  row("Rounds", "summary-rounds", fed["rounds_completed"],
      absl::StrCat(Show(fed["rounds_completed"]), " of ", Show(fed["rounds_planned"])));
  nlohmann::json last = nullptr;
  if (r.contains("rounds") && r["rounds"].is_array() && !r["rounds"].empty()) {
    last = r["rounds"].back();
  }
  const nlohmann::json none = nullptr;
  const nlohmann::json& accuracy = last.is_null() ? none : last["accuracy"];
  row("Global accuracy", "summary-accuracy", accuracy,
      accuracy.is_null() ? "&#8212;"
                         : absl::StrCat(Show(accuracy), " after round ", Show(last["round"])));
  row("Clients in the last round", "summary-clients", last.is_null() ? none : last["clients"],
      last.is_null() ? "&#8212;" : Show(last["clients"]));
  if (!last.is_null() && last["epsilon"].is_number()) {
    row("Privacy loss (&#949;)", "summary-epsilon", last["epsilon"], Show(last["epsilon"]));
  }
  const nlohmann::json& cost = r["cost"];
  row("Total cost", "summary-cost-total", cost["total"],
      absl::StrCat(Show(cost["total"]), " ", Show(cost["currency"]), " (compute ",
                   Show(cost["compute"]), ", transfer ", Show(cost["transfer"]), ")"));
  PreemptionsRow(r, row);
  return out + "</table>";
}

std::string Events(const ReportData& d) {
  if (d.events.empty()) return "<p class=\"note\">No events recorded.</p>";
  std::map<std::string, int> kinds;
  for (const EventRow& e : d.events) ++kinds[e.kind];
  std::string out = "<table id=\"event-counts\"><tr><th>event</th><th>count</th></tr>";
  for (const auto& [k, n] : kinds) {
    absl::StrAppend(&out, "<tr><td>", EscapeXml(k), "</td><td class=\"num\">", n, "</td></tr>");
  }
  out +=
      "</table><h3>Latest events</h3><table "
      "id=\"events\"><tr><th>time</th><th>event</th><th>trial</th><th>message</th></tr>";
  size_t from = d.events.size() > 30 ? d.events.size() - 30 : 0;
  for (size_t i = from; i < d.events.size(); ++i) {
    const EventRow& e = d.events[i];
    std::string msg = e.message.size() > 300 ? e.message.substr(0, 300) + "..." : e.message;
    absl::StrAppend(&out, "<tr><td>", absl::StrFormat("+%.1f s", e.time - d.started_at),
                    "</td><td>", EscapeXml(e.kind), "</td><td>",
                    e.trial_id ? absl::StrCat(e.trial_id) : "", "</td><td>", EscapeXml(msg),
                    "</td></tr>");
  }
  return out + "</table>";
}

// A section heading; its id ("section-" + id) lets tests and links find the section.
std::string Section(const std::string& id, const std::string& heading) {
  return absl::StrCat("<h2 id=\"section-", id, "\">", heading, "</h2>");
}

std::string SearchLine(const ReportData& d) {
  const v1::Search& s = d.spec.search();
  std::string out = absl::StrCat("sampler ", v1::Search::Sampler_Name(s.sampler()));
  if (s.scheduler() != v1::Search::NONE && s.scheduler() != v1::Search::SCHEDULER_UNSPECIFIED) {
    absl::StrAppend(&out, ", scheduler ", v1::Search::Scheduler_Name(s.scheduler()), " over ",
                    s.fidelity().name(), " ", s.fidelity().min(), "..", s.fidelity().max());
  }
  if (s.cost_aware()) absl::StrAppend(&out, ", cost-aware");
  if (d.spec.objectives_size() > 1)
    absl::StrAppend(&out, ", ", d.spec.objectives_size(), " objectives");
  if (d.spec.constraints_size() > 0) {
    absl::StrAppend(&out, ", ", d.spec.constraints_size(),
                    d.spec.constraints_size() == 1 ? " constraint" : " constraints");
  }
  absl::StrAppend(&out, ", seed ", s.seed(), ", up to ", s.max_trials(), " trials");
  return absl::AsciiStrToLower(out);
}

// A search's sections (a federated search's trials included), after its banners.
std::string SearchSections(const ReportData& d, bool multi) {
  std::string html;
  absl::StrAppend(&html, Section("summary", "Summary"), Summary(d));
  if (multi) {
    absl::StrAppend(&html, Section("pareto", "Pareto front"), report::ParetoFrontCharts(d),
                    "<p class=\"note\">Every completed trial with a value for each objective. "
                    "Red points are the Pareto front of all the objectives (feasible trials that "
                    "no other feasible trial beats in every objective); orange crosses broke a "
                    "constraint.",
                    d.spec.objectives_size() > 2
                        ? " One panel per pair of objectives: a front point may look beaten in one "
                          "pair, since it is better in another objective."
                        : " The line is the front's staircase: the region it bounds, towards the "
                          "better corner, is what the front attains.",
                    "</p>");
    absl::StrAppend(&html, Section("hypervolume", "Hypervolume"), report::HypervolumeCharts(d));
  }
  const std::string one =
      multi ? absl::StrCat(": ", EscapeXml(report::PrimaryObjectiveLabel(d))) : "";
  if (multi) {
    absl::StrAppend(&html,
                    "<p class=\"note\" id=\"first-objective-note\">The sections from "
                    "here to Intermediate values draw one objective: the first, ",
                    EscapeXml(report::PrimaryObjectiveLabel(d)),
                    ". The Pareto front and Hypervolume sections above draw them all.</p>");
  }
  absl::StrAppend(&html, Section("history", absl::StrCat("Optimisation history", one)),
                  "<h3>By trial number</h3>", report::HistoryChart(d, false), "<h3>By time</h3>",
                  report::HistoryChart(d, true));
  if (d.spec.search().cost_aware() && !multi) {
    absl::StrAppend(&html, Section("best-cost", "Best value against dollars"),
                    report::BestValueByCostChart(d),
                    "<p class=\"note\">A cost-aware search chooses by expected improvement per "
                    "expected dollar: each completed trial's value against the dollars billed "
                    "for the trials up to it (in trial order), with the best feasible value so "
                    "far.</p>");
  }
  absl::StrAppend(&html, Section("parallel", absl::StrCat("Parallel coordinates", one)),
                  report::ParallelCoordinatesChart(d),
                  "<p class=\"note\">One line per completed trial; red is best, blue worst",
                  multi ? " in the first objective" : "",
                  ". Log-scaled parameters have log axes; categories are evenly spaced.</p>");
  absl::StrAppend(
      &html, Section("importance", absl::StrCat("Parameter importance", one)),
      report::ImportanceChart(d),
      "<p class=\"method\" id=\"importance-method\">Method: a functional ANOVA of main "
      "effects over binned marginals. The objective is clipped to its 5th and 95th "
      "percentiles (so one diverged trial cannot dominate); each parameter is split into bins (one "
      "per category or distinct value when there are "
      "at most 8, otherwise up to min(8, n/5) equal-count bins of the value, or of its "
      "logarithm for log-scaled parameters); the importance is the share of the objective's "
      "variance explained by the bin means, less the share that noise alone would "
      "explain with that many bins ((B-1)/(n-1)), rescaled. Shares need not add up to "
      "100%: the rest is interactions and noise. It uses the completed trials' "
      "values; when a multi-fidelity search completed fewer than 20 trials and a rung "
      "holds more, it uses the values at that rung instead (stated above the bars).</p>");
  absl::StrAppend(&html, Section("intermediate", absl::StrCat("Intermediate values", one)),
                  report::IntermediateValuesChart(d));
  absl::StrAppend(&html, Section("cost", "Cost over time"), report::CostChart(d));
  absl::StrAppend(&html, Section("timeline", "Worker timeline"), report::WorkerTimelineChart(d));
  absl::StrAppend(&html, Section("federated", "Federated rounds"), report::FederatedCharts(d));
  if (d.spec.has_federation() && d.spec.federation().has_dp()) {
    absl::StrAppend(&html, Section("study-privacy", "Privacy spent by the study"),
                    report::StudyPrivacyChart(d),
                    "<p class=\"note\">Every trial trains on the same clients: the study's "
                    "epsilon composes every round of every trial (RDP at the experiment's "
                    "delta), which is more than any one trial's.</p>");
  }
  return html;
}

// A plain federated run's sections: the federation first, then its dollars, with no search
// sections (there is no search).
std::string FederatedRunSections(const ReportData& d) {
  return absl::StrCat(Section("summary", "Summary"), FederatedSummary(d),
                      Section("federated", "Federated rounds"), report::FederatedCharts(d),
                      Section("round-cost", "Dollars per round"), report::RoundCostChart(d),
                      "<p class=\"note\">Each round's dollars from the close of the round before "
                      "it: the participants' instances (compute) and the bytes between the "
                      "regions and the global region (transfer).</p>",
                      Section("cost", "Cost over time"), report::CostChart(d));
}

}  // namespace

std::string RenderReportHtml(const ReportData& d, const ReportHtmlOptions& options) {
  const bool multi = report::MultiObjective(d);
  const bool federated_run = IsFederatedRun(d.spec);
  const int refresh = d.in_progress ? options.refresh_seconds : 0;
  std::string title = absl::StrCat("Sextant report: ", d.spec.name());
  std::string html = absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:",
      // The live page fetches itself (kLiveScript); a report file fetches nothing.
      refresh > 0 ? "; connect-src 'self'" : "", "\"><title>", EscapeXml(title), "</title><style>",
      kStyle, "</style></head><body>", "<h1>", EscapeXml(title),
      "</h1><p class=\"meta\">Run directory <code>", EscapeXml(d.run_dir), "</code> &#183; state ",
      EscapeXml(RunStateName(d.state)), d.in_progress ? " (in progress)" : "", " &#183; ",
      EscapeXml(federated_run ? DescribeFederation(d.spec) : SearchLine(d)), " &#183; generated ",
      EscapeXml(Time(d.generated_at)), "</p>");
  absl::StrAppend(&html, Banners(d, AnyCompleted(d), refresh));
  if (federated_run) {
    absl::StrAppend(&html, FederatedRunSections(d));
  } else {
    absl::StrAppend(&html, SearchSections(d, multi));
  }
  absl::StrAppend(&html, Section("events", "Events"), Events(d));
  if (refresh > 0) {
    absl::StrAppend(&html, "<script>",
                    absl::StrReplaceAll(kLiveScript, {{"REFRESH", absl::StrCat(refresh * 1000)}}),
                    "</script>");
  }
  absl::StrAppend(&html, "<script>", kScript, "</script></body></html>\n");
  return html;
}

absl::StatusOr<ReportFile> WriteReport(const std::string& run_dir, const std::string& out_path,
                                       absl::Time now) {
  SEXTANT_ASSIGN_OR_RETURN(ReportData d, LoadReportData(run_dir, now));
  std::string html = RenderReportHtml(d);
  if (absl::Status s = WriteFileAtomically(out_path, html); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot write the report: ", s.message()));
  }
  ReportFile out;
  out.bytes = html.size();
  out.trials = d.trials.size();
  if (d.spec.has_federation() && d.spec.parameters_size() == 0) {
    out.rounds = std::count_if(d.rounds.begin(), d.rounds.end(),
                               [](const RoundRow& r) { return r.region.empty(); });
  }
  out.in_progress = d.in_progress;
  out.any_completed = AnyCompleted(d);
  return out;
}

}  // namespace sextant
