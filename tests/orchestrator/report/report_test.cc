// `sextant report` and its parts: SVG building, scales, parameter importance, the HTML page
// for real and synthetic run directories, and bad input through the real binary.
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/report/param_importance.h"
#include "orchestrator/report/plot_scale.h"
#include "orchestrator/report/report.h"
#include "orchestrator/report/svg_canvas.h"
#include "tests/orchestrator/report/report_test_support.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::AttributeOf;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

int Marks(const std::string& html, const std::string& id) {
  std::string v = AttributeOf(html, id, "data-marks");
  return v.empty() ? -1 : std::stoi(v);
}

bool IsPlaceholder(const std::string& html, const std::string& id) {
  size_t at = html.find(absl::StrCat("id=\"", id, "\""));
  return at != std::string::npos && html.rfind("<div class=\"nodata\"", at) == html.rfind('<', at);
}

TEST(SvgCanvasTest, EscapesMarkupInTextTitlesAndAttributes) {
  SvgCanvas c("chart-x", 100, 50);
  c.Text(1, 2, "<script>alert('x')</script> & \"q\"");
  c.Circle(5, 5, 2, "red\" onload=\"evil()", "<b>title</b>");
  std::string svg = c.Finish();
  EXPECT_THAT(svg, Not(HasSubstr("<script>")));
  EXPECT_THAT(svg, Not(HasSubstr("<b>")));
  EXPECT_THAT(svg, Not(HasSubstr("\" onload=")));
  EXPECT_THAT(svg,
              HasSubstr("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
  EXPECT_THAT(svg, HasSubstr("<title>&lt;b&gt;title&lt;/b&gt;</title>"));
}

TEST(SvgCanvasTest, ControlCharactersBecomeReplacementCharacters) {
  EXPECT_EQ(EscapeXml(std::string("a\x01"
                                  "b\tc",
                                  5)),
            "a\xEF\xBF\xBD"
            "b\tc");
}

TEST(SvgCanvasTest, CountsDataMarksInTheSvgAttribute) {
  SvgCanvas c("chart-y", 10, 10);
  c.Rect(0, 0, 1, 1, "#000");
  c.CountData(3);
  EXPECT_THAT(c.Finish(), HasSubstr("id=\"chart-y\" data-marks=\"3\""));
}

TEST(PlotScaleTest, LogScaleTicksArePowersOfTenAndMapEvenly) {
  PlotScale s = PlotScale::Log(1e-4, 1, 0, 400);
  EXPECT_DOUBLE_EQ(s(1e-4), 0);
  EXPECT_DOUBLE_EQ(s(1), 400);
  EXPECT_NEAR(s(1e-2), 200, 1e-9);
  auto ticks = s.Ticks(5);
  ASSERT_EQ(ticks.size(), 5u);
  EXPECT_EQ(ticks.front().second, "0.0001");
  EXPECT_EQ(ticks.back().second, "1");
}

TEST(PlotScaleTest, CategoriesSitAtTheCentresOfEqualBands) {
  PlotScale s = PlotScale::Category({"a", "b", "c", "d"}, 0, 400);
  EXPECT_DOUBLE_EQ(s(0), 50);
  EXPECT_DOUBLE_EQ(s(3), 350);
  EXPECT_EQ(s.Ticks(10).size(), 4u);
}

TEST(PlotScaleTest, DegenerateDomainStillMapsInsideTheRange) {
  PlotScale s = PlotScale::Linear(3, 3, 0, 100);
  EXPECT_GT(s(3), 0);
  EXPECT_LT(s(3), 100);
  PlotScale y = PlotScale::Linear(0, 10, 300, 0);  // y grows upwards
  EXPECT_DOUBLE_EQ(y(10), 0);
  auto ticks = y.Ticks(5);
  EXPECT_EQ(ticks.front().first, 0);
  EXPECT_EQ(ticks.back().first, 10);
}

// Round numbers are whole: a linear scale over two rounds would tick at 0.5 and 1.5.
TEST(PlotScaleTest, WholeScaleTicksOnlyOnWholeNumbers) {
  std::vector<std::string> labels;
  for (const auto& [v, label] : PlotScale::Whole(0.5, 2.5, 0, 800).Ticks(8))
    labels.push_back(label);
  EXPECT_THAT(labels, ::testing::ElementsAre("1", "2"));
  labels.clear();
  for (const auto& [v, label] : PlotScale::Whole(0.5, 40.5, 0, 800).Ticks(8)) {
    EXPECT_EQ(v, std::round(v)) << label;
    labels.push_back(label);
  }
  EXPECT_THAT(labels, ::testing::ElementsAre("5", "10", "15", "20", "25", "30", "35", "40"));
}

TEST(ParamImportanceTest, TheParameterThatDrivesTheObjectiveDominates) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  ImportanceInput driver{"lr", {}, false, true}, noise{"width", {}, false, false};
  ImportanceInput cat{"opt", {}, true, false};
  std::vector<double> y;
  for (int i = 0; i < 200; ++i) {
    double lr = std::pow(10.0, -4 + 4 * u(rng));
    driver.values.push_back(lr);
    noise.values.push_back(u(rng));
    cat.values.push_back(i % 3);
    double l = std::log10(lr) + 2;
    y.push_back(l * l + 0.05 * u(rng));
  }
  auto imp = MainEffectImportance({driver, noise, cat}, y);
  ASSERT_EQ(imp.size(), 3u);
  EXPECT_GT(imp[0].importance, 0.7);
  EXPECT_LT(imp[1].importance, 0.05);
  EXPECT_LT(imp[2].importance, 0.05);
  EXPECT_EQ(imp[2].bins, 3);
  EXPECT_EQ(imp[0].bins, 8);
}

TEST(ParamImportanceTest, CategoricalEffectIsFoundAndConstantObjectiveGivesZero) {
  ImportanceInput cat{"opt", {}, true, false};
  std::vector<double> y;
  for (int i = 0; i < 60; ++i) {
    cat.values.push_back(i % 2);
    y.push_back(i % 2 == 0 ? 1.0 + i * 1e-3 : 5.0 + i * 1e-3);
  }
  EXPECT_GT(MainEffectImportance({cat}, y)[0].importance, 0.9);
  std::vector<double> flat(60, 2.0);
  EXPECT_EQ(MainEffectImportance({cat}, flat)[0].importance, 0);
  EXPECT_EQ(MainEffectImportance({cat}, {1, 2, 3})[0].importance, 0);  // too few trials
}

TEST(ParamImportanceTest, MissingValuesOfAConditionalParameterFormTheirOwnBin) {
  ImportanceInput p{"momentum", {}, false, false};
  std::vector<double> y;
  for (int i = 0; i < 40; ++i) {
    bool present = i % 2 == 0;
    p.values.push_back(present ? 0.9 : std::nan(""));
    y.push_back(present ? 1 + i * 1e-3 : 3 + i * 1e-3);
  }
  auto imp = MainEffectImportance({p}, y);
  EXPECT_EQ(imp[0].bins, 2);
  EXPECT_GT(imp[0].importance, 0.9);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("report"); }

  // Runs `sextant report` on run_dir and returns the HTML (empty on failure).
  std::string Report(const std::string& run_dir, testing::CommandOutput* out = nullptr) {
    std::string html = dir_ + "/report.html";
    auto r = RunProcess({kSextant, "report", run_dir, "-o", html});
    if (out) *out = r;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? ReadFile(html) : "";
  }

  std::string dir_;
};

