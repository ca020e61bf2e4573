#include "orchestrator/report/internal/report_charts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/report/param_importance.h"
#include "orchestrator/report/plot_scale.h"
#include "orchestrator/report/svg_canvas.h"

namespace sextant::report {
namespace {

constexpr const char* kBlue = "#1f77b4";
constexpr const char* kRed = "#d62728";
constexpr const char* kGrey = "#9a9a9a";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kGreen = "#2ca02c";
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
// Curves kept per learning curve: enough for the shape, small for 1,000 trials.
constexpr size_t kMaxCurvePoints = 60;

// The plotting area inside a chart.
struct Frame {
  int w = 900, h = 320;
  double l = 70, r = 20, t = 24, b = 44;
  double x0() const { return l; }
  double x1() const { return w - r; }
  double y0() const { return h - b; }  // bottom
  double y1() const { return t; }      // top
};

// The charts that draw one objective draw the first one of a multi-objective run.
const v1::Objective& Primary(const ReportData& d) {
  return d.spec.objectives_size() > 0 ? d.spec.objectives(0) : d.spec.objective();
}

bool Maximize(const ReportData& d) { return Primary(d).goal() == v1::Objective::MAXIMIZE; }

const std::string& Metric(const ReportData& d) { return Primary(d).metric(); }

std::vector<v1::Objective> AllObjectives(const ReportData& d) {
  if (d.spec.objectives_size() > 0) return {d.spec.objectives().begin(), d.spec.objectives().end()};
  return {d.spec.objective()};
}

void Axes(SvgCanvas& c, const Frame& f, const PlotScale& x, const PlotScale& y,
          const std::string& xlabel, const std::string& ylabel) {
  for (const auto& [v, label] : y.Ticks(5)) {
    double py = y(v);
    if (py < f.y1() - 0.5 || py > f.y0() + 0.5) continue;
    c.Line(f.x0(), py, f.x1(), py, "#eeeeee");
    c.Text(f.x0() - 6, py + 4, label, "end");
  }
  for (const auto& [v, label] : x.Ticks(8)) {
    double px = x(v);
    if (px < f.x0() - 0.5 || px > f.x1() + 0.5) continue;
    c.Line(px, f.y0(), px, f.y0() + 4, "#999999");
    c.Text(px, f.y0() + 16, label, "middle");
  }
  c.Line(f.x0(), f.y0(), f.x1(), f.y0(), "#999999");
  c.Line(f.x0(), f.y0(), f.x0(), f.y1(), "#999999");
  c.Text((f.x0() + f.x1()) / 2, f.h - 8, xlabel, "middle", 12);
  c.Text(16, (f.y0() + f.y1()) / 2, ylabel, "middle", 12, "#333", -90);
}

struct LegendItem {
  std::string colour, label;
};

void Legend(SvgCanvas& c, const Frame& f, const std::vector<LegendItem>& items) {
  double x = f.x1();
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    double w = 18 + 6.5 * it->label.size();
    x -= w;
    c.Rect(x, 8, 10, 10, it->colour);
    c.Text(x + 14, 17, it->label);
  }
}

// A scale for objective values: logarithmic when they are positive and span three decades.
PlotScale ValueScale(const std::vector<double>& values, double px0, double px1) {
  double lo = 1e300, hi = -1e300;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo > hi) return PlotScale::Linear(0, 1, px0, px1);
  if (lo > 0 && hi / lo > 1000) return PlotScale::Log(lo / 1.2, hi * 1.2, px0, px1);
  double pad = (hi - lo) * 0.05;
  return PlotScale::Linear(lo - pad, hi + pad, px0, px1);
}

struct TimeUnit {
  double seconds;
  const char* name;
};

TimeUnit UnitFor(double span) {
  if (span > 7200) return {3600, "hours"};
  if (span > 120) return {60, "minutes"};
  return {1, "seconds"};
}

// A trial's objective for plotting: the final value when COMPLETED, else the last reported one.
struct TrialPoint {
  int64_t id;
  v1::TrialState state;
  double value;
  double finished_at;
  bool feasible;
};

std::vector<TrialPoint> TrialPoints(const ReportData& d) {
  std::vector<TrialPoint> out;
  const nlohmann::json& trials = d.results["trials"];
  for (size_t i = 0; i < d.trials.size(); ++i) {
    const TrialRow& t = d.trials[i];
    std::optional<double> v = t.value;
    if (!v && i < trials.size()) {
      const nlohmann::json& m = trials[i]["metrics"];
      if (m.contains(Metric(d)) && m[Metric(d)].is_number()) v = m[Metric(d)].get<double>();
    }
    // Ended with a value: FAILED trials have none worth drawing.
    if (!v || !std::isfinite(*v) || !(t.state == v1::COMPLETED || t.state == v1::PRUNED)) continue;
    out.push_back(TrialPoint{t.id, t.state, *v, t.finished_at, t.feasible});
  }
  return out;
}

std::string Fmt(double v) { return absl::StrFormat("%.6g", v); }

bool Better(bool maximize, double a, double b) { return maximize ? a > b : a < b; }

// A warm start's prior observation: the first objective's value, where it came from.
struct PriorPoint {
  std::string run;
  int64_t trial;
  double value;
  bool feasible;
};

std::vector<PriorPoint> PriorPoints(const ReportData& d) {
  std::vector<PriorPoint> out;
  if (!d.warm_start) return out;
  for (const PriorTrial& t : d.warm_start->trials) {
    if (t.values.empty() || !std::isfinite(t.values[0])) continue;
    const bool feasible =
        std::all_of(t.violations.begin(), t.violations.end(), [](double v) { return v <= 0; });
    const size_t run = static_cast<size_t>(t.run);
    out.push_back(PriorPoint{run < d.warm_start->from.size() ? d.warm_start->from[run] : "",
                             t.trial, t.values[0], feasible});
  }
  return out;
}

// The priors as their own series: green triangles in one column at x (before the run's first
// trial), and the best feasible prior as a dashed line across.
void DrawPriors(SvgCanvas& c, const ReportData& d, const std::vector<PriorPoint>& priors,
                const Frame& f, double x, const PlotScale& y) {
  std::optional<double> best;
  for (const PriorPoint& p : priors) {
    c.Triangle(x, y(p.value), 3, kGreen,
               absl::StrCat("prior observation (warm start): ", p.run, " trial ", p.trial, ": ",
                            Metric(d), "=", Fmt(p.value), p.feasible ? "" : ", infeasible"));
    c.CountData();
    if (p.feasible && (!best || Better(Maximize(d), p.value, *best))) best = p.value;
  }
  if (best) {
    c.Line(f.x0(), y(*best), f.x1(), y(*best), kGreen, 1.2, "5 4");
    c.CountData();
  }
}

// A completed trial of a multi-objective run with a finite value for every objective.
struct FrontPoint {
  int64_t id;
  std::vector<double> values;  // objective order, the objectives' own units
  bool feasible;
  bool front;  // on the Pareto front of all objectives (results' "pareto")
};

std::vector<FrontPoint> FrontPoints(const ReportData& d) {
  const size_t n = static_cast<size_t>(d.spec.objectives_size());
  std::set<int64_t> front;
  if (d.results.contains("pareto") && d.results["pareto"].is_array()) {
    for (const auto& p : d.results["pareto"]) front.insert(p["trial"].get<int64_t>());
  }
  std::vector<FrontPoint> out;
  for (const TrialRow& t : d.trials) {
    if (t.state != v1::COMPLETED || t.values.size() != n) continue;
    if (!std::all_of(t.values.begin(), t.values.end(), [](double v) { return std::isfinite(v); }))
      continue;
    out.push_back(FrontPoint{t.id, t.values, t.feasible, front.count(t.id) > 0});
  }
  return out;
}

