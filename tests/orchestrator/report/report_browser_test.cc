// Reports rendered in Debian's headless Chromium: the page loads without errors, every chart
// has ink where the page says it is, and a 1,000-trial report renders in under 3 s. With
// SEXTANT_UPDATE_GALLERY=1 the screenshots are written to docs/gallery/ for docs/reports.md.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/report/report_test_support.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
constexpr int kWidth = 1000;

class ReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SEXTANT_REQUIRE_COMPONENT(!testing::ChromiumPath().empty(),
                              "chromium is not installed (scripts/install-deps installs it)");
    dir_ = MakeTempDir("report-browser");
  }

  std::string MakeReport(const std::string& run_dir) {
    std::string html = dir_ + "/report.html";
    auto r = RunProcess({kSextant, "report", run_dir, "-o", html});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return html;
  }

  std::string dir_;
};

// With --enable-logging=stderr Chromium logs every console message and uncaught exception as
// an ":INFO:CONSOLE" line; the report's page logs nothing, so any such line is an error.
void ExpectNoPageErrors(const testing::BrowserRender& r) {
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("Uncaught")));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr(":CONSOLE")));
}

TEST_F(ReportBrowserTest, RealAshaReportLoadsCleanlyAndEveryChartHasInk) {
  const std::string example = std::string(SEXTANT_SOURCE_DIR) + "/examples/asha/experiment.yaml";
  auto run = RunProcess({kSextant, "run", example, "--run-dir", dir_ + "/run"}, 300);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string html = MakeReport(dir_ + "/run");

  testing::BrowserRender r = testing::DumpDom(html, kWidth, 900);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ExpectNoPageErrors(r);
  ASSERT_EQ(testing::BodyAttribute(r.dom, "data-render-check"), "ok") << r.stderr_text;
  nlohmann::json boxes =
      nlohmann::json::parse(testing::BodyAttribute(r.dom, "data-chart-boxes"), nullptr, false);
  ASSERT_TRUE(boxes.is_object()) << testing::BodyAttribute(r.dom, "data-chart-boxes");
  int height = std::stoi(testing::BodyAttribute(r.dom, "data-page-height"));
  ASSERT_GT(height, 900);

  std::string png = dir_ + "/report.png", log;
  ASSERT_EQ(testing::Screenshot(html, png, kWidth, height, &log), 0) << log;
  testing::Image image;
  std::string error;
  ASSERT_TRUE(testing::DecodePng(ReadFile(png), &image, &error)) << error;
  ASSERT_EQ(image.width, kWidth);

  const std::vector<std::string> charts = {"chart-history-trial", "chart-history-time",
                                           "chart-parallel",      "chart-importance",
                                           "chart-intermediate",  "chart-timeline"};
  for (const std::string& id : charts) {
    ASSERT_TRUE(boxes.contains(id)) << id;
    auto b = boxes[id];
    double v = testing::GreyVariance(image, b[0], b[1], b[2], b[3]);
    EXPECT_GT(v, 100) << id << " looks blank";
  }
  // A blank strip of page (the right margin beside the charts) has no variance at all, which
  // is what a chart that failed to draw would look like.
  EXPECT_LT(testing::GreyVariance(image, kWidth - 15, 0, 10, height), 1);

  if (const char* update = std::getenv("SEXTANT_UPDATE_GALLERY");
      update && std::string(update) == "1") {
    const std::string gallery = std::string(SEXTANT_SOURCE_DIR) + "/docs/gallery";
    std::filesystem::create_directories(gallery);
    auto save = [&](const std::string& name, const testing::Image& img) {
      std::ofstream f(gallery + "/" + name, std::ios::binary);
      f << testing::EncodePng(img);
    };
    save("report-top.png", testing::Crop(image, 0, 0, kWidth, 760));
    for (const std::string& id : charts) {
      auto b = boxes[id];
      save(id.substr(6) + ".png", testing::Crop(image, b[0].get<int>() - 4, b[1].get<int>() - 28,
                                                b[2].get<int>() + 8, b[3].get<int>() + 32));
    }
  }
}

TEST_F(ReportBrowserTest, ThousandTrialReportRendersInUnderThreeSeconds) {
  testing::SyntheticRunOptions o;
  testing::BuildSyntheticRun(dir_ + "/run", o);
  std::string html = MakeReport(dir_ + "/run");
  size_t bytes = std::filesystem::file_size(html);
  EXPECT_LT(bytes, 5u << 20);
  testing::BrowserRender r = testing::DumpDom(html, kWidth, 900);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ExpectNoPageErrors(r);
  EXPECT_EQ(testing::BodyAttribute(r.dom, "data-render-check"), "ok");
  std::string ms = testing::BodyAttribute(r.dom, "data-render-ms");
  ASSERT_FALSE(ms.empty());
  // From navigation start to the load event, layout of every chart included (the check script
  // measures every chart's box).
  EXPECT_LT(std::stod(ms), 3000);
  std::cout << "1,000-trial report: " << bytes << " bytes, load+layout " << ms
            << " ms in Chromium, whole chromium process " << r.wall_seconds << " s\n";
}