// The numbers of the summary table against `results --format json`.
void ExpectSummaryMatchesResults(const std::string& html, const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  auto value = [&](const std::string& id) {
    return nlohmann::json::parse(AttributeOf(html, id, "data-value"), nullptr, false);
  };
  EXPECT_EQ(value("summary-experiment"), j["experiment"]);
  EXPECT_EQ(value("summary-state"), j["state"]);
  EXPECT_EQ(value("summary-trials"), j["trials"].size());
  EXPECT_EQ(value("summary-cost-total"), j["cost"]["total"]);
  if (j["best"].is_null()) {
    EXPECT_TRUE(value("summary-best-trial").is_null());
  } else {
    EXPECT_EQ(value("summary-best-trial"), j["best"]["trial"]);
    EXPECT_EQ(value("summary-best-value").get<double>(), j["best"]["value"].get<double>());
    for (auto& [name, v] : j["best"]["params"].items()) {
      std::regex row(
          absl::StrCat("class=\"best-param\" data-name=\"", name, "\" data-value=\"([^\"]*)\""));
      std::smatch m;
      ASSERT_TRUE(std::regex_search(html, m, row)) << name;
      EXPECT_EQ(nlohmann::json::parse(testing::UnescapeHtml(m[1].str())), v) << name;
    }
  }
  std::map<std::string, int> counts;
  for (const auto& t : j["trials"]) ++counts[t["state"].get<std::string>()];
  for (const auto& [state, n] : counts) {
    std::regex cell(absl::StrCat("data-state=\"", state, "\" data-value=\"(\\d+)\""));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(html, m, cell)) << state;
    EXPECT_EQ(std::stoi(m[1].str()), n) << state;
  }
}