std::string FrontTitle(const std::vector<v1::Objective>& objectives, const FrontPoint& p) {
  std::string out = absl::StrCat("trial ", p.id, ":");
  for (size_t k = 0; k < objectives.size(); ++k) {
    absl::StrAppend(&out, k ? ", " : " ", objectives[k].metric(), "=", Fmt(p.values[k]));
  }
  if (p.front) absl::StrAppend(&out, " (Pareto front)");
  if (!p.feasible) absl::StrAppend(&out, " (infeasible)");
  return out;
}

// The attainment staircase of the front points in the (i, j) projection, in pixels: from the
// worse edge of j down to the best point in i, then step by step to the worse edge of i.
std::vector<std::pair<double, double>> Staircase(const std::vector<const FrontPoint*>& front,
                                                 size_t i, size_t j, bool max_i, bool max_j,
                                                 const PlotScale& x, const PlotScale& y,
                                                 const Frame& f) {
  std::vector<std::pair<double, double>> m;  // minimised
  for (const FrontPoint* p : front) {
    m.emplace_back(max_i ? -p->values[i] : p->values[i], max_j ? -p->values[j] : p->values[j]);
  }
  std::sort(m.begin(), m.end());
  std::vector<std::pair<double, double>> steps;  // only those no other projected point dominates
  for (const auto& p : m) {
    if (steps.empty() || p.second < steps.back().second) steps.push_back(p);
  }
  auto px = [&](double v) { return x(max_i ? -v : v); };
  auto py = [&](double v) { return y(max_j ? -v : v); };
  std::vector<std::pair<double, double>> out;
  if (steps.empty()) return out;
  out.emplace_back(px(steps[0].first), max_j ? f.y0() : f.y1());
  for (size_t k = 0; k < steps.size(); ++k) {
    if (k) out.emplace_back(px(steps[k].first), py(steps[k - 1].second));
    out.emplace_back(px(steps[k].first), py(steps[k].second));
  }
  out.emplace_back(max_i ? f.x0() : f.x1(), py(steps.back().second));
  return out;
}

// One scatter of objective j against objective i. Marks: one per point, plus the staircase.
std::string FrontScatter(const std::string& id, const std::vector<v1::Objective>& objectives,
                         const std::vector<FrontPoint>& pts, size_t i, size_t j, const Frame& f,
                         bool staircase) {
  SvgCanvas c(id, f.w, f.h);
  std::vector<double> xs, ys;
  for (const FrontPoint& p : pts) {
    xs.push_back(p.values[i]);
    ys.push_back(p.values[j]);
  }
  PlotScale x = ValueScale(xs, f.x0(), f.x1());
  PlotScale y = ValueScale(ys, f.y0(), f.y1());
  Axes(c, f, x, y, ObjectiveLabel(objectives[i]), ObjectiveLabel(objectives[j]));
  const bool max_i = objectives[i].goal() == v1::Objective::MAXIMIZE;
  const bool max_j = objectives[j].goal() == v1::Objective::MAXIMIZE;
  std::vector<const FrontPoint*> front;
  bool any_infeasible = false;
  // Dominated feasible points first, then the infeasible crosses, then the front on top.
  for (int layer = 0; layer < 3; ++layer) {
    for (const FrontPoint& p : pts) {
      int l = p.front ? 2 : p.feasible ? 0 : 1;
      if (l != layer) continue;
      double px = x(p.values[i]), py = y(p.values[j]);
      if (l == 0) c.Circle(px, py, 3, kBlue, FrontTitle(objectives, p));
      if (l == 1) c.Cross(px, py, 3.5, kOrange, FrontTitle(objectives, p));
      if (l == 2) c.Circle(px, py, 4.5, kRed, FrontTitle(objectives, p), "#ffffff");
      if (l == 1) any_infeasible = true;
      if (l == 2) front.push_back(&p);
      c.CountData();
    }
  }
  if (staircase && !front.empty()) {
    c.Polyline(Staircase(front, i, j, max_i, max_j, x, y, f), kRed, 1.5, 0.8,
               absl::StrCat("Pareto front: ", front.size(), " trials"));
    c.CountData();
  }
  std::vector<LegendItem> legend = {{kBlue, "feasible"}, {kRed, "Pareto front"}};
  if (any_infeasible) legend.push_back({kOrange, "infeasible"});
  Legend(c, f, legend);
  return c.Finish();
}

}  // namespace

bool MultiObjective(const ReportData& d) { return d.spec.objectives_size() > 1; }

std::string ObjectiveLabel(const v1::Objective& o) {
  return absl::StrCat(o.metric(),
                      o.goal() == v1::Objective::MAXIMIZE ? " (maximize)" : " (minimize)");
}

std::string PrimaryObjectiveLabel(const ReportData& d) {
  if (!MultiObjective(d)) return Metric(d);
  return absl::StrCat(Metric(d), " (objective 1 of ", d.spec.objectives_size(), ", ",
                      Maximize(d) ? "maximize" : "minimize", ")");
}

std::string NoData(const std::string& id, const std::string& why) {
  return absl::StrCat("<div class=\"nodata\" id=\"", EscapeXml(id),
                      "\" data-marks=\"0\"><strong>No data recorded for this run.</strong> ",
                      EscapeXml(why), "</div>");
}

std::string HistoryChart(const ReportData& d, bool by_time) {
  const std::string id = by_time ? "chart-history-time" : "chart-history-trial";
  std::vector<TrialPoint> pts = TrialPoints(d);
  if (by_time) {
    pts.erase(std::remove_if(pts.begin(), pts.end(),
                             [](const TrialPoint& p) { return p.finished_at <= 0; }),
              pts.end());
    std::stable_sort(pts.begin(), pts.end(), [](const TrialPoint& a, const TrialPoint& b) {
      return a.finished_at < b.finished_at;
    });
  }
  bool any_completed = std::any_of(pts.begin(), pts.end(),
                                   [](const TrialPoint& p) { return p.state == v1::COMPLETED; });
  const std::vector<PriorPoint> priors = PriorPoints(d);
  if (!any_completed && priors.empty()) {
    return NoData(id, "No trial has completed with a value for the objective yet.");
  }
  Frame f;
  SvgCanvas c(id, f.w, f.h);
  std::vector<double> values;
  for (const auto& p : pts) values.push_back(p.value);
  for (const auto& p : priors) values.push_back(p.value);
  PlotScale y = ValueScale(values, f.y0(), f.y1());
  double xmax = 1;
  TimeUnit unit{1, "seconds"};
  if (by_time && pts.empty()) {
    xmax = 1;
  } else if (by_time) {
    double span = pts.back().finished_at - d.started_at;
    unit = UnitFor(span);
    xmax = std::max(span / unit.seconds, 1e-3);
  } else {
    xmax = static_cast<double>(d.trials.size());
  }
  PlotScale x = PlotScale::Linear(by_time ? 0 : 0, xmax * 1.02, f.x0(), f.x1());
  Axes(c, f, x, y, by_time ? absl::StrCat("time since start (", unit.name, ")") : "trial",
       PrimaryObjectiveLabel(d));
  auto xof = [&](const TrialPoint& p) {
    return by_time ? (p.finished_at - d.started_at) / unit.seconds : static_cast<double>(p.id);
  };
  const bool max = Maximize(d);
  DrawPriors(c, d, priors, f, x(0), y);
  std::vector<std::pair<double, double>> best_line;
  std::optional<double> best;
  bool any_infeasible = false;
  for (const auto& p : pts) {
    bool done = p.state == v1::COMPLETED;
    std::string title =
        absl::StrCat("trial ", p.id, " (", TrialStateName(p.state),
                     p.feasible ? "" : ", infeasible", "): ", Metric(d), "=", Fmt(p.value));
    if (done && !p.feasible) {
      c.Cross(x(xof(p)), y(p.value), 3.5, kOrange, title);
      any_infeasible = true;
    } else {
      c.Circle(x(xof(p)), y(p.value), done ? 3.5 : 2.5, done ? kBlue : kGrey, title);
    }
    c.CountData();
    if (!done || !p.feasible) continue;  // the best is feasible, as in results
    if (!best || Better(max, p.value, *best)) {
      if (best) best_line.emplace_back(x(xof(p)), y(*best));
      best = p.value;
      best_line.emplace_back(x(xof(p)), y(*best));
    }
  }
  const std::string best_label = MultiObjective(d) ? "best of this objective alone" : "best so far";
  if (best) {
    best_line.emplace_back(f.x1(), y(*best));
    c.Polyline(best_line, kRed, 2, 1, absl::StrCat(best_label, ": ", Fmt(*best)));
    c.CountData();
  }
  std::vector<LegendItem> legend = {
      {kBlue, "completed"}, {kGrey, "pruned (last value)"}, {kRed, best_label}};
  if (any_infeasible) legend.push_back({kOrange, "infeasible"});
  if (!priors.empty()) {
    legend.push_back({kGreen, absl::StrCat("warm start: ", priors.size(), " prior observations")});
  }
  Legend(c, f, legend);
  return c.Finish();
}

