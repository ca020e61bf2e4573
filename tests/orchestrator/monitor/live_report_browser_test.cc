// The live report on --metrics-port, loaded in Debian's headless Chromium while real runs go
// on: a search (the page renders, and its counts move as trials finish) and a federated run
// (which serves /metrics and the live report too, with its rounds, valid for promtool).
#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/report/report_test_support.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::Not;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

// The port of the live report a run announces, or 0; *url is the address it prints, with the
// run's token, which the page is served with only.
int LivePort(testing::BackgroundProcess& run, std::string* url) {
  if (!run.WaitForOutput("/metrics", 60)) return 0;
  std::smatch m;
  const std::string out = run.out();
  if (!std::regex_search(
          out, m, std::regex("live report on (http://127\\.0\\.0\\.1:(\\d+)/\\?token=[0-9a-f]+) ")))
    return 0;
  *url = m[1].str();
  return std::stoi(m[2].str());
}

// /metrics now ("" when the server is gone).
std::string Scrape(int port) {
  return testing::HttpBody(testing::HttpExchange(
      port, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:", port, "\r\n\r\n")));
}

// The value of a sample in a scrape (the name with its labels, as written), or -1.
double Sample(const std::string& body, const std::string& name) {
  const size_t at = body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + name.size() + 2));
}

// The count of `state` in the page's table of trials by state, or -1.
int StateCount(const std::string& dom, const std::string& state) {
  std::smatch m;
  if (!std::regex_search(
          dom, m, std::regex(absl::StrCat("data-state=\"", state, "\" data-value=\"(\\d+)\"")))) {
    return -1;
  }
  return std::stoi(m[1].str());
}

// The page loaded, drew its charts and logged nothing to the console.
void ExpectRendered(const testing::BrowserRender& r) {
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("Uncaught")));
  EXPECT_THAT(r.stderr_text, Not(HasSubstr(":CONSOLE")));
  EXPECT_EQ(testing::BodyAttribute(r.dom, "data-render-check"), "ok") << r.stderr_text;
  EXPECT_THAT(r.dom, HasSubstr("id=\"run-in-progress\""));
  EXPECT_THAT(r.dom, HasSubstr("this page updates every 5 s"));
  EXPECT_THAT(r.dom, Not(HasSubstr("http-equiv=\"refresh\"")));
}

class LiveReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SEXTANT_REQUIRE_COMPONENT(!testing::ChromiumPath().empty(),
                              "chromium is not installed (scripts/install-deps installs it)");
    dir_ = MakeTempDir("live-report");
  }
  std::string dir_;
};

TEST_F(LiveReportBrowserTest, SearchPageRendersWhileTheRunGoesAndItsCountsMove) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 0.8\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir_ + "/exp.yaml", R"(name: live-search
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 1, max_trials: 1000, max_concurrent: 2}
trial:
  command: [sh, slow.sh]
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--metrics-port", "0"});
  std::string url;
  const int port = LivePort(run, &url);
  ASSERT_GT(port, 0) << run.out() << run.err();
  const std::string completed = "sextant_trials{state=\"COMPLETED\"}";
  ASSERT_TRUE(testing::WaitFor([&] { return Sample(Scrape(port), completed) >= 2; }, 60));

  testing::BrowserRender first = testing::DumpDomUrl(url, 1000, 900);
  ExpectRendered(first);
  EXPECT_THAT(first.dom, HasSubstr("id=\"chart-history-trial\""));
  EXPECT_THAT(first.dom, HasSubstr("id=\"chart-timeline\""));
  const int done_first = StateCount(first.dom, "COMPLETED");
  ASSERT_GE(done_first, 2) << first.dom;
  const int marks_first =
      std::stoi(testing::AttributeOf(first.dom, "chart-history-trial", "data-marks"));

  // Three more trials finish, and the cached page outlives its two seconds (three trials take
  // about 1.2 s here, so the wait for them alone can end while the first page is still served).
  const auto first_rendered = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      testing::WaitFor([&] { return Sample(Scrape(port), completed) >= done_first + 3; }, 60));
  std::this_thread::sleep_until(first_rendered + std::chrono::milliseconds(2500));
  testing::BrowserRender second = testing::DumpDomUrl(url, 1000, 900);
  ExpectRendered(second);
  EXPECT_GE(StateCount(second.dom, "COMPLETED"), done_first + 3);
  EXPECT_GT(std::stoi(testing::AttributeOf(second.dom, "chart-history-trial", "data-marks")),
            marks_first);

  // A page left open updates itself in place (twice in 11 virtual seconds) while the run goes
  // on: the newer page replaces the old one, still in progress, with no script error.
  testing::BrowserRender kept = testing::DumpDomUrl(url, 1000, 900, /*virtual_time_ms=*/11000);
  ASSERT_EQ(kept.exit_code, 0) << kept.stderr_text;
  EXPECT_THAT(kept.stderr_text, Not(HasSubstr("Uncaught")));
  EXPECT_THAT(kept.dom, HasSubstr("id=\"run-in-progress\""));
  EXPECT_THAT(kept.dom, Not(HasSubstr("id=\"run-ended\"")));
  EXPECT_GE(std::stoi("0" + testing::BodyAttribute(kept.dom, "data-live-updates")), 1);
  EXPECT_GE(StateCount(kept.dom, "COMPLETED"), StateCount(second.dom, "COMPLETED"));

  // The run is far longer than a loaded machine's two page loads (1000 trials of 0.8 s, two at
  // a time): the test ends it with an interrupt, which it meets as a user's Ctrl-C.
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(60), 130) << run.err();
}