TEST_F(ReportTest, RealAshaRunGetsEveryHpoChartAndSummaryMatchesResults) {
  std::filesystem::copy_file(std::string(SEXTANT_SOURCE_DIR) + "/examples/asha/train.sh",
                             dir_ + "/train.sh");
  WriteFile(dir_ + "/exp.yaml", R"(name: asha-report
objective: {metric: loss, goal: minimize}
parameters:
  lr: {type: float, min: 1.0e-4, max: 1.0, log: true}
  width: {type: int, min: 1, max: 8}
  opt: {type: categorical, values: [sgd, "<b>adam</b>"]}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  seed: 3
  max_trials: 12
  max_concurrent: 3
trial:
  command: [sh, train.sh]
  timeout: 2m
)");
  auto run = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 180);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  testing::CommandOutput out;
  std::string html = Report(dir_ + "/run", &out);
  ASSERT_FALSE(html.empty());
  EXPECT_THAT(out.out, HasSubstr("wrote"));
  for (const char* id : {"chart-history-trial", "chart-history-time", "chart-parallel",
                         "chart-importance", "chart-intermediate", "chart-timeline"}) {
    EXPECT_GT(Marks(html, id), 0) << id;
    EXPECT_FALSE(IsPlaceholder(html, id)) << id;
  }
  // The intermediate values show the rungs and the scheduler's decisions.
  EXPECT_THAT(html, HasSubstr(">rung 1<"));
  EXPECT_THAT(html, HasSubstr(">rung 3<"));
  EXPECT_THAT(html, HasSubstr(" promoted at epoch="));
  // No cost or federation data in a local run: explicit placeholders.
  EXPECT_TRUE(IsPlaceholder(html, "chart-cost"));
  EXPECT_TRUE(IsPlaceholder(html, "chart-federated"));
  EXPECT_THAT(html, HasSubstr("No data recorded for this run."));
  // Self-contained: no external resources, one inline script, and the category escaped.
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  EXPECT_THAT(html, Not(HasSubstr("<b>adam")));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;adam&lt;/b&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("id=\"run-in-progress\"")));
  ExpectSummaryMatchesResults(html, dir_ + "/run");
}

TEST_F(ReportTest, SyntheticThousandTrialReportStaysUnderFiveMegabytes) {
  testing::SyntheticRunOptions o;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  std::string html = Report(dir_ + "/run");
  EXPECT_LT(html.size(), 5u << 20);
  EXPECT_GT(Marks(html, "chart-parallel"), 100);
  EXPECT_GT(Marks(html, "chart-intermediate"), 1000);
  EXPECT_GT(Marks(html, "chart-timeline"), 1000);
  ExpectSummaryMatchesResults(html, dir_ + "/run");
  std::cout << "1,000-trial report: " << html.size() << " bytes\n";
}

TEST_F(ReportTest, MarkupInParameterValuesAndErrorsIsEscapedEverywhere) {
  testing::SyntheticRunOptions o;
  o.trials = 60;
  o.odd_category = "<script>alert(1)</script>";
  testing::BuildSyntheticRun(dir_ + "/run", o);
  std::string html = Report(dir_ + "/run");
  // The page's own script is the only one.
  size_t scripts = 0;
  for (size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at + 1))
    ++scripts;
  EXPECT_EQ(scripts, 1u);
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<oops>")));
}

TEST_F(ReportTest, LiveRunIsReportedSoFarAndMarkedInProgress) {
  testing::SyntheticRunOptions o;
  o.trials = 40;
  o.state = v1::RUN_RUNNING;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  auto lock = RunDir::Acquire(dir_ + "/run");  // as a live orchestrator would hold it
  ASSERT_TRUE(lock.ok()) << lock.status();
  testing::CommandOutput out;
  std::string html = Report(dir_ + "/run", &out);
  EXPECT_THAT(html, HasSubstr("id=\"run-in-progress\""));
  EXPECT_THAT(html, HasSubstr("(in progress)"));
  EXPECT_THAT(out.err, HasSubstr("still in progress"));
  EXPECT_THAT(html, HasSubstr("RUNNING, "));  // open attempts drawn as running
  EXPECT_GT(Marks(html, "chart-history-trial"), 0);
}

TEST_F(ReportTest, RunLeftRunningWithoutItsOrchestratorSaysHowToResume) {
  testing::SyntheticRunOptions o;
  o.trials = 20;
  o.state = v1::RUN_RUNNING;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  std::string html = Report(dir_ + "/run");
  EXPECT_THAT(html, Not(HasSubstr("id=\"run-in-progress\"")));
  EXPECT_THAT(html, HasSubstr("id=\"run-stopped\""));
  EXPECT_THAT(html, HasSubstr("sextant resume "));
}