std::string ParallelCoordinatesChart(const ReportData& d) {
  const std::string id = "chart-parallel";
  struct Row {
    const nlohmann::json* params;
    double value;
    int64_t id;
  };
  std::vector<Row> rows;
  std::vector<nlohmann::json> parsed(d.trials.size());
  for (size_t i = 0; i < d.trials.size(); ++i) {
    const TrialRow& t = d.trials[i];
    if (t.state != v1::COMPLETED || !t.value || !std::isfinite(*t.value)) continue;
    parsed[i] = nlohmann::json::parse(t.params_json, nullptr, false);
    if (parsed[i].is_object()) rows.push_back(Row{&parsed[i], *t.value, t.id});
  }
  if (rows.empty()) return NoData(id, "No trial has completed with a value for the objective yet.");
  const auto& params = d.spec.parameters();
  const int axes = params.size() + 1;
  Frame f;
  f.t = 40;
  f.b = 30;
  f.l = 50;
  f.r = 70;
  SvgCanvas c(id, f.w, f.h);
  auto axis_x = [&](int i) {
    return axes == 1 ? (f.x0() + f.x1()) / 2 : f.x0() + (f.x1() - f.x0()) * i / (axes - 1);
  };
  std::vector<PlotScale> scales;
  for (const auto& p : params) {
    if (p.type() == v1::Parameter::CATEGORICAL) {
      std::vector<std::string> cats(p.values().begin(), p.values().end());
      scales.push_back(PlotScale::Category(cats, f.y0(), f.y1()));
    } else if (p.log()) {
      scales.push_back(PlotScale::Log(p.min(), p.max(), f.y0(), f.y1()));
    } else {
      scales.push_back(PlotScale::Linear(p.min(), p.max(), f.y0(), f.y1()));
    }
  }
  std::vector<double> values;
  for (const Row& r : rows) values.push_back(r.value);
  scales.push_back(ValueScale(values, f.y0(), f.y1()));
  // Draw the worst first so that the best lie on top; colour runs from blue (worst) to red.
  const bool max = Maximize(d);
  std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    return max ? a.value < b.value : a.value > b.value;
  });
  auto position = [&](int axis, const nlohmann::json& v) -> std::optional<double> {
    const PlotScale& s = scales[axis];
    if (s.is_category()) {
      const auto& vals = params[axis].values();
      std::string text = v.is_string() ? v.get<std::string>() : v.dump();
      for (int k = 0; k < vals.size(); ++k) {
        if (vals[k] == text) return s(k);
      }
      return std::nullopt;
    }
    if (!v.is_number()) return std::nullopt;
    return s(v.get<double>());
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    double t = rows.size() == 1 ? 1 : static_cast<double>(i) / (rows.size() - 1);
    int r = static_cast<int>(33 + t * (214 - 33)), g = static_cast<int>(102 + t * (39 - 102)),
        b = static_cast<int>(172 + t * (40 - 172));
    std::string colour = absl::StrFormat("#%02x%02x%02x", r, g, b);
    std::vector<std::pair<double, double>> pts;
    for (int a = 0; a < params.size(); ++a) {
      const std::string& name = params[a].name();
      if (!rows[i].params->contains(name)) continue;
      if (auto py = position(a, (*rows[i].params)[name])) pts.emplace_back(axis_x(a), *py);
    }
    pts.emplace_back(axis_x(axes - 1), scales.back()(rows[i].value));
    bool best = i + 1 == rows.size();
    c.Polyline(pts, colour, best ? 2.5 : 1, best ? 1 : 0.55,
               absl::StrCat("trial ", rows[i].id, ": ", Metric(d), "=", Fmt(rows[i].value), " ",
                            rows[i].params->dump()));
    c.CountData();
  }
  for (int a = 0; a < axes; ++a) {
    double px = axis_x(a);
    c.Line(px, f.y0(), px, f.y1(), "#555555");
    std::string name = a + 1 == axes ? PrimaryObjectiveLabel(d) : params[a].name();
    if (a + 1 < axes && params[a].log()) absl::StrAppend(&name, " (log)");
    c.Text(px, f.y1() - 14, name, "middle", 12, "#111");
    for (const auto& [v, label] : scales[a].Ticks(5)) {
      double py = scales[a](v);
      if (py < f.y1() - 0.5 || py > f.y0() + 0.5) continue;
      c.Line(px - 3, py, px + 3, py, "#555555");
      c.Text(px + 5, py + 4, label.size() > 14 ? label.substr(0, 13) + "\xE2\x80\xA6" : label,
             "start", 10);
    }
  }
  return c.Finish();
}

// The trials whose values the importance is computed from: the completed ones, or, when a
// multi-fidelity search completed few, those that reached its most populated rung.
struct ImportanceSample {
  std::vector<std::pair<const TrialRow*, double>> trials;
  std::string source;
};

ImportanceSample ImportanceSource(const ReportData& d) {
  ImportanceSample completed;
  completed.source = "completed trials";
  for (const TrialRow& t : d.trials) {
    if (t.state == v1::COMPLETED && t.value && std::isfinite(*t.value))
      completed.trials.emplace_back(&t, *t.value);
  }
  if (completed.trials.size() >= 20) return completed;
  std::map<double, std::map<int64_t, std::pair<const TrialRow*, double>>> at_rung;
  for (const TrialRow& t : d.trials) {
    nlohmann::json rr = nlohmann::json::parse(t.rungs_json, nullptr, false);
    if (!rr.is_array()) continue;
    for (const auto& r : rr) {
      if (!r.is_object() || !r.contains("fidelity") || !r["fidelity"].is_number() ||
          !r.contains("value") || !r["value"].is_number()) {
        continue;
      }
      double v = r["value"].get<double>();
      if (std::isfinite(v)) at_rung[r["fidelity"].get<double>()][t.id] = {&t, v};
    }
  }
  ImportanceSample best = completed;
  for (const auto& [fidelity, trials] : at_rung) {  // ascending: ties go to the higher rung
    if (trials.size() < best.trials.size() || trials.size() <= completed.trials.size()) continue;
    best.trials.clear();
    for (const auto& [id, tv] : trials) best.trials.push_back(tv);
    best.source = absl::StrCat("values at ", d.spec.search().fidelity().name(), "=",
                               PlotScale::Label(fidelity), " (the rung most trials reached; only ",
                               completed.trials.size(), " completed)");
  }
  return best;
}

