// The Prometheus /metrics endpoint: the text format, the HTTP server's limits, and a scrape of
// a real run validated by promtool.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/monitor/metrics_http_server.h"
#include "orchestrator/monitor/prometheus_metrics.h"
#include "orchestrator/monitor/run_monitor.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::ConnectLoopback;
using ::testing::HasSubstr;
using testing::HttpBody;
using testing::HttpExchange;
using testing::MakeTempDir;
using ::testing::Not;
using testing::RunProcess;
using ::testing::StartsWith;
using testing::WriteFile;

// A request whose Host header names the server on `port`, as every request must (a foreign
// Host is answered 403).
std::string Request(int port, const std::string& line, const std::string& headers = "") {
  return absl::StrCat(line, " HTTP/1.1\r\nHost: 127.0.0.1:", port, "\r\n", headers, "\r\n");
}

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

TEST(PrometheusTextTest, EveryTrialStateIsListedAndLabelValuesAreEscaped) {
  MetricsSnapshot s;
  s.experiment = "a\"b\\c\nd";
  s.metric = "loss";
  s.goal = "minimize";
  s.by_state = {{"COMPLETED", 3}, {"RUNNING", 2}};
  s.max_trials = 10;
  s.best_value = 0.25;
  s.best_trial = 4;
  s.workers = 4;
  s.busy_workers = 2;
  std::string text = RenderPrometheusText(s);
  EXPECT_THAT(text, HasSubstr("sextant_run_info{experiment=\"a\\\"b\\\\c\\nd\",metric=\"loss\","
                              "goal=\"minimize\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("sextant_trials{state=\"COMPLETED\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("sextant_trials{state=\"PREEMPTED\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("sextant_best_value 0.25\n"));
  EXPECT_THAT(text, HasSubstr("sextant_worker_utilisation 0.5\n"));
  EXPECT_THAT(text, HasSubstr("sextant_spend{currency=\"USD\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("sextant_rounds_max")));  // not a federated run
  EXPECT_THAT(text, Not(HasSubstr("sextant_budget")));
  s.rounds_max = 20;
  s.budget = 50;
  text = RenderPrometheusText(s);
  EXPECT_THAT(text, HasSubstr("sextant_rounds_max 20\n"));
  EXPECT_THAT(text, HasSubstr("sextant_budget{currency=\"USD\"} 50\n"));
  EXPECT_THAT(text, Not(HasSubstr("sextant_spend_by_kind")));  // not a billed federated run
  s.spend = 10;
  s.transfer_spend = 2.5;
  s.participant_preemptions = 3;
  text = RenderPrometheusText(s);
  EXPECT_THAT(text, HasSubstr("sextant_spend_by_kind{currency=\"USD\",kind=\"compute\"} 7.5\n"));
  EXPECT_THAT(text, HasSubstr("sextant_spend_by_kind{currency=\"USD\",kind=\"transfer\"} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("sextant_participant_preemptions 3\n"));
}

// A worker's latest telemetry sample, as its heartbeat leaves it in state.db.
TelemetryRow Sample(double time, int64_t worker, int gpus, double gpu_percent) {
  TelemetryRow t;
  t.time = time;
  t.worker_id = worker;
  t.gpu_count = gpus;
  t.gpu_utilization = gpu_percent;
  return t;
}

TEST(MeanGpuUtilisationTest, MeanOverFreshSamplesOfWorkersWithAGpu) {
  const double now = 1000;
  EXPECT_EQ(MeanGpuUtilisation({}, now, 30), std::nullopt);
  EXPECT_EQ(MeanGpuUtilisation({Sample(now, 1, 0, 0)}, now, 30), std::nullopt);  // CPU only
  EXPECT_DOUBLE_EQ(
      *MeanGpuUtilisation(
          {Sample(now - 1, 1, 2, 40), Sample(now - 2, 2, 1, 80), Sample(now, 3, 0, 0)}, now, 30),
      0.6);
  // A worker silent for longer than the window no longer counts; a reading above 100% is 1.
  EXPECT_DOUBLE_EQ(
      *MeanGpuUtilisation({Sample(now - 31, 1, 1, 10), Sample(now, 2, 1, 130)}, now, 30), 1.0);
}

// The GPU figures that workers send with their heartbeats reach /metrics: the monitor reads the
// run's telemetry from state.db, as the dispatcher stores it.
TEST(RunMonitorTest, PublishesTheWorkersMeanGpuUtilisationFromTheRunsTelemetry) {
  const std::string dir = MakeTempDir("monitor-gpu");
  auto store = Store::Open(RunDir::DbPath(dir), /*create=*/true);
  ASSERT_TRUE(store.ok()) << store.status();
  FakeClock clock;
  const double now = absl::ToDoubleSeconds(clock.Now() - absl::UnixEpoch());
  for (const TelemetryRow& t : {Sample(now - 4, 1, 1, 90), Sample(now - 2, 1, 1, 25),
                                Sample(now - 1, 2, 2, 75), Sample(now - 1, 3, 0, 0)}) {
    ASSERT_TRUE((*store)->AddTelemetry(t).ok());
  }
  v1::ExperimentSpec spec;
  spec.set_name("gpu");
  std::ostringstream out;
  auto monitor = RunMonitor::Start(0, "page-token", spec, dir, &clock, out);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  auto scrape = [&] {
    const int port = (*monitor)->port();
    return HttpBody(HttpExchange(port, Request(port, "GET /metrics")));
  };
  EXPECT_THAT(scrape(), HasSubstr("sextant_gpu_utilisation 0.5\n"));  // workers 1 (25) and 2 (75)

  // Newer samples are read once the cache lapses; a driver's own figure wins.
  ASSERT_TRUE((*store)->AddTelemetry(Sample(now + 5, 1, 1, 100)).ok());
  ASSERT_TRUE((*store)->AddTelemetry(Sample(now + 5, 2, 2, 100)).ok());
  clock.Advance(absl::Seconds(6));
  (*monitor)->Publish((*monitor)->Snapshot());
  EXPECT_THAT(scrape(), HasSubstr("sextant_gpu_utilisation 1\n"));
  MetricsSnapshot given = (*monitor)->Snapshot();
  given.gpu_utilisation = 0.25;
  (*monitor)->Publish(given);
  EXPECT_THAT(scrape(), HasSubstr("sextant_gpu_utilisation 0.25\n"));

  // Workers that stopped reporting leave the gauge out rather than frozen at their last value.
  clock.Advance(absl::Seconds(60));
  (*monitor)->Publish((*monitor)->Snapshot());
  EXPECT_THAT(scrape(), Not(HasSubstr("sextant_gpu_utilisation")));
}

TEST(MetricsHttpServerTest, ServesTheLatestPublishedTextOnMetricsOnly) {
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, RealClockInstance());
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  ASSERT_GT(port, 0);
  (*server)->Publish("a 1\n");
  (*server)->Publish("b 2\n");
  std::string r = HttpExchange(port, Request(port, "GET /metrics"));
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_EQ(HttpBody(r), "b 2\n");
  EXPECT_THAT(HttpExchange(port, absl::StrCat("GET /metrics?x=1 HTTP/1.0\r\nHost: localhost:", port,
                                              "\r\n\r\n")),
              StartsWith("HTTP/1.1 200"));
  std::string head = HttpExchange(port, Request(port, "HEAD /metrics"));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(HttpBody(head), "");
  EXPECT_THAT(HttpExchange(port, Request(port, "GET /")), StartsWith("HTTP/1.1 404"));  // no page
  EXPECT_THAT(HttpExchange(port, Request(port, "GET /other")), StartsWith("HTTP/1.1 404"));
  std::string post = HttpExchange(port, Request(port, "POST /metrics", "Content-Length: 0\r\n"));
  EXPECT_THAT(post, StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD"));
  EXPECT_THAT(HttpExchange(port, Request(port, "DELETE /metrics")), StartsWith("HTTP/1.1 405"));
  // Another host name for this port (DNS rebinding), or none: nothing is answered.
  EXPECT_THAT(HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
              StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(HttpExchange(port, "GET /metrics HTTP/1.0\r\n\r\n"), StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(HttpExchange(port, "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(HttpExchange(port, "GET /metrics HTTP/1.0\n\n"), StartsWith("HTTP/1.1 400"));
}

TEST(MetricsHttpServerTest, ServesThePageAtTheRootAndItsErrorAs503) {
  std::atomic<int> calls{0};
  MetricsHttpOptions o;
  o.page_token = "t0k";
  o.page = [&]() -> absl::StatusOr<std::string> {
    if (++calls == 2) return absl::NotFoundError("no run yet");
    return std::string("<html>page</html>");
  };
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, RealClockInstance(), o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::string r = HttpExchange(port, Request(port, "GET /?token=t0k"));
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/html"));
  EXPECT_EQ(HttpBody(r), "<html>page</html>");
  r = HttpExchange(port, Request(port, "GET /?token=t0k"));
  EXPECT_THAT(r, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(HttpBody(r), HasSubstr("no run yet"));
  EXPECT_THAT(HttpExchange(port, Request(port, "POST /?token=t0k", "Content-Length: 0\r\n")),
              StartsWith("HTTP/1.1 405"));
  // Without the token, or with another, the page is not even made.
  EXPECT_THAT(HttpExchange(port, Request(port, "GET /")), StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(HttpExchange(port, Request(port, "GET /?token=t0K")), StartsWith("HTTP/1.1 403"));
  EXPECT_EQ(calls, 2);  // a refused request never makes the page
}

TEST(MetricsHttpServerTest, OversizedRequestIsRefusedWithoutReadingItAll) {
  MetricsHttpOptions o;
  o.max_request_bytes = 1024;
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, RealClockInstance(), o);
  ASSERT_TRUE(server.ok());
  std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(64 << 10, 'a') + "\r\n\r\n";
  EXPECT_THAT(HttpExchange((*server)->port(), huge), StartsWith("HTTP/1.1 431"));
  // Many short header lines count together: the bound is on the whole head.
  std::string many = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) absl::StrAppend(&many, "X-", i, ": ", std::string(40, 'b'), "\r\n");
  many += "\r\n";
  EXPECT_THAT(HttpExchange((*server)->port(), many), StartsWith("HTTP/1.1 431"));
  (*server)->Publish("ok 1\n");
  const int port = (*server)->port();
  EXPECT_EQ(HttpBody(HttpExchange(port, Request(port, "GET /metrics"))), "ok 1\n");
}

TEST(MetricsHttpServerTest, SilentClientIsDroppedAfterTheTimeoutAndScrapesGoOn) {
  MetricsHttpOptions o;
  o.request_timeout_seconds = 0.3;
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, RealClockInstance(), o);
  ASSERT_TRUE(server.ok());
  (*server)->Publish("x 1\n");
  int silent = ConnectLoopback((*server)->port());
  ASSERT_GE(silent, 0);
  auto start = std::chrono::steady_clock::now();
  const int port = (*server)->port();
  EXPECT_EQ(HttpBody(HttpExchange(port, Request(port, "GET /metrics"))), "x 1\n");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 2.0);
  char c;
  EXPECT_EQ(recv(silent, &c, 1, 0), 0);  // the server closed it
  close(silent);
}

TEST(MetricsHttpServerTest, RefusesABadAddressAndATakenPort) {
  Clock* clock = RealClockInstance();
  EXPECT_EQ(MetricsHttpServer::Start("not-an-ip", 0, clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = MetricsHttpServer::Start("127.0.0.1", 0, clock);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1", (*first)->port(), clock).status().code(),
            absl::StatusCode::kUnavailable);
}

std::string Promtool() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

// The port a run serves /metrics on (from its first lines of output), or 0.
int MetricsPort(testing::BackgroundProcess& run) {
  if (!run.WaitForOutput("/metrics", 30)) return 0;
  std::smatch m;
  const std::string out = run.out();
  if (!std::regex_search(out, m, std::regex("http://127\\.0\\.0\\.1:(\\d+)/metrics"))) return 0;
  return std::stoi(m[1].str());
}

// Scrapes /metrics until the text holds `needle` (30 s at most); *body is the last scrape.
bool ScrapeUntil(int port, const std::string& needle, std::string* body) {
  return testing::WaitFor(
      [&] {
        *body = HttpBody(HttpExchange(port, Request(port, "GET /metrics")));
        return body->find(needle) != std::string::npos;
      },
      30);
}

// promtool accepts the scraped text.
void ExpectValidForPromtool(const std::string& dir, const std::string& body) {
  WriteFile(dir + "/scrape.txt", body);
  auto check = RunProcess(
      {"/bin/sh", "-c", absl::StrCat(Promtool(), " check metrics < ", dir, "/scrape.txt")});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << body;
}

// Every family at once (each optional one set) passes promtool's lint, e.g. no gauge ends in
// _total, which Prometheus keeps for counters.
TEST(PrometheusTextTest, EveryFamilyPassesPromtool) {
  SEXTANT_REQUIRE_COMPONENT(!Promtool().empty(),
                            "promtool (Debian package prometheus) is not installed");
  MetricsSnapshot s;
  s.experiment = "all";
  s.metric = "loss";
  s.goal = "minimize";
  s.best_value = 0.5;
  s.front_size = 3;
  s.hypervolume = 0.25;
  s.budget = 10;
  s.workers = 4;
  s.busy_workers = 3;
  s.gpu_utilisation = 0.5;
  s.rounds_max = 20;
  s.rounds_done = 7;
  s.transfer_spend = 0.25;
  s.participant_preemptions = 2;
  ExpectValidForPromtool(MakeTempDir("promtool-all"), RenderPrometheusText(s));
}

TEST(MetricsEndToEndTest, ScrapeDuringARealRunIsValidPrometheusText) {
  std::string dir = MakeTempDir("metrics");
  WriteFile(dir + "/slow.sh", "#!/bin/sh\nsleep 0.4\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir + "/exp.yaml", R"(name: metrics-e2e
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 1, max_trials: 12, max_concurrent: 2}
trial:
  command: [sh, slow.sh]
budget: {max_cost: 25}
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--metrics-port", "0"});
  const int port = MetricsPort(run);
  ASSERT_GT(port, 0) << run.out() << run.err();
  EXPECT_THAT(run.out(), ::testing::ContainsRegex(absl::StrCat(
                             "sextant: live report on http://127\\.0\\.0\\.1:", port,
                             "/\\?token=[0-9a-f]{64} , metrics on http://127\\.0\\.0\\.1:", port,
                             "/metrics\n")));
  // Scrape until a trial has completed, while the run is still going.
  std::string body;
  ASSERT_TRUE(ScrapeUntil(port, "sextant_best_value", &body)) << body;
  EXPECT_THAT(body, HasSubstr("sextant_run_info{experiment=\"metrics-e2e\""));
  EXPECT_THAT(body, HasSubstr("sextant_trials_max 12\n"));
  EXPECT_THAT(body, HasSubstr("sextant_workers 2\n"));
  EXPECT_THAT(body, HasSubstr("sextant_budget{currency=\"USD\"} 25\n"));
  EXPECT_THAT(body, HasSubstr("sextant_trials{state=\"COMPLETED\"} "));
  EXPECT_EQ(run.Wait(60), 0) << run.err();
  SEXTANT_REQUIRE_COMPONENT(!Promtool().empty(),
                            "promtool (Debian package prometheus) is not installed");
  ExpectValidForPromtool(dir, body);
}

TEST(MetricsEndToEndTest, SeveralObjectivesShowTheFrontAndItsHypervolume) {
  std::string dir = MakeTempDir("metrics-mo");
  WriteFile(dir + "/two.sh",
            "#!/bin/sh\nsleep 0.3\nawk -v x=\"$SEXTANT_PARAM_X\" 'BEGIN { printf \"f1=%.9f "
            "f2=%.9f\\n\", x, 1 - x }'\n");
  WriteFile(dir + "/exp.yaml", R"(name: metrics-mo
objectives: [{metric: f1, reference: 2}, {metric: f2, reference: 2}]
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 1, max_trials: 10, max_concurrent: 2}
trial:
  command: [sh, two.sh]
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--metrics-port", "0"});
  const int port = MetricsPort(run);
  ASSERT_GT(port, 0) << run.out() << run.err();
  std::string body;
  ASSERT_TRUE(ScrapeUntil(port, "sextant_hypervolume ", &body)) << body;
  EXPECT_THAT(body, HasSubstr("metric=\"f1,f2\",goal=\"minimize,minimize\""));
  EXPECT_THAT(body, HasSubstr("sextant_pareto_front_size "));
  EXPECT_THAT(body, Not(HasSubstr("sextant_best_value")));
  EXPECT_EQ(run.Wait(60), 0) << run.err();
  SEXTANT_REQUIRE_COMPONENT(!Promtool().empty(),
                            "promtool (Debian package prometheus) is not installed");
  ExpectValidForPromtool(dir, body);
}

// The value of an unlabelled sample in a scrape, or -1 when it is missing.
double Gauge(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("(^|\n)" + name + " ([^\n]+)\n"))) return -1;
  return std::stod(m[2].str());
}

// A run on a pool of instances has no local worker processes: the workers counted are those
// of the live instances, as the fleet binds them.
TEST(MetricsEndToEndTest, PoolRunCountsTheWorkersOfLiveInstances) {
  std::string dir = MakeTempDir("metrics-pool");
  WriteFile(dir + "/slow.sh", "#!/bin/sh\nsleep 1\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir + "/exp.yaml", R"(name: metrics-pool
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: sobol, seed: 1, max_trials: 8, max_concurrent: 2}
trial:
  command: [sh, slow.sh]
resources:
  provider: local
  pools:
    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: 2}
)");
  testing::BackgroundProcess run(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--metrics-port", "0"});
  const int port = MetricsPort(run);
  ASSERT_GT(port, 0) << run.out() << run.err();
  std::string body;
  ASSERT_TRUE(ScrapeUntil(port, "sextant_workers_busy 2\n", &body)) << body;
  EXPECT_THAT(body, HasSubstr("sextant_workers 2\n"));
  EXPECT_THAT(body, HasSubstr("sextant_worker_utilisation 1\n"));
  ASSERT_TRUE(ScrapeUntil(port, "sextant_best_value", &body)) << body;
  EXPECT_GT(Gauge(body, "sextant_spend\\{currency=\"USD\"\\}"), 0) << body;
  EXPECT_EQ(run.Wait(60), 0) << run.err();
  SEXTANT_REQUIRE_COMPONENT(!Promtool().empty(),
                            "promtool (Debian package prometheus) is not installed");
  ExpectValidForPromtool(dir, body);
}

TEST(MetricsEndToEndTest, BadMetricsPortIsAUsageError) {
  auto r = RunProcess({kSextant, "run", "x.yaml", "--metrics-port", "70000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--metrics-port"));
}

}  // namespace
}  // namespace sextant