TEST_F(ReportTest, ZeroCompletedTrialsGetANoteAndPlaceholders) {
  testing::SyntheticRunOptions o;
  o.trials = 10;
  o.all_failed = true;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  testing::CommandOutput out;
  std::string html = Report(dir_ + "/run", &out);
  EXPECT_THAT(html, HasSubstr("id=\"no-completed\""));
  EXPECT_THAT(out.err, HasSubstr("no trial has completed"));
  for (const char* id : {"chart-history-trial", "chart-history-time", "chart-parallel"}) {
    EXPECT_TRUE(IsPlaceholder(html, id)) << id;
  }
  // Importance falls back on the values the trials reached at a rung, and says so.
  EXPECT_THAT(html, HasSubstr("the rung most trials reached; only 0 completed"));
  // What was recorded is still drawn: the failed trials' curves and attempts.
  EXPECT_GT(Marks(html, "chart-intermediate"), 0);
  EXPECT_GT(Marks(html, "chart-timeline"), 0);
  ExpectSummaryMatchesResults(html, dir_ + "/run");
}

// The cost ledger's table and a rounds table of the shape documented in
// orchestrator/report/report_data.h (federated rounds are not stored yet) are drawn instead of
// placeholders.
TEST_F(ReportTest, CostAndRoundTablesOfTheDocumentedShapesAreDrawn) {
  testing::SyntheticRunOptions o;
  o.trials = 30;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/run/state.db").c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
    CREATE TABLE IF NOT EXISTS costs(kind TEXT NOT NULL, ref INTEGER NOT NULL, pool TEXT NOT NULL,
      region TEXT NOT NULL, market TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL,
      cost REAL NOT NULL);
    INSERT INTO costs VALUES ('instance', 1, 'east-spot', 'east', 'spot', 10, 30, 0.5),
                             ('instance', 2, 'west-od', 'west', 'on_demand', 0, 20, 1.5),
                             ('reservation', 1, 'east-spot', 'east', 'reserved', 5, 3605, 0.75),
                             ('trial', 3, '', '', '', 10, 20, 0.2);
    CREATE TABLE rounds(round INTEGER, time REAL, region TEXT, accuracy REAL, loss REAL,
                        clients INTEGER, rejected INTEGER, epsilon REAL);
    INSERT INTO rounds VALUES (1, 1700000100, '', 0.5, 1.2, 8, 1, 0.3),
                              (2, 1700000200, '', 0.7, 0.8, 8, 0, 0.6),
                              (1, 1700000100, 'east', 0.45, 1.3, 4, 1, NULL),
                              (2, 1700000200, 'east', 0.66, 0.9, 4, 0, NULL);
    INSERT INTO events(time, kind, trial_id, message) VALUES (1700000015, 'trial_preempted', 3, 'spot notice');
  )sql";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
  std::string html = Report(dir_ + "/run");
  EXPECT_EQ(Marks(html, "chart-cost"), 4);  // two pools, the total, one preemption
  EXPECT_GT(Marks(html, "chart-federated-accuracy"), 0);
  EXPECT_GT(Marks(html, "chart-federated-loss"), 0);
  EXPECT_GT(Marks(html, "chart-federated-clients"), 0);
  EXPECT_GT(Marks(html, "chart-federated-epsilon"), 0);
  EXPECT_THAT(html, HasSubstr("east-spot: 1.25 USD"));
}

// A round's global row ("") already counts every client behind its regional updates and every
// rejection: the participation chart shows that row, not it plus its regions' rows. A round
// with regional rows only is their sum.
TEST_F(ReportTest, ParticipationCountsEachClientOfARoundOnce) {
  testing::SyntheticRunOptions o;
  o.trials = 3;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/run/state.db").c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
    CREATE TABLE rounds(round INTEGER, time REAL, region TEXT, accuracy REAL, loss REAL,
                        clients INTEGER, rejected INTEGER, epsilon REAL);
    INSERT INTO rounds VALUES (1, 10, '', 0.5, 1.2, 4, 1, NULL),
                              (1, 10, 'east', 0.45, 1.3, 2, 1, NULL),
                              (1, 10, 'west', 0.55, 1.1, 2, 0, NULL),
                              (2, 20, 'east', 0.6, 1.0, 2, 0, NULL),
                              (2, 20, 'west', 0.6, 1.0, 1, 0, NULL);
  )sql";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
  std::string html = Report(dir_ + "/run");
  EXPECT_THAT(html, HasSubstr("round 1: 4 clients"));
  EXPECT_THAT(html, HasSubstr("round 1: 1 rejected"));
  EXPECT_THAT(html, Not(HasSubstr("round 1: 8 clients")));
  EXPECT_THAT(html, Not(HasSubstr("round 1: 2 rejected")));
  EXPECT_THAT(html, HasSubstr("round 2: 3 clients"));
}

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// The <svg> element whose id is id ("" when there is none).
std::string Svg(const std::string& html, const std::string& id) {
  size_t at = html.find(absl::StrCat("<svg class=\"chart\" id=\"", id, "\""));
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) - at);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Trials the Pareto charts draw: COMPLETED with a value for every objective.
int ValuedTrials(const nlohmann::json& j) {
  int n = 0;
  for (const auto& t : j["trials"]) {
    bool valued = t["values"].size() == j["objectives"].size();
    for (const auto& v : t["values"]) valued &= v.is_number();
    n += t["state"] == "COMPLETED" && valued;
  }
  return n;
}