std::string ImportanceChart(const ReportData& d) {
  const std::string id = "chart-importance";
  std::vector<double> y;
  std::vector<ImportanceInput> inputs;
  for (const auto& p : d.spec.parameters()) {
    ImportanceInput in;
    in.name = p.name();
    in.categorical = p.type() == v1::Parameter::CATEGORICAL;
    in.log = p.log();
    inputs.push_back(std::move(in));
  }
  ImportanceSample sample = ImportanceSource(d);
  for (const auto& [t, value] : sample.trials) {
    nlohmann::json params = nlohmann::json::parse(t->params_json, nullptr, false);
    if (!params.is_object()) continue;
    y.push_back(value);
    for (int i = 0; i < d.spec.parameters_size(); ++i) {
      const auto& p = d.spec.parameters(i);
      double v = std::nan("");
      if (params.contains(p.name())) {
        const nlohmann::json& j = params[p.name()];
        if (j.is_number()) {
          v = j.get<double>();
        } else {
          std::string s = j.is_string() ? j.get<std::string>() : j.dump();
          for (int k = 0; k < p.values_size(); ++k) {
            if (p.values(k) == s) v = k;
          }
        }
      }
      inputs[i].values.push_back(v);
    }
  }
  if (y.size() < 4 || inputs.empty()) {
    return NoData(id, absl::StrCat("Parameter importance needs at least 4 trials with a value; "
                                   "this run has ",
                                   y.size(), "."));
  }
  std::vector<ParamImportance> imp = MainEffectImportance(inputs, y);
  std::stable_sort(imp.begin(), imp.end(), [](const ParamImportance& a, const ParamImportance& b) {
    return a.importance > b.importance;
  });
  Frame f;
  f.h = static_cast<int>(54 + 26 * imp.size());
  f.l = 150;
  f.t = 24;
  f.b = 30;
  SvgCanvas c(id, f.w, f.h);
  c.Text(f.x0(), 14,
         absl::StrCat("of ", PrimaryObjectiveLabel(d), ", from ", sample.source, ", n=", y.size()),
         "start", 11, "#555");
  PlotScale x = PlotScale::Linear(0, 1, f.x0(), f.x1());
  for (const auto& [v, label] : x.Ticks(5)) {
    c.Line(x(v), f.y1(), x(v), f.y0(), "#eeeeee");
    c.Text(x(v), f.y0() + 16, absl::StrCat(static_cast<int>(std::round(v * 100)), "%"), "middle");
  }
  for (size_t i = 0; i < imp.size(); ++i) {
    double top = f.y1() + 6 + 26 * i;
    c.Text(f.x0() - 8, top + 14, imp[i].name, "end", 12);
    c.Rect(f.x0(), top, std::max(1.0, x(imp[i].importance) - f.x0()), 18, kBlue,
           absl::StrFormat("%s: %.1f%% of the objective's variance (%d bins, %d trials)",
                           imp[i].name, imp[i].importance * 100, imp[i].bins, y.size()));
    c.Text(x(imp[i].importance) + 6, top + 14, absl::StrFormat("%.1f%%", imp[i].importance * 100));
    c.CountData();
  }
  return c.Finish();
}

namespace {

struct CurvePoint {
  double x, y;
};

// Each trial's learning curve: the objective against the fidelity or, in reports without the
// fidelity key, against the report number. A report whose x falls below the last one (a
// restart from scratch) begins a new segment.
struct LearningCurves {
  std::map<int64_t, std::vector<std::vector<CurvePoint>>> by_trial;  // trial -> segments
  bool any_fidelity = false;  // some report carried the fidelity key
};

LearningCurves ReadLearningCurves(const ReportData& d) {
  const std::string& metric = Metric(d);
  const std::string& fkey = d.spec.search().fidelity().name();
  LearningCurves out;
  std::map<int64_t, double> report_index;
  for (const MeasurementRow& m : d.measurements) {
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object() || !j.contains(metric) || !j[metric].is_number()) continue;
    double v = j[metric].get<double>();
    if (!std::isfinite(v)) continue;
    double xv;
    if (!fkey.empty() && j.contains(fkey) && j[fkey].is_number()) {
      xv = j[fkey].get<double>();
      out.any_fidelity = true;
    } else {
      xv = ++report_index[m.trial_id];
    }
    auto& segs = out.by_trial[m.trial_id];
    if (segs.empty() || xv < segs.back().back().x) segs.emplace_back();
    segs.back().push_back(CurvePoint{xv, v});
  }
  return out;
}

// Rungs as dashed lines: min * eta^k up to max, as the successive-halving schedulers place them.
void DrawRungs(SvgCanvas& c, const Frame& f, const PlotScale& x, const ReportData& d,
               bool any_fidelity) {
  const auto& fid = d.spec.search().fidelity();
  std::set<double> rungs;
  auto sched = d.spec.search().scheduler();
  if (any_fidelity && fid.reduction_factor() > 1 && fid.min() > 0 &&
      (sched == v1::Search::ASHA || sched == v1::Search::HYPERBAND || sched == v1::Search::BOHB)) {
    for (double r = fid.min(); r <= fid.max() * (1 + 1e-9); r *= fid.reduction_factor())
      rungs.insert(r);
  }
  for (double r : rungs) {
    c.Line(x(r), f.y0(), x(r), f.y1(), "#888888", 1, "4 3");
    c.Text(x(r) + 3, f.y1() + 10, absl::StrCat("rung ", PlotScale::Label(r)), "start", 10, "#666");
  }
}

// Each segment of each curve as a polyline of at most about kMaxCurvePoints, in the colour of
// its trial's state (a lone point as a dot).
void DrawCurves(SvgCanvas& c, const PlotScale& x, const PlotScale& y, const ReportData& d,
                const LearningCurves& curves) {
  std::map<int64_t, const TrialRow*> by_id;
  for (const TrialRow& t : d.trials) by_id[t.id] = &t;
  for (const auto& [trial, segs] : curves.by_trial) {
    const TrialRow* t = by_id.count(trial) ? by_id[trial] : nullptr;
    const v1::TrialState state = t ? t->state : v1::TRIAL_STATE_UNSPECIFIED;
    const char* colour = state == v1::COMPLETED ? kBlue : state == v1::PRUNED ? kGrey : kOrange;
    for (const auto& s : segs) {
      std::vector<std::pair<double, double>> pts;
      size_t stride = (s.size() + kMaxCurvePoints - 1) / kMaxCurvePoints;
      for (size_t i = 0; i < s.size(); i += std::max<size_t>(stride, 1))
        pts.emplace_back(x(s[i].x), y(s[i].y));
      if ((s.size() - 1) % std::max<size_t>(stride, 1) != 0)
        pts.emplace_back(x(s.back().x), y(s.back().y));
      if (pts.size() == 1) c.Circle(pts[0].first, pts[0].second, 2, colour);
      c.Polyline(pts, colour, 1, state == v1::COMPLETED ? 0.8 : 0.5,
                 absl::StrCat("trial ", trial, " (", t ? TrialStateName(state) : "?", ")"));
      c.CountData();
    }
  }
}

struct RungDecisionCounts {
  int promoted = 0;
  int pruned = 0;
};

// The scheduler's decisions at the rungs, from each trial's rung records: promotions as
// triangles, prunes as crosses.
RungDecisionCounts DrawRungDecisions(SvgCanvas& c, const PlotScale& x, const PlotScale& y,
                                     const ReportData& d) {
  const std::string& fkey = d.spec.search().fidelity().name();
  RungDecisionCounts n;
  for (const TrialRow& t : d.trials) {
    nlohmann::json rr = nlohmann::json::parse(t.rungs_json, nullptr, false);
    if (!rr.is_array()) continue;
    for (const auto& r : rr) {
      if (!r.is_object() || !r.contains("fidelity") || !r["fidelity"].is_number() ||
          !r.contains("value") || !r["value"].is_number()) {
        continue;
      }
      std::string decision = r.value("decision", "");
      double px = x(r["fidelity"].get<double>()), py = y(r["value"].get<double>());
      std::string title = absl::StrCat("trial ", t.id, " ", decision, " at ", fkey, "=",
                                       Fmt(r["fidelity"].get<double>()));
      if (decision == "promoted") {
        c.Triangle(px, py, 4.5, kGreen, title);
        ++n.promoted;
        c.CountData();
      } else if (decision == "pruned") {
        c.Cross(px, py, 4, kRed, title);
        ++n.pruned;
        c.CountData();
      }
    }
  }
  return n;
}

}  // namespace