// The chart's element in a DOM dump, from its opening tag to its end ("" when absent).
std::string ChartIn(const std::string& dom, const std::string& id) {
  size_t at = dom.find(absl::StrCat("id=\"", id, "\""));
  if (at == std::string::npos) return "";
  at = dom.rfind('<', at);
  return dom.substr(at, dom.find("</svg>", at) - at);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Two objectives with infeasible trials and dollars, and three objectives in pairwise panels:
// Chromium loads both without errors, every chart has ink, and the DOM holds one drawn mark
// per trial in each front chart.
TEST_F(ReportBrowserTest, MultiObjectiveReportsLoadCleanlyAndEveryChartHasInk) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(n);
    testing::ObjectivesRunOptions o;
    o.objectives = n;
    o.trials = 60;
    o.infeasible_every = 5;
    o.failed_every = 11;
    const std::string run = absl::StrCat(dir_, "/run", n);
    testing::BuildObjectivesRun(run, o);
    std::string html = MakeReport(run);
    const int completed = 60 - 60 / 11, infeasible = 60 / 5 - 1;  // trial 55 failed first

    testing::BrowserRender r = testing::DumpDom(html, kWidth, 900);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    ExpectNoPageErrors(r);
    ASSERT_EQ(testing::BodyAttribute(r.dom, "data-render-check"), "ok") << r.stderr_text;
    nlohmann::json boxes =
        nlohmann::json::parse(testing::BodyAttribute(r.dom, "data-chart-boxes"), nullptr, false);
    ASSERT_TRUE(boxes.is_object());
    std::vector<std::string> charts = {"chart-hypervolume-trial", "chart-hypervolume-cost",
                                       "chart-history-trial", "chart-parallel"};
    std::vector<std::string> fronts;
    if (n == 2) {
      fronts = {"chart-pareto"};
    } else {
      fronts = {"chart-pareto-1-2", "chart-pareto-1-3", "chart-pareto-2-3"};
    }
    for (const std::string& id : fronts) {
      charts.push_back(id);
      std::string svg = ChartIn(r.dom, id);
      ASSERT_FALSE(svg.empty()) << id;
      // Feasible trials are circles and infeasible ones crosses (paths), each with a tooltip.
      EXPECT_EQ(Count(svg, "<path "), static_cast<size_t>(infeasible)) << id;
      EXPECT_EQ(Count(svg, "<circle ") + Count(svg, "<path "), static_cast<size_t>(completed))
          << id;
      EXPECT_EQ(Count(svg, "<polyline "), n == 2 ? 1u : 0u) << id;  // the staircase
      EXPECT_EQ(std::stoi(testing::AttributeOf(svg, id, "data-marks")), completed + (n == 2)) << id;
    }
    int height = std::stoi(testing::BodyAttribute(r.dom, "data-page-height"));
    std::string png = absl::StrCat(dir_, "/report", n, ".png"), log;
    ASSERT_EQ(testing::Screenshot(html, png, kWidth, height, &log), 0) << log;
    testing::Image image;
    std::string error;
    ASSERT_TRUE(testing::DecodePng(ReadFile(png), &image, &error)) << error;
    for (const std::string& id : charts) {
      ASSERT_TRUE(boxes.contains(id)) << id << " in " << boxes.dump();
      auto b = boxes[id];
      EXPECT_GT(b[2].get<int>(), 100) << id;
      EXPECT_GT(testing::GreyVariance(image, b[0], b[1], b[2], b[3]), 100) << id << " looks blank";
    }
    if (n == 3) {  // two panels to a row
      EXPECT_EQ(boxes["chart-pareto-1-2"][1], boxes["chart-pareto-1-3"][1]);
      EXPECT_LT(boxes["chart-pareto-1-2"][0].get<int>(), boxes["chart-pareto-1-3"][0].get<int>());
    }
  }
}

TEST_F(ReportBrowserTest, RealFederatedReportShowsRoundsPerRegion) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "dataset-fashion-mnist is not installed");
  // The 2-region x 3-client FedAvg example, shortened to 3 rounds.
  std::string yaml =
      ReadFile(std::string(SEXTANT_SOURCE_DIR) + "/examples/federated/fashion-mnist-fedavg.yaml");
  const std::string five = "rounds: 5";
  ASSERT_NE(yaml.find(five), std::string::npos);
  yaml.replace(yaml.find(five), five.size(), "rounds: 3");
  testing::WriteFile(dir_ + "/fed.yaml", yaml);
  auto run = RunProcess({kSextant, "run", dir_ + "/fed.yaml", "--run-dir", dir_ + "/run"}, 600);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string html = MakeReport(dir_ + "/run");

  testing::BrowserRender r = testing::DumpDom(html, kWidth, 900);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  ExpectNoPageErrors(r);
  ASSERT_EQ(testing::BodyAttribute(r.dom, "data-render-check"), "ok") << r.stderr_text;
  nlohmann::json boxes =
      nlohmann::json::parse(testing::BodyAttribute(r.dom, "data-chart-boxes"), nullptr, false);
  ASSERT_TRUE(boxes.is_object());
  int height = std::stoi(testing::BodyAttribute(r.dom, "data-page-height"));
  std::string png = dir_ + "/report.png", log;
  ASSERT_EQ(testing::Screenshot(html, png, kWidth, height, &log), 0) << log;
  testing::Image image;
  std::string error;
  ASSERT_TRUE(testing::DecodePng(ReadFile(png), &image, &error)) << error;
  for (const std::string id :
       {"chart-federated-accuracy", "chart-federated-loss", "chart-federated-clients"}) {
    ASSERT_TRUE(boxes.contains(id)) << id << " in " << boxes.dump();
    auto b = boxes[id];
    EXPECT_GT(testing::GreyVariance(image, b[0], b[1], b[2], b[3]), 100) << id << " looks blank";
  }
  // The page's accuracy series holds the recorded rounds: global and both regions.
  std::string page = ReadFile(html);
  EXPECT_THAT(page, HasSubstr("east"));
  EXPECT_THAT(page, HasSubstr("west"));
}

}  // namespace
}  // namespace sextant