int CompletedInfeasible(const nlohmann::json& j) {
  int n = 0;
  for (const auto& t : j["trials"]) n += t["state"] == "COMPLETED" && !t["feasible"].get<bool>();
  return n;
}

// The hypervolume chart's marks: its line and one dot per trial that raised the hypervolume.
int HypervolumeMarks(const nlohmann::json& j) {
  int n = 1;
  double prev = 0;
  for (const auto& h : j["hypervolume_history"]) {
    n += h["hypervolume"].get<double>() > prev;
    prev = h["hypervolume"].get<double>();
  }
  return n;
}

void ExpectFrontSummaryMatchesResults(const std::string& html, const nlohmann::json& j) {
  auto value = [&](const std::string& id) {
    return nlohmann::json::parse(AttributeOf(html, id, "data-value"), nullptr, false);
  };
  EXPECT_EQ(value("summary-trials"), j["trials"].size());
  EXPECT_EQ(value("summary-objectives"), j["objectives"]);
  EXPECT_EQ(value("summary-front-size"), j["pareto"].size());
  EXPECT_DOUBLE_EQ(value("summary-hypervolume").get<double>(), j["hypervolume"].get<double>());
  EXPECT_EQ(Count(html, "class=\"pareto-trial\""), j["pareto"].size());
  // No best of one objective, and no objective without a name.
  EXPECT_THAT(html, Not(HasSubstr("id=\"summary-best-trial\"")));
  EXPECT_THAT(html, Not(HasSubstr("id=\"summary-objective\"")));
  EXPECT_THAT(html, Not(HasSubstr(" ()")));
  EXPECT_THAT(html, Not(HasSubstr("=\"\" ")));
}

// Two objectives and a constraint through real trial processes: trial 3 fails (NaN), trial 5
// forgets the constraint metric and trials with a > 0.8 break it, so some are infeasible.
TEST_F(ReportTest, RealTwoObjectiveRunGetsAParetoFrontAndHypervolume) {
  WriteFile(dir_ + "/mo.sh", R"(#!/bin/sh
case "$SEXTANT_TRIAL_ID" in
  3) echo "f1=nan f2=1 mb=1" ;;
  5) echo "f1=0.01 f2=0.01" ;;
  *) awk -v a="$SEXTANT_PARAM_A" -v b="$SEXTANT_PARAM_B" 'BEGIN {
       g = 1 + 9 * b; printf "f1=%.9f f2=%.9f mb=%.3f\n", a, g * (1 - sqrt(a / g)), 100 * a }' ;;