std::string IntermediateValuesChart(const ReportData& d) {
  const std::string id = "chart-intermediate";
  const LearningCurves curves = ReadLearningCurves(d);
  if (curves.by_trial.empty()) {
    return NoData(id, absl::StrCat("No trial has reported the objective '", Metric(d),
                                   "' on an intermediate step yet."));
  }
  double xmin = 1e300, xmax = -1e300;
  std::vector<double> values;
  for (const auto& [trial, segs] : curves.by_trial) {
    for (const auto& s : segs) {
      for (const CurvePoint& p : s) {
        xmin = std::min(xmin, p.x);
        xmax = std::max(xmax, p.x);
        values.push_back(p.y);
      }
    }
  }
  Frame f;
  f.h = 360;
  SvgCanvas c(id, f.w, f.h);
  const auto& fid = d.spec.search().fidelity();
  const bool any_fidelity = curves.any_fidelity;
  bool log_x = any_fidelity && xmin > 0 && fid.reduction_factor() > 1 && xmax / xmin >= 9;
  PlotScale x = log_x ? PlotScale::Log(xmin, xmax, f.x0(), f.x1())
                      : PlotScale::Linear(std::min(0.0, xmin), xmax, f.x0(), f.x1());
  PlotScale y = ValueScale(values, f.y0(), f.y1());
  Axes(c, f, x, y, any_fidelity ? absl::StrCat(fid.name(), log_x ? " (log)" : "") : "report number",
       PrimaryObjectiveLabel(d));
  DrawRungs(c, f, x, d, any_fidelity);
  DrawCurves(c, x, y, d, curves);
  const RungDecisionCounts decisions = DrawRungDecisions(c, x, y, d);
  Legend(c, f,
         {{kBlue, "completed"},
          {kGrey, "pruned"},
          {kOrange, "other"},
          {kGreen, absl::StrCat("promoted (", decisions.promoted, ")")},
          {kRed, absl::StrCat("pruned at rung (", decisions.pruned, ")")}});
  return c.Finish();
}

std::string CostChart(const ReportData& d) {
  const std::string id = "chart-cost";
  int preemptions = 0;
  for (const EventRow& e : d.events) {
    if (e.kind.find("preempt") != std::string::npos) ++preemptions;
  }
  if (d.costs.empty()) {
    return NoData(
        id, absl::StrCat(
                "The store holds no cost records (provider '",
                d.spec.resources().provider().empty() ? "local" : d.spec.resources().provider(),
                "'); ", preemptions, " preemption events."));
  }
  // Cumulative spend per pool, sampled at evenly spaced times: bounded size for any ledger.
  double tmax = 0, total = 0;
  std::set<std::string> pools;
  for (const CostRecord& r : d.costs) {
    tmax = std::max(tmax, r.end);
    total += r.amount;
    pools.insert(r.pool);
  }
  constexpr int kSamples = 300;
  std::map<std::string, std::vector<std::pair<double, double>>> by_pool;
  for (int i = 0; i <= kSamples; ++i) {
    double t = tmax * i / kSamples;
    std::map<std::string, double> spent;
    double sum = 0;
    for (const CostRecord& r : d.costs) {
      double share = r.end > r.start ? std::clamp((t - r.start) / (r.end - r.start), 0.0, 1.0)
                                     : (t >= r.start ? 1.0 : 0.0);
      spent[r.pool] += r.amount * share;
      sum += r.amount * share;
    }
    for (const std::string& p : pools) by_pool[p].emplace_back(t, spent[p]);
    if (pools.size() > 1) by_pool["total"].emplace_back(t, sum);
  }
  double ymax = total;
  if (d.spec.budget().has_max_cost()) ymax = std::max(ymax, d.spec.budget().max_cost());
  Frame f;
  SvgCanvas c(id, f.w, f.h);
  TimeUnit unit = UnitFor(tmax);
  PlotScale x = PlotScale::Linear(0, std::max(tmax / unit.seconds, 1e-3) * 1.02, f.x0(), f.x1());
  PlotScale y = PlotScale::Linear(0, ymax * 1.08 + 1e-9, f.y0(), f.y1());
  std::string currency = d.spec.budget().currency().empty() ? "USD" : d.spec.budget().currency();
  Axes(c, f, x, y, absl::StrCat("time since start (", unit.name, ")"),
       absl::StrCat("cost (", currency, ")"));
  std::vector<LegendItem> legend;
  size_t k = 0;
  for (const auto& [pool, pts] : by_pool) {
    std::string colour = pool == "total" ? "#111111" : kPalette[k++ % 10];
    std::vector<std::pair<double, double>> line;
    for (const auto& [t, v] : pts) line.emplace_back(x(t / unit.seconds), y(v));
    c.Polyline(line, colour, pool == "total" ? 2 : 1.5, 1,
               absl::StrCat(pool, ": ", Fmt(pts.back().second), " ", currency));
    c.CountData();
    legend.push_back({colour, pool});
  }
  if (d.spec.budget().has_max_cost()) {
    double b = y(d.spec.budget().max_cost());
    c.Line(f.x0(), b, f.x1(), b, kRed, 1.5, "6 4");
    c.Text(f.x1() - 4, b - 4, absl::StrCat("budget ", Fmt(d.spec.budget().max_cost())), "end", 11,
           kRed);
  }
  for (const EventRow& e : d.events) {
    if (e.kind.find("preempt") == std::string::npos) continue;
    double px = x((e.time - d.started_at) / unit.seconds);
    c.Line(px, f.y0(), px, f.y0() - 10, kOrange, 2);
    c.Triangle(px, f.y0() - 14, 4, kOrange,
               absl::StrCat(e.kind, e.trial_id ? absl::StrCat(" trial ", e.trial_id) : "", ": ",
                            e.message));
    c.CountData();
  }
  legend.push_back({kOrange, "preemption"});
  Legend(c, f, legend);
  return c.Finish();
}

namespace {

// An attempt's bar in the worker timeline, as its legend says: one that has not ended is
// running while the run is in progress, and unfinished ("other") once it is not.
const char* AttemptColour(v1::AttemptOutcome outcome, bool in_progress) {
  switch (outcome) {
    case v1::ATTEMPT_COMPLETED:
      return kBlue;
    case v1::ATTEMPT_PRUNED:
      return kGrey;
    case v1::ATTEMPT_PAUSED:
      return "#9ecae1";
    case v1::ATTEMPT_FAILED:
    case v1::ATTEMPT_LOST:
      return kRed;
    case v1::ATTEMPT_OUTCOME_UNSPECIFIED:
      return in_progress ? kGreen : kOrange;
    default:
      return kOrange;  // cancelled or preempted
  }
}

}  // namespace