// A tab left open on the live page: once the run has ended and its server is gone, the page's
// next update finds no server and says the run ended and how to get its report, where a meta
// refresh would have reloaded into "connection refused". The page as the run served it is
// opened from a file, where its update's fetch fails as it does against a closed port.
TEST_F(LiveReportBrowserTest, AnOpenPageSaysTheRunEndedOnceItsServerHasGone) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 1\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir_ + "/exp.yaml", R"(name: live-ends
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 1, max_trials: 6, max_concurrent: 2}
trial:
  command: [sh, slow.sh]
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--metrics-port", "0"});
  std::string url;
  const int port = LivePort(run, &url);
  ASSERT_GT(port, 0) << run.out() << run.err();
  const std::string page = testing::HttpBody(
      testing::HttpExchange(port, absl::StrCat("GET ", url.substr(url.find('/', 7)),
                                               " HTTP/1.1\r\nHost: 127.0.0.1:", port, "\r\n\r\n")));
  ASSERT_THAT(page, HasSubstr("id=\"run-in-progress\"")) << page;
  ASSERT_EQ(run.Wait(60), 0) << run.out() << run.err();
  EXPECT_TRUE(Scrape(port).empty()) << "the server stops with the run";
  WriteFile(dir_ + "/open-tab.html", page);
  // Eight virtual seconds: the page's update (every 5 s) runs once.
  testing::BrowserRender r = testing::DumpDomUrl("file://" + dir_ + "/open-tab.html", 1000, 900,
                                                 /*virtual_time_ms=*/8000);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, Not(HasSubstr("Uncaught")));
  EXPECT_THAT(r.dom, HasSubstr("id=\"run-ended\""));
  EXPECT_THAT(r.dom, Not(HasSubstr("id=\"run-in-progress\"")));
  EXPECT_THAT(r.dom, HasSubstr("The run has ended."));
  EXPECT_THAT(r.dom, HasSubstr(absl::StrCat("sextant report ", dir_, "/run -o report.html")));
  EXPECT_THAT(r.dom, HasSubstr(absl::StrCat("sextant results ", dir_, "/run")));
}

TEST_F(LiveReportBrowserTest, FederatedRunServesMetricsWithItsRoundsAndTheLivePage) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "dataset-fashion-mnist is not installed");
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/bin/promtool"),
                            "promtool (Debian package prometheus) is not installed");
  WriteFile(dir_ + "/fed.yaml", R"(name: live-fed
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 150
  min_clients: 2
  round_deadline: 2s
  examples_per_client: 400
  validation_examples: 200
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir_ + "/fed.yaml", "--run-dir", dir_ + "/run", "--metrics-port", "0"});
  std::string url;
  const int port = LivePort(run, &url);
  ASSERT_GT(port, 0) << run.out() << run.err();
  std::string body;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        body = Scrape(port);
        return Sample(body, "sextant_rounds_done") >= 1;
      },
      180))
      << body << run.out() << run.err();
  EXPECT_THAT(body, HasSubstr("sextant_run_info{experiment=\"live-fed\",metric=\"val_accuracy\","
                              "goal=\"maximize\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("\nsextant_rounds_max 150\n"));
  EXPECT_THAT(body, HasSubstr("\nsextant_trials{state=\"RUNNING\"} 1\n"));
  EXPECT_THAT(body, HasSubstr("\nsextant_workers 4\n"));  // the client processes
  WriteFile(dir_ + "/scrape.txt", body);
  auto check = testing::RunProcess(
      {"/bin/sh", "-c", absl::StrCat("/usr/bin/promtool check metrics < ", dir_, "/scrape.txt")});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << body;

  // A round takes about 0.1 s here: 150 leave the page time to load while they go.
  testing::BrowserRender page = testing::DumpDomUrl(url, 1000, 900);
  ExpectRendered(page);
  EXPECT_THAT(page.dom, HasSubstr("id=\"chart-federated-accuracy\""));

  // rounds_done follows the rounds to the last (served until the run's process exits).
  double last = Sample(body, "sextant_rounds_done");
  bool monotonic = true;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        const double now = Sample(Scrape(port), "sextant_rounds_done");
        if (now < 0) return false;
        monotonic = monotonic && now >= last;
        last = now;
        return now == 150;
      },
      180))
      << last << run.out();
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(run.Wait(180), 0) << run.out() << run.err();
}

}  // namespace
}  // namespace sextant