esac
)");
  WriteFile(dir_ + "/mo.yaml", R"(name: mo-report
objectives:
  - {metric: f1, goal: minimize}
  - {metric: f2, goal: minimize, reference: 11}
constraints: [{metric: mb, max: 80}]
parameters:
  a: {type: float, min: 0, max: 1}
  b: {type: float, min: 0, max: 1}
search: {sampler: nsga2, seed: 2, max_trials: 24, max_concurrent: 2}
trial: {command: [sh, mo.sh]}
)");
  auto run = RunProcess({kSextant, "run", dir_ + "/mo.yaml", "--run-dir", dir_ + "/run"}, 180);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  testing::CommandOutput out;
  std::string html = Report(dir_ + "/run", &out);
  ASSERT_FALSE(html.empty());
  EXPECT_THAT(out.err, Not(HasSubstr("no trial has completed")));
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_FALSE(j["pareto"].empty());
  ASSERT_GT(CompletedInfeasible(j), 0);
  for (const char* id :
       {"section-summary", "section-pareto", "section-hypervolume", "section-history",
        "section-parallel", "section-importance", "section-intermediate", "section-cost",
        "section-timeline", "section-events"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<h2 id=\"", id, "\">"))) << id;
  }
  EXPECT_THAT(html, Not(HasSubstr("id=\"section-best-cost\"")));
  // One mark per valued trial and the staircase; the front in red, infeasible trials crossed.
  EXPECT_EQ(Marks(html, "chart-pareto"), ValuedTrials(j) + 1);
  std::string pareto = Svg(html, "chart-pareto");
  EXPECT_EQ(Count(pareto, "(Pareto front)</title>"), j["pareto"].size());
  EXPECT_EQ(Count(pareto, "(infeasible)</title>"), static_cast<size_t>(CompletedInfeasible(j)));
  EXPECT_EQ(Count(pareto, "<path "), static_cast<size_t>(CompletedInfeasible(j)));
  EXPECT_THAT(pareto, HasSubstr(">f1 (minimize)<"));
  EXPECT_THAT(pareto, HasSubstr(">f2 (minimize)<"));
  EXPECT_THAT(pareto, HasSubstr(">infeasible<"));
  EXPECT_THAT(pareto, HasSubstr("trial 5: f1=0.01, f2=0.01 (infeasible)"));
  // Hypervolume by trial; a local run bills nothing, so the dollar chart says so.
  EXPECT_EQ(Marks(html, "chart-hypervolume-trial"), HypervolumeMarks(j));
  EXPECT_TRUE(IsPlaceholder(html, "chart-hypervolume-cost"));
  EXPECT_THAT(html, HasSubstr("Nothing was billed"));
  EXPECT_EQ(AttributeOf(html, "hypervolume-reference", "data-source"), "derived");
  EXPECT_THAT(html, HasSubstr("f2 11)"));  // the given part of the reference point
  EXPECT_THAT(html, Not(HasSubstr("id=\"hypervolume-note\"")));
  // The one-objective charts draw the first objective and say so.
  EXPECT_GT(Marks(html, "chart-history-trial"), 0);
  EXPECT_GT(Marks(html, "chart-parallel"), 0);
  EXPECT_THAT(html, HasSubstr("f1 (objective 1 of 2, minimize)"));
  EXPECT_THAT(html, HasSubstr("id=\"first-objective-note\""));
  EXPECT_THAT(html, Not(HasSubstr("id=\"no-completed\"")));
  EXPECT_THAT(html, Not(HasSubstr("id=\"no-feasible\"")));
  ExpectFrontSummaryMatchesResults(html, j);
}

TEST_F(ReportTest, ThreeAndFourObjectivesGetOnePanelPerPairAndDollarHypervolume) {
  for (int n : {3, 4}) {
    SCOPED_TRACE(n);
    testing::ObjectivesRunOptions o;
    o.objectives = n;
    o.trials = 50;
    o.infeasible_every = 7;
    o.failed_every = 9;
    const std::string run = absl::StrCat(dir_, "/run", n);
    testing::BuildObjectivesRun(run, o);
    std::string html = Report(run);
    nlohmann::json j = Results(run);
    ASSERT_EQ(j["objectives"].size(), static_cast<size_t>(n));
    EXPECT_EQ(Marks(html, "chart-pareto"), -1);  // panels instead
    int panels = 0;
    for (int a = 1; a <= n; ++a) {
      for (int b = a + 1; b <= n; ++b, ++panels) {
        const std::string id = absl::StrCat("chart-pareto-", a, "-", b);
        EXPECT_EQ(Marks(html, id), ValuedTrials(j)) << id;
        std::string svg = Svg(html, id);
        EXPECT_EQ(Count(svg, "(Pareto front)</title>"), j["pareto"].size()) << id;
        EXPECT_EQ(Count(svg, "(infeasible)</title>"), static_cast<size_t>(CompletedInfeasible(j)))
            << id;
        EXPECT_THAT(svg,
                    HasSubstr(absl::StrCat(">f", a, a == 2 ? " (maximize)<" : " (minimize)<")));
      }
    }
    EXPECT_EQ(panels, n == 3 ? 3 : 6);
    EXPECT_EQ(Count(html, "<svg class=\"chart\" id=\"chart-pareto-"), static_cast<size_t>(panels));
    EXPECT_EQ(Marks(html, "chart-hypervolume-trial"), HypervolumeMarks(j));
    EXPECT_EQ(Marks(html, "chart-hypervolume-cost"), HypervolumeMarks(j));
    EXPECT_FALSE(IsPlaceholder(html, "chart-hypervolume-cost"));
    EXPECT_THAT(Svg(html, "chart-hypervolume-cost"), HasSubstr(">dollars spent on trials (USD)<"));
    EXPECT_THAT(html, HasSubstr(absl::StrCat("f1 (objective 1 of ", n, ", minimize)")));
    EXPECT_GT(Marks(html, "chart-importance"), 0);
    ExpectFrontSummaryMatchesResults(html, j);
  }
}