std::string WorkerTimelineChart(const ReportData& d) {
  const std::string id = "chart-timeline";
  if (d.attempts.empty()) return NoData(id, "No attempt has started yet.");
  std::set<int64_t> worker_ids;
  for (const AttemptRecord& a : d.attempts) worker_ids.insert(a.worker_id);
  std::map<int64_t, int> row;
  for (int64_t w : worker_ids) row.emplace(w, static_cast<int>(row.size()));
  std::map<int64_t, const WorkerRecord*> info;
  for (const WorkerRecord& w : d.workers) info[w.id] = &w;
  double end = 0;
  for (const AttemptRecord& a : d.attempts)
    end = std::max(end, a.finished_at.value_or(a.started_at));
  if (d.in_progress) end = std::max(end, d.generated_at);
  const double span = std::max(end - d.started_at, 1e-3);
  TimeUnit unit = UnitFor(span);
  Frame f;
  f.l = 110;
  const double lane = std::clamp(240.0 / row.size(), 6.0, 28.0);
  f.h = static_cast<int>(f.t + f.b + lane * row.size());
  SvgCanvas c(id, f.w, f.h);
  PlotScale x = PlotScale::Linear(0, span / unit.seconds, f.x0(), f.x1());
  for (const auto& [v, label] : x.Ticks(8)) {
    c.Line(x(v), f.y1(), x(v), f.y0() + 4, "#eeeeee");
    c.Text(x(v), f.y0() + 16, label, "middle");
  }
  c.Text((f.x0() + f.x1()) / 2, f.h - 8, absl::StrCat("time since start (", unit.name, ")"),
         "middle", 12);
  for (const auto& [w, r] : row) {
    std::string label = absl::StrCat("worker ", w);
    if (info.count(w) && !info[w]->pool.empty()) absl::StrAppend(&label, " ", info[w]->pool);
    if (lane >= 10)
      c.Text(f.x0() - 6, f.y1() + lane * r + lane / 2 + 4, label, "end", lane >= 14 ? 11 : 9);
  }
  for (const AttemptRecord& a : d.attempts) {
    double t0 = (a.started_at - d.started_at) / unit.seconds;
    double t1 = (a.finished_at.value_or(d.in_progress ? d.generated_at : end) - d.started_at) /
                unit.seconds;
    const std::string outcome = a.outcome != v1::ATTEMPT_OUTCOME_UNSPECIFIED
                                    ? AttemptOutcomeName(a.outcome)
                                : d.in_progress ? TrialStateName(v1::RUNNING)
                                                : "unfinished";
    const char* colour = AttemptColour(a.outcome, d.in_progress);
    double top = f.y1() + lane * row[a.worker_id] + 1;
    c.Rect(x(t0), top, std::max(1.0, x(t1) - x(t0)), lane - 2, colour,
           absl::StrCat("trial ", a.trial_id, " attempt ", a.attempt, " on worker ", a.worker_id,
                        ": ", outcome, ", ", Fmt((t1 - t0) * unit.seconds), " s"),
           "#ffffff");
    c.CountData();
  }
  // Utilisation over each lane from the telemetry table: GPU when the worker has GPUs,
  // otherwise CPU (cores busy, capped at one lane height).
  bool any_gpu = std::any_of(d.telemetry.begin(), d.telemetry.end(),
                             [](const TelemetryRecord& t) { return t.gpu_util.has_value(); });
  std::map<int64_t, std::vector<std::pair<double, double>>> util;
  for (const TelemetryRecord& t : d.telemetry) {
    std::optional<double> u = any_gpu ? t.gpu_util : t.cpu_util;
    if (!row.count(t.worker_id) || !u) continue;
    double top = f.y1() + lane * row[t.worker_id];
    util[t.worker_id].emplace_back(x((t.time - d.started_at) / unit.seconds),
                                   top + lane - 1 - (lane - 2) * std::clamp(*u, 0.0, 1.0));
  }
  for (auto& [w, pts] : util) {
    std::sort(pts.begin(), pts.end());
    c.Polyline(pts, "#111111", 1.2, 0.9,
               absl::StrCat("worker ", w, any_gpu ? " GPU utilisation" : " CPU (cores busy)"));
    c.CountData();
  }
  Legend(c, f,
         {{kBlue, "completed"},
          {"#9ecae1", "paused"},
          {kGrey, "pruned"},
          {kRed, "failed/lost"},
          {kOrange, "cancelled/other"},
          {kGreen, "running"}});
  std::string out = c.Finish();
  if (d.telemetry.empty()) {
    absl::StrAppend(&out,
                    "<p class=\"note\" id=\"gpu-util-note\">GPU utilisation: no data "
                    "recorded for this run (no telemetry in the store).</p>");
  } else if (!any_gpu) {
    absl::StrAppend(&out,
                    "<p class=\"note\" id=\"gpu-util-note\">GPU utilisation: the workers "
                    "reported no GPUs; the black line in each lane is CPU use of the trial "
                    "(cores busy, the lane's height is one core).</p>");
  } else {
    absl::StrAppend(&out,
                    "<p class=\"note\" id=\"gpu-util-note\">The black line in each lane "
                    "is GPU utilisation (0 to 100% of the lane's height).</p>");
  }
  return out;
}

namespace {

// One round axis for every round chart of a run, so that a round sits at the same x in each:
// half a round of margin either side of the first and last rounds, ticks on whole rounds.
PlotScale RoundAxis(const ReportData& d, const Frame& f) {
  int64_t first = d.rounds.front().round, last = first;
  for (const RoundRow& r : d.rounds) {
    first = std::min(first, r.round);
    last = std::max(last, r.round);
  }
  return PlotScale::Whole(first - 0.5, last + 0.5, f.x0(), f.x1());
}

// What the lines of the accuracy and loss charts measure: the global model and the regions'
// rows are not scored on the same model nor on the same data.
std::string RoundMetricsNote(const ReportData& d, const std::string& id) {
  const RoundMetricMeanings m = RoundMetricMeaning(d.spec);
  const bool regions = std::any_of(d.rounds.begin(), d.rounds.end(),
                                   [](const RoundRow& r) { return !r.region.empty(); });
  std::string out = absl::StrCat("<p class=\"note\" id=\"", id,
                                 "\"><strong>global</strong> (black): ", EscapeXml(m.global), ".");
  if (regions) {
    absl::StrAppend(&out, " <strong>Each region</strong> (coloured): ", EscapeXml(m.regions), ".");
  }
  return out + "</p>";
}

}  // namespace

