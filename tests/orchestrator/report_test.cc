// `sextant report` and its parts: SVG building, scales, parameter importance, the HTML page
// for real and synthetic run directories, and bad input through the real binary.
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/param_importance.h"
#include "orchestrator/plot_scale.h"
#include "orchestrator/report.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/store.h"
#include "orchestrator/svg_canvas.h"
#include "tests/orchestrator/report_test_support.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::AttributeOf;
using testing::MakeTempDir;
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
  EXPECT_THAT(svg, HasSubstr("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
  EXPECT_THAT(svg, HasSubstr("<title>&lt;b&gt;title&lt;/b&gt;</title>"));
}

TEST(SvgCanvasTest, ControlCharactersBecomeReplacementCharacters) {
  EXPECT_EQ(EscapeXml(std::string("a\x01" "b\tc", 5)), "a\xEF\xBF\xBD" "b\tc");
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
      std::regex row(absl::StrCat("class=\"best-param\" data-name=\"", name, "\" data-value=\"([^\"]*)\""));
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
  for (size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 1u);
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<oops>")));
}

TEST_F(ReportTest, LiveRunIsReportedSoFarAndMarkedInProgress) {
  testing::SyntheticRunOptions o;
  o.trials = 40;
  o.state = "RUNNING";
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
  o.state = "RUNNING";
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
// orchestrator/report_data.h (federated rounds are not stored yet) are drawn instead of
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

}  // namespace
}  // namespace sextant