TEST_F(ReportTest, InfeasibleTrialsAreCrossesOffTheFrontAndOutOfTheBest) {
  testing::ObjectivesRunOptions o;
  o.trials = 45;
  o.infeasible_every = 3;
  testing::BuildObjectivesRun(dir_ + "/mo", o);
  std::string html = Report(dir_ + "/mo");
  nlohmann::json j = Results(dir_ + "/mo");
  ASSERT_EQ(CompletedInfeasible(j), 15);
  std::string svg = Svg(html, "chart-pareto");
  EXPECT_EQ(Marks(html, "chart-pareto"), 46);  // 45 trials and the staircase
  EXPECT_EQ(Count(svg, "(infeasible)</title>"), 15u);
  EXPECT_EQ(Count(svg, "(Pareto front) (infeasible)"), 0u);
  EXPECT_EQ(AttributeOf(html, "summary-infeasible", "data-value"), "15");
  // One objective with the same constraint: the best is feasible, and the history says so.
  o.objectives = 1;
  testing::BuildObjectivesRun(dir_ + "/one", o);
  html = Report(dir_ + "/one");
  j = Results(dir_ + "/one");
  ExpectSummaryMatchesResults(html, dir_ + "/one");
  std::string history = Svg(html, "chart-history-trial");
  EXPECT_EQ(Marks(html, "chart-history-trial"), 46);  // 45 trials and the best-so-far line
  EXPECT_EQ(Count(history, ", infeasible): "), 15u);
  EXPECT_NE(j["best"]["trial"].get<int>() % 3, 0);
  EXPECT_THAT(history,
              HasSubstr(absl::StrFormat("best so far: %.6g", j["best"]["value"].get<double>())));
  EXPECT_THAT(history, HasSubstr(">infeasible<"));
  // Every completed trial infeasible: no front and no best, and the banner says why.
  o.objectives = 2;
  o.trials = 6;
  o.infeasible_every = 1;
  testing::BuildObjectivesRun(dir_ + "/none", o);
  testing::CommandOutput out;
  html = Report(dir_ + "/none", &out);
  EXPECT_THAT(html, HasSubstr("id=\"no-feasible\""));
  EXPECT_THAT(html, Not(HasSubstr("id=\"no-completed\"")));
  EXPECT_EQ(Marks(html, "chart-pareto"), 6);  // no front, so no staircase
  EXPECT_THAT(html, HasSubstr("id=\"hypervolume-note\""));
  EXPECT_EQ(AttributeOf(html, "summary-front-size", "data-value"), "0");
}

TEST_F(ReportTest, CostAwareRunGetsBestValueAgainstDollars) {
  testing::ObjectivesRunOptions o;
  o.objectives = 1;
  o.cost_aware = true;
  o.trials = 30;
  o.failed_every = 6;
  testing::BuildObjectivesRun(dir_ + "/run", o);
  std::string html = Report(dir_ + "/run");
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_THAT(html, HasSubstr("<h2 id=\"section-best-cost\">"));
  EXPECT_THAT(html, Not(HasSubstr("id=\"section-pareto\"")));
  EXPECT_THAT(html, Not(HasSubstr("id=\"section-hypervolume\"")));
  EXPECT_EQ(Marks(html, "chart-best-cost"), 25 + 1);  // 25 completed and the best-so-far line
  std::string svg = Svg(html, "chart-best-cost");
  double spent = 0;
  for (const auto& t : j["trials"]) spent += t["cost"].get<double>();
  ASSERT_GT(spent, 0);
  EXPECT_THAT(svg, HasSubstr(">dollars spent on trials (USD)<"));
  EXPECT_THAT(svg,
              HasSubstr(absl::StrCat("best so far: ",
                                     absl::StrFormat("%.6g", j["best"]["value"].get<double>()))));
  EXPECT_THAT(html, HasSubstr("cost-aware"));
  ExpectSummaryMatchesResults(html, dir_ + "/run");
  // Nothing billed: the section stays, with a placeholder that says why.
  o.billed = false;
  testing::BuildObjectivesRun(dir_ + "/free", o);
  html = Report(dir_ + "/free");
  EXPECT_TRUE(IsPlaceholder(html, "chart-best-cost"));
  EXPECT_THAT(html, HasSubstr("Nothing was billed"));
}

TEST_F(ReportTest, MultiObjectiveRunWithNoCompletedTrialGetsPlaceholders) {
  testing::ObjectivesRunOptions o;
  o.trials = 5;
  o.failed_every = 1;
  testing::BuildObjectivesRun(dir_ + "/run", o);
  testing::CommandOutput out;
  std::string html = Report(dir_ + "/run", &out);
  EXPECT_THAT(out.err, HasSubstr("no trial has completed"));
  EXPECT_THAT(html, HasSubstr("id=\"no-completed\""));
  for (const char* id :
       {"chart-pareto", "chart-history-trial", "chart-parallel", "chart-importance"}) {
    EXPECT_TRUE(IsPlaceholder(html, id)) << id;
  }
  EXPECT_EQ(AttributeOf(html, "summary-front-size", "data-value"), "0");
}