std::string FederatedCharts(const ReportData& d) {
  if (d.rounds.empty()) {
    bool configured = d.spec.federation().regions_size() > 0;
    return NoData("chart-federated",
                  configured
                      ? "The experiment is federated but the store holds no rounds yet."
                      : "This is not a federated run (no federation block in the experiment).");
  }
  std::map<std::string, std::vector<const RoundRow*>> by_region;
  for (const RoundRow& r : d.rounds)
    by_region[r.region.empty() ? "global" : r.region].push_back(&r);
  std::string out;
  using Field = std::function<std::optional<double>(const RoundRow&)>;
  auto line_chart = [&](const std::string& id, const std::string& label, const Field& field) {
    std::vector<double> values;
    for (const RoundRow& r : d.rounds) {
      if (std::optional<double> v = field(r); v && std::isfinite(*v)) values.push_back(*v);
    }
    if (values.empty()) return NoData(id, absl::StrCat("No round recorded its ", label, "."));
    Frame f;
    f.h = 260;
    SvgCanvas c(id, f.w, f.h);
    PlotScale x = RoundAxis(d, f);
    PlotScale y = ValueScale(values, f.y0(), f.y1());
    Axes(c, f, x, y, "round", label);
    std::vector<LegendItem> legend;
    size_t k = 0;
    for (const auto& [region, rs] : by_region) {
      std::string colour = region == "global" ? "#111111" : kPalette[k++ % 10];
      std::vector<std::pair<double, double>> pts;
      for (const RoundRow* r : rs) {
        if (std::optional<double> v = field(*r); v && std::isfinite(*v))
          pts.emplace_back(x(r->round), y(*v));
      }
      if (pts.empty()) continue;
      std::sort(pts.begin(), pts.end());
      c.Polyline(pts, colour, region == "global" ? 2 : 1.2, 1, region);
      c.CountData(static_cast<int>(pts.size()));
      legend.push_back({colour, region});
    }
    Legend(c, f, legend);
    return c.Finish();
  };
  absl::StrAppend(&out, "<h3>Accuracy per round</h3>",
                  line_chart("chart-federated-accuracy", "accuracy",
                             [](const RoundRow& r) { return std::optional<double>(r.accuracy); }),
                  RoundMetricsNote(d, "federated-accuracy-note"));
  absl::StrAppend(&out, "<h3>Loss per round</h3>",
                  line_chart("chart-federated-loss", "loss",
                             [](const RoundRow& r) { return std::optional<double>(r.loss); }));
  absl::StrAppend(&out, "<h3>Cumulative privacy loss (&#949;)</h3>",
                  line_chart("chart-federated-epsilon", "epsilon",
                             [](const RoundRow& r) { return r.epsilon; }));
  // Participation: clients and rejections per round. The global row ("") already counts every
  // client behind the accepted regional updates and every rejection (its own and the regions'),
  // so it is the round's figure; the regional rows are summed only for a round without one.
  std::map<int64_t, std::pair<int64_t, int64_t>> part, regions;
  for (const RoundRow& r : d.rounds) {
    auto& into = r.region.empty() ? part : regions;
    into[r.round].first += r.clients;
    into[r.round].second += r.rejected;
  }
  for (const auto& [round, p] : regions) part.emplace(round, p);  // keeps a global row's
  absl::StrAppend(&out, "<h3>Client participation and rejections</h3>");
  Frame f;
  f.h = 240;
  SvgCanvas c("chart-federated-clients", f.w, f.h);
  int64_t ymax = 1;
  for (const auto& [round, p] : part) ymax = std::max(ymax, p.first + p.second);
  PlotScale x = RoundAxis(d, f);
  PlotScale y = PlotScale::Linear(0, ymax * 1.1, f.y0(), f.y1());
  Axes(c, f, x, y, "round", "clients");
  double bw = std::max(1.0, (x(1) - x(0)) * 0.8);
  for (const auto& [round, p] : part) {
    c.Rect(x(round) - bw / 2, y(p.first), bw, y(0) - y(p.first), kBlue,
           absl::StrCat("round ", round, ": ", p.first, " clients"));
    if (p.second > 0) {
      c.Rect(x(round) - bw / 2, y(p.first + p.second), bw, y(p.first) - y(p.first + p.second), kRed,
             absl::StrCat("round ", round, ": ", p.second, " rejected"));
    }
    c.CountData();
  }
  Legend(c, f, {{kBlue, "participated"}, {kRed, "rejected"}});
  absl::StrAppend(&out, c.Finish());
  return out;
}

std::string RoundCostChart(const ReportData& d) {
  const std::string id = "chart-federated-cost";
  struct Bill {
    int64_t round;
    double compute, transfer;
  };
  std::vector<Bill> bills;
  double ymax = 0;
  if (d.results.contains("rounds") && d.results["rounds"].is_array()) {
    for (const nlohmann::json& r : d.results["rounds"]) {
      if (!r.contains("cost") || !r["cost"].is_number()) continue;
      const double total = r["cost"].get<double>();
      const double transfer =
          r.value("transfer", nlohmann::json()).is_number() ? r["transfer"].get<double>() : 0.0;
      bills.push_back({r["round"].get<int64_t>(), total - transfer, transfer});
      ymax = std::max(ymax, total);
    }
  }
  if (bills.empty() || d.rounds.empty()) {
    return NoData(id, "No round was billed: the run has no resources.pools.");
  }
  Frame f;
  f.h = 240;
  SvgCanvas c(id, f.w, f.h);
  PlotScale x = RoundAxis(d, f);
  PlotScale y = PlotScale::Linear(0, ymax * 1.1 + 1e-12, f.y0(), f.y1());
  const std::string currency =
      d.spec.budget().currency().empty() ? "USD" : d.spec.budget().currency();
  Axes(c, f, x, y, "round", absl::StrCat("cost (", currency, ")"));
  const double bw = std::max(1.0, (x(1) - x(0)) * 0.8);
  for (const Bill& b : bills) {
    c.Rect(x(b.round) - bw / 2, y(b.compute), bw, y(0) - y(b.compute), kBlue,
           absl::StrCat("round ", b.round, ": compute ", Fmt(b.compute), " ", currency));
    if (b.transfer > 0) {
      c.Rect(x(b.round) - bw / 2, y(b.compute + b.transfer), bw,
             y(b.compute) - y(b.compute + b.transfer), kOrange,
             absl::StrCat("round ", b.round, ": transfer ", Fmt(b.transfer), " ", currency));
    }
    c.CountData();
  }
  Legend(c, f, {{kBlue, "compute"}, {kOrange, "transfer"}});
  return c.Finish();
}

std::string ParetoFrontCharts(const ReportData& d) {
  if (!MultiObjective(d)) return NoData("chart-pareto", "This run has one objective.");
  const std::vector<v1::Objective> objectives = AllObjectives(d);
  const std::vector<FrontPoint> pts = FrontPoints(d);
  if (pts.empty()) {
    return NoData("chart-pareto", "No trial has completed with a value for every objective yet.");
  }
  if (objectives.size() == 2) {
    Frame f;
    f.h = 420;
    return FrontScatter("chart-pareto", objectives, pts, 0, 1, f, true);
  }
  // Three or four objectives: one small panel per pair, two to a row.
  std::string out = "<div class=\"panels\" id=\"pareto-panels\">";
  Frame f;
  f.w = 460;
  f.h = 330;
  f.l = 62;
  for (size_t i = 0; i < objectives.size(); ++i) {
    for (size_t j = i + 1; j < objectives.size(); ++j) {
      absl::StrAppend(&out, FrontScatter(absl::StrCat("chart-pareto-", i + 1, "-", j + 1),
                                         objectives, pts, i, j, f, false));
    }
  }
  return out + "</div>";
}

namespace {

// Hypervolume after each trial against the trial number or the dollars spent so far.
// Marks: the step line, and one dot for each trial that raised the hypervolume.
std::string HypervolumeChart(const ReportData& d, bool by_cost) {
  const std::string id = by_cost ? "chart-hypervolume-cost" : "chart-hypervolume-trial";
  const nlohmann::json& history = d.results.contains("hypervolume_history")
                                      ? d.results["hypervolume_history"]
                                      : nlohmann::json::array();
  if (!history.is_array() || history.empty()) return NoData(id, "No trial has been recorded yet.");
  double xmax = 0, hmax = 0;
  for (const auto& h : history) {
    xmax = std::max(xmax, by_cost ? h.value("cost", 0.0) : h.value("trial", 0.0));
    hmax = std::max(hmax, h.value("hypervolume", 0.0));
  }
  std::string currency = d.results["cost"].value("currency", "USD");
  if (by_cost && xmax <= 0) {
    return NoData(id, absl::StrCat("Nothing was billed: every trial's cost is 0 ", currency,
                                   " (a local run is not billed), so there is no dollar axis."));
  }
  Frame f;
  f.h = 280;
  SvgCanvas c(id, f.w, f.h);
  PlotScale x = PlotScale::Linear(0, xmax * 1.02, f.x0(), f.x1());
  PlotScale y = PlotScale::Linear(0, hmax > 0 ? hmax * 1.08 : 1, f.y0(), f.y1());
  Axes(c, f, x, y, by_cost ? absl::StrCat("dollars spent on trials (", currency, ")") : "trial",
       "hypervolume");
  std::vector<std::pair<double, double>> line = {{x(0), y(0)}};
  double prev = 0;
  std::vector<std::tuple<double, double, std::string>> raised;
  for (const auto& h : history) {
    double at = by_cost ? h.value("cost", 0.0) : h.value("trial", 0.0);
    double hv = h.value("hypervolume", 0.0);
    line.emplace_back(x(at), y(prev));
    line.emplace_back(x(at), y(hv));
    if (hv > prev) {
      raised.emplace_back(x(at), y(hv),
                          absl::StrCat("trial ", h.value("trial", 0), ": hypervolume ", Fmt(hv),
                                       ", ", Fmt(h.value("cost", 0.0)), " ", currency, " spent"));
    }
    prev = hv;
  }
  line.emplace_back(f.x1(), y(prev));
  c.Polyline(line, kBlue, 2, 1, absl::StrCat("hypervolume: ", Fmt(prev)));
  c.CountData();
  for (const auto& [px, py, title] : raised) {
    c.Circle(px, py, 3.5, kRed, title);
    c.CountData();
  }
  Legend(c, f, {{kBlue, "hypervolume"}, {kRed, "a trial raised it"}});
  return c.Finish();
}

std::string HypervolumeNote(const ReportData& d) {
  const nlohmann::json& r = d.results;
  const std::vector<v1::Objective> objectives = AllObjectives(d);
  std::vector<std::string> ref;
  if (r.contains("reference_point") && r["reference_point"].is_array()) {
    for (size_t k = 0; k < r["reference_point"].size() && k < objectives.size(); ++k) {
      const nlohmann::json& v = r["reference_point"][k];
      ref.push_back(absl::StrCat(objectives[k].metric(), " ",
                                 v.is_number() ? Fmt(v.get<double>()) : v.dump()));
    }
  }
  bool given = r.value("reference_point_source", "") == "given";
  std::string out = absl::StrCat(
      "<p class=\"note\" id=\"hypervolume-reference\" data-source=\"", given ? "given" : "derived",
      "\">Hypervolume ",
      r.contains("hypervolume") && r["hypervolume"].is_number()
          ? Fmt(r["hypervolume"].get<double>())
          : "0",
      ": the region that the feasible completed trials dominate, bounded by the reference point (",
      EscapeXml(absl::StrJoin(ref, ", ")), "), ",
      given ? "given in the experiment (objectives[].reference)."
            : "derived from the trials: each objective without a reference: in the experiment "
              "takes its worst feasible value plus 10% of its range.",
      "</p>");
  if (r.contains("hypervolume_note") && r["hypervolume_note"].is_string()) {
    absl::StrAppend(&out, "<p class=\"note\" id=\"hypervolume-note\">Why it is 0: ",
                    EscapeXml(r["hypervolume_note"].get<std::string>()), ".</p>");
  }
  return out;
}

}  // namespace

std::string HypervolumeCharts(const ReportData& d) {
  if (!MultiObjective(d)) return NoData("chart-hypervolume-trial", "This run has one objective.");
  return absl::StrCat("<h3>By trial number</h3>", HypervolumeChart(d, false),
                      "<h3>By dollars spent</h3>", HypervolumeChart(d, true), HypervolumeNote(d));
}

std::string StudyPrivacyChart(const ReportData& d) {
  const std::string id = "chart-study-privacy";
  const nlohmann::json& r = d.results;
  if (!r.contains("privacy") || !r["privacy"].contains("per_trial") ||
      r["privacy"]["per_trial"].empty()) {
    return NoData(id, "No trial has spent privacy yet.");
  }
  const nlohmann::json& trials = r["privacy"]["per_trial"];
  std::vector<double> values;
  for (const nlohmann::json& t : trials) {
    values.push_back(t.value("study_epsilon", 0.0));
    if (t["epsilon"].is_number()) values.push_back(t["epsilon"].get<double>());
  }
  values.push_back(0);
  Frame f;
  f.h = 260;
  SvgCanvas c(id, f.w, f.h);
  PlotScale x = PlotScale::Whole(0.5, static_cast<double>(trials.size()) + 0.5, f.x0(), f.x1());
  PlotScale y = ValueScale(values, f.y0(), f.y1());
  Axes(c, f, x, y, "trials, in order", "epsilon");
  std::vector<std::pair<double, double>> line;
  for (size_t i = 0; i < trials.size(); ++i) {
    const nlohmann::json& t = trials[i];
    const double at = x(static_cast<double>(i + 1));
    line.emplace_back(at, y(t.value("study_epsilon", 0.0)));
    if (t["epsilon"].is_number()) {
      c.Circle(at, y(t["epsilon"].get<double>()), 3.5, kBlue,
               absl::StrCat("trial ", t.value("trial", int64_t{0}), ": epsilon ",
                            Fmt(t["epsilon"].get<double>()), " over ",
                            t.value("rounds", int64_t{0}), " rounds"));
      c.CountData();
    }
  }
  c.Polyline(line, kRed, 2, 1,
             absl::StrCat("the study: epsilon ", Fmt(r["privacy"].value("study_epsilon", 0.0))));
  c.CountData();
  Legend(c, f, {{kRed, "the study (RDP composition)"}, {kBlue, "each trial"}});
  return c.Finish();
}

std::string BestValueByCostChart(const ReportData& d) {
  const std::string id = "chart-best-cost";
  const nlohmann::json& trials = d.results["trials"];
  std::string currency = d.results["cost"].value("currency", "USD");
  struct Point {
    int64_t id;
    double spent, value;
    bool feasible;
  };
  std::map<int64_t, double> cost;
  for (const auto& t : trials) {
    if (t.contains("cost") && t["cost"].is_number())
      cost[t["id"].get<int64_t>()] = t["cost"].get<double>();
  }
  std::vector<Point> pts;
  double spent = 0;
  for (const TrialRow& row : d.trials) {  // in id order
    if (auto c = cost.find(row.id); c != cost.end()) spent += c->second;
    if (row.state == v1::COMPLETED && row.value && std::isfinite(*row.value)) {
      pts.push_back(Point{row.id, spent, *row.value, row.feasible});
    }
  }
  if (spent <= 0) {
    return NoData(id, absl::StrCat("Nothing was billed: every trial's cost is 0 ", currency,
                                   " (a local run is not billed), so there is no dollar axis."));
  }
  if (pts.empty()) return NoData(id, "No trial has completed with a value for the objective yet.");
  Frame f;
  SvgCanvas c(id, f.w, f.h);
  std::vector<double> values;
  for (const Point& p : pts) values.push_back(p.value);
  PlotScale x = PlotScale::Linear(0, spent * 1.02, f.x0(), f.x1());
  PlotScale y = ValueScale(values, f.y0(), f.y1());
  Axes(c, f, x, y, absl::StrCat("dollars spent on trials (", currency, ")"), Metric(d));
  const bool max = Maximize(d);
  std::optional<double> best;
  std::vector<std::pair<double, double>> line;
  bool any_infeasible = false;
  for (const Point& p : pts) {
    std::string title =
        absl::StrCat("trial ", p.id, ": ", Metric(d), "=", Fmt(p.value), " after ", Fmt(p.spent),
                     " ", currency, p.feasible ? "" : " (infeasible)");
    if (p.feasible) {
      c.Circle(x(p.spent), y(p.value), 3.5, kBlue, title);
    } else {
      c.Cross(x(p.spent), y(p.value), 3.5, kOrange, title);
      any_infeasible = true;
    }
    c.CountData();
    if (!p.feasible || (best && !Better(max, p.value, *best))) continue;
    if (best) line.emplace_back(x(p.spent), y(*best));
    best = p.value;
    line.emplace_back(x(p.spent), y(*best));
  }
  if (best) {
    line.emplace_back(f.x1(), y(*best));
    c.Polyline(line, kRed, 2, 1, absl::StrCat("best so far: ", Fmt(*best)));
    c.CountData();
  }
  std::vector<LegendItem> legend = {{kBlue, "completed"}, {kRed, "best so far"}};
  if (any_infeasible) legend.push_back({kOrange, "infeasible"});
  Legend(c, f, legend);
  return c.Finish();
}

}  // namespace sextant::report