TEST_F(ReportTest, BadInputGetsAClearMessageAndExitCodeTwo) {
  auto missing = RunProcess({kSextant, "report", dir_ + "/nope", "-o", dir_ + "/r.html"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("no such directory"));
  std::filesystem::create_directories(dir_ + "/empty");
  auto empty = RunProcess({kSextant, "report", dir_ + "/empty", "-o", dir_ + "/r.html"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("not a Sextant run directory"));
  std::filesystem::create_directories(dir_ + "/nospec");
  ASSERT_TRUE(Store::Open(dir_ + "/nospec/state.db", true).ok());
  auto nospec = RunProcess({kSextant, "report", dir_ + "/nospec", "-o", dir_ + "/r.html"});
  EXPECT_EQ(nospec.exit_code, 2);
  EXPECT_THAT(nospec.err, HasSubstr("not a Sextant run directory"));
  auto no_output = RunProcess({kSextant, "report", dir_ + "/empty"});
  EXPECT_EQ(no_output.exit_code, 2);
  EXPECT_THAT(no_output.err, HasSubstr("-o FILE.html"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/r.html"));
}

// Two rounds of a run with two regions, DP and a participation dip, as the federated run writes
// them (round 2 closed 20 s after the start).
void WriteTwoRounds(const std::string& run_dir) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((run_dir + "/state.db").c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
    CREATE TABLE rounds (round INTEGER NOT NULL, region TEXT NOT NULL, accuracy REAL, loss REAL,
      clients INTEGER, rejected INTEGER, epsilon REAL NULL, time REAL,
      PRIMARY KEY (round, region));
    INSERT INTO rounds VALUES (1, '', 0.68, 0.9, 4, 0, 0.5, 10),
                              (1, 'east', 0.1, 2.3, 2, 0, NULL, 10),
                              (1, 'west', 0.1, 2.3, 2, 0, NULL, 10),
                              (2, '', 0.74, 0.7, 3, 1, 0.8, 20),
                              (2, 'east', 0.66, 0.95, 2, 0, NULL, 20),
                              (2, 'west', 0.69, 0.92, 1, 1, NULL, 20);
  )sql";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
}

// The x axis' tick labels of a chart (centred, in the default size), each with its x pixel.
std::map<std::string, std::string> XTicks(const std::string& svg) {
  static const std::regex kTick(
      R"re(<text x="([-0-9.]+)" y="[-0-9.]+" text-anchor="middle">([^<]*)</text>)re");
  std::map<std::string, std::string> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kTick); it != std::sregex_iterator();
       ++it) {
    out[(*it)[2]] = (*it)[1];
  }
  return out;
}

// Round numbers are integers, so the round axes tick at whole rounds only; and all four round
// charts share one round axis, so a round sits at the same x in each.
TEST_F(ReportTest, RoundChartsTickOnWholeRoundsOnOneSharedAxis) {
  testing::SyntheticRunOptions o;
  o.trials = 3;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  WriteTwoRounds(dir_ + "/run");
  std::string html = Report(dir_ + "/run");
  const std::map<std::string, std::string> reference =
      XTicks(Svg(html, "chart-federated-accuracy"));
  EXPECT_EQ(reference.size(), 2u) << Svg(html, "chart-federated-accuracy");
  EXPECT_TRUE(reference.count("1") && reference.count("2"))
      << Svg(html, "chart-federated-accuracy");
  for (const char* id :
       {"chart-federated-loss", "chart-federated-epsilon", "chart-federated-clients"}) {
    const std::string svg = Svg(html, id);
    ASSERT_FALSE(svg.empty()) << id;
    EXPECT_EQ(XTicks(svg), reference) << id << "\n" << svg;
  }
}

// The regions' accuracy (0.1 in round 1 beside a global 0.68) is the clients' score of the model
// they received, before training: the report says so under the chart.
TEST_F(ReportTest, TheAccuracyChartSaysWhatTheGlobalAndTheRegionalLinesMeasure) {
  testing::SyntheticRunOptions o;
  o.trials = 3;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  WriteTwoRounds(dir_ + "/run");
  std::string html = Report(dir_ + "/run");
  const size_t at = html.find("id=\"federated-accuracy-note\"");
  ASSERT_NE(at, std::string::npos) << html;
  const std::string note = html.substr(at, html.find("</p>", at) - at);
  EXPECT_THAT(note, HasSubstr("server step, scored by the orchestrator"));
  EXPECT_THAT(note, HasSubstr("the global model they received at the start of the round"));
  EXPECT_THAT(note, HasSubstr("before their local training"));
  EXPECT_THAT(note, HasSubstr("round 1 scores the initial, untrained model"));
}

}  // namespace
}  // namespace sextant
