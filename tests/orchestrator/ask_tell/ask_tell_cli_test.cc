// `sextant run` in ask_tell mode with `sextant ask` and `sextant tell` processes: live (over
// the address the run records) and offline (on a run directory no process holds).
#include <signal.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

std::string Experiment(const std::string& name, int trials, int concurrent,
                       const std::string& extra = "") {
  return absl::StrCat("name: ", name, R"(
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {mode: ask_tell, sampler: sobol, seed: 2, max_trials: )",
                      trials, ", max_concurrent: ", concurrent, "}\n", extra);
}

// The objective the "clients" compute.
double Loss(double x) { return (x - 0.3) * (x - 0.3); }

// Every digit, so that the value told is the value computed.
std::string Num(double v) { return absl::StrFormat("%.17g", v); }

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    out.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  return out;
}

nlohmann::json Results(const std::string& dir) {
  auto r = RunProcess({kSextant, "results", dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

class AskTellCliTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("ask_tell_cli"); }

  // Asks one trial and tells its loss; returns the trial id (0 when none came).
  int64_t AskAndTell(const std::string& run) {
    auto asked = RunProcess({kSextant, "ask", run, "--wait", "5"});
    if (asked.exit_code != 0 || asked.out.empty()) return 0;
    nlohmann::json t = JsonLines(asked.out).at(0);
    const double x = t["params"]["x"].get<double>();
    auto step = RunProcess({kSextant, "tell", run, absl::StrCat(t["trial"].get<int64_t>()),
                            "--step", "1", "--metrics", "loss=" + Num(Loss(x) + 1)});
    EXPECT_EQ(step.exit_code, 0) << step.err;
    EXPECT_EQ(step.out, "continue\n");
    auto told = RunProcess(
        {kSextant, "tell", run, absl::StrCat(t["trial"].get<int64_t>()), "--value", Num(Loss(x))});
    EXPECT_EQ(told.exit_code, 0) << told.err;
    nlohmann::json r = JsonLines(told.out).at(0);
    EXPECT_EQ(r["state"], "COMPLETED");
    EXPECT_FALSE(r["already_told"].get<bool>());
    return t["trial"].get<int64_t>();
  }

  // Checks a finished run's results: every trial COMPLETED with the loss of its x.
  void ExpectAllCompleted(const std::string& run, int trials) {
    nlohmann::json r = Results(run);
    EXPECT_EQ(r["state"], "COMPLETED");
    ASSERT_EQ(r["trials"].size(), static_cast<size_t>(trials));
    for (const nlohmann::json& t : r["trials"]) {
      EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
      EXPECT_NEAR(t["value"].get<double>(), Loss(t["params"]["x"].get<double>()), 1e-9);
    }
    ASSERT_TRUE(r["best"].is_object());
  }

  std::string dir_;
};

TEST_F(AskTellCliTest, ValidateAcceptsAskTellAndRejectsACommand) {
  WriteFile(dir_ + "/ok.yaml", Experiment("ok", 4, 1, "trial: {max_restarts: 1}\n"));
  auto ok = RunProcess({kSextant, "validate", dir_ + "/ok.yaml"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  WriteFile(dir_ + "/bad.yaml", Experiment("bad", 4, 1, "trial:\n  command: [python3, t.py]\n"));
  auto bad = RunProcess({kSextant, "validate", dir_ + "/bad.yaml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr(dir_ + "/bad.yaml:7:3: trial.command: search.mode is ask_tell"));
}

TEST_F(AskTellCliTest, LiveRunFinishesTheSearchWithTwoAskers) {
  const std::string run = dir_ + "/run";
  WriteFile(dir_ + "/exp.yaml", Experiment("live", 6, 2));
  BackgroundProcess server({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_TRUE(server.WaitForOutput("serving ask/tell", 30)) << server.err();
  EXPECT_TRUE(std::filesystem::exists(run + "/address"));
  std::set<int64_t> told;
  std::mutex mu;
  std::vector<std::thread> askers;
  for (int i = 0; i < 2; ++i) {
    askers.emplace_back([&] {
      while (int64_t id = AskAndTell(run)) {
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_TRUE(told.insert(id).second) << "trial " << id << " was handed out twice";
      }
    });
  }
  for (std::thread& t : askers) t.join();
  EXPECT_EQ(told.size(), 6u);
  EXPECT_EQ(server.Wait(30), 0) << server.err();
  EXPECT_FALSE(std::filesystem::exists(run + "/address"));
  ExpectAllCompleted(run, 6);
}

TEST_F(AskTellCliTest, LiveRunOverTlsIsReachedWithTheWorkerCertificate) {
  const std::string run = dir_ + "/run", certs = dir_ + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  WriteFile(dir_ + "/exp.yaml", Experiment("tls", 2, 1));
  BackgroundProcess server(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run, "--tls-dir", certs});
  ASSERT_TRUE(server.WaitForOutput("serving ask/tell", 30)) << server.err();
  EXPECT_THAT(testing::ReadFile(run + "/address"), HasSubstr("\"tls_dir\""));
  EXPECT_NE(AskAndTell(run), 0);
  EXPECT_NE(AskAndTell(run), 0);
  EXPECT_EQ(server.Wait(30), 0) << server.err();
  ExpectAllCompleted(run, 2);
}

TEST_F(AskTellCliTest, BadTellsAreRefusedLiveWithExitTwo) {
  const std::string run = dir_ + "/run";
  WriteFile(dir_ + "/exp.yaml", Experiment("refusals", 2, 1));
  BackgroundProcess server({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_TRUE(server.WaitForOutput("serving ask/tell", 30)) << server.err();
  auto asked = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  auto unknown = RunProcess({kSextant, "tell", run, "7", "--value", "1"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("trial 7 is not in this run"));
  auto nan = RunProcess({kSextant, "tell", run, "1", "--value", "nan"});
  EXPECT_EQ(nan.exit_code, 2);
  EXPECT_THAT(nan.err, HasSubstr("trial 1: the value of objective 'loss' is nan"));
  auto garbage = RunProcess({kSextant, "tell", run, "1", "--value", "0.5x"});
  EXPECT_EQ(garbage.exit_code, 2);
  EXPECT_THAT(garbage.err, HasSubstr("tell 1: --value '0.5x' is not a number"));
  auto two = RunProcess({kSextant, "tell", run, "1", "--values", "0.1,0.2"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_THAT(two.err, HasSubstr("2 values told, but the experiment has 1"));
  auto none = RunProcess({kSextant, "tell", run, "1"});
  EXPECT_EQ(none.exit_code, 2);
  auto unnamed = RunProcess({kSextant, "tell", run, "1", "--metrics", "acc=0.9"});
  EXPECT_EQ(unnamed.exit_code, 2);
  EXPECT_THAT(unnamed.err, HasSubstr("trial 1: a completed tell needs the objective loss"));
  auto first = RunProcess({kSextant, "tell", run, "1", "--metrics", "loss=0.5,acc=0.9"});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(JsonLines(first.out).at(0)["state"], "COMPLETED");
  auto again = RunProcess({kSextant, "tell", run, "1", "--value", "0.9"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  nlohmann::json r = JsonLines(again.out).at(0);
  EXPECT_TRUE(r["already_told"].get<bool>());
  EXPECT_DOUBLE_EQ(r["values"]["loss"].get<double>(), 0.5);
  server.Signal(SIGINT);
  EXPECT_EQ(server.Wait(30), 130);
  EXPECT_EQ(Results(run)["trials"][0]["value"].get<double>(), 0.5);
}

TEST_F(AskTellCliTest, StepDuringTheBudgetWindDownPrintsNotice) {
  const std::string run = dir_ + "/run";
  WriteFile(dir_ + "/exp.yaml", Experiment("notice", 4, 1, "budget: {max_wall_time: 1s}\n"));
  BackgroundProcess server({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_TRUE(server.WaitForOutput("serving ask/tell", 30)) << server.err();
  auto asked = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the wall time
  auto step = RunProcess({kSextant, "tell", run, "1", "--step", "1", "--metrics", "loss=0.4"});
  EXPECT_EQ(step.exit_code, 0) << step.err;
  EXPECT_EQ(step.out, "notice\n");
  auto told = RunProcess({kSextant, "tell", run, "1", "--value", "0.4"});
  EXPECT_EQ(told.exit_code, 0) << told.err;
  server.Wait(30);
}

TEST_F(AskTellCliTest, OfflineAskAndTellFinishTheSearch) {
  const std::string run = dir_ + "/run";
  WriteFile(dir_ + "/exp.yaml", Experiment("offline", 4, 2));
  {
    // A run that is started and stopped leaves a run directory no process holds.
    BackgroundProcess server({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
    ASSERT_TRUE(server.WaitForOutput("serving ask/tell", 30)) << server.err();
    server.Signal(SIGINT);
    ASSERT_EQ(server.Wait(30), 130);
  }
  // Two asks in two processes: the first trial stays held by its asker (not requeued).
  auto a = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  nlohmann::json ta = JsonLines(a.out).at(0), tb = JsonLines(b.out).at(0);
  EXPECT_NE(ta["trial"], tb["trial"]);
  auto full = RunProcess({kSextant, "ask", run});  // max_concurrent 2: both slots are asked
  EXPECT_EQ(full.exit_code, 1);
  EXPECT_THAT(full.err, HasSubstr("no trial can start now"));
  for (const nlohmann::json& t : {ta, tb}) {
    const std::string id = absl::StrCat(t["trial"].get<int64_t>());
    auto step = RunProcess({kSextant, "tell", run, id, "--step", "1", "--metrics", "loss=3"});
    EXPECT_EQ(step.exit_code, 0) << step.err;
    EXPECT_EQ(step.out, "continue\n");
    auto told = RunProcess(
        {kSextant, "tell", run, id, "--value", Num(Loss(t["params"]["x"].get<double>()))});
    EXPECT_EQ(told.exit_code, 0) << told.err;
  }
  auto unknown = RunProcess({kSextant, "tell", run, "42", "--value", "1"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("trial 42 is not in this run"));
  EXPECT_EQ(Results(run)["state"], "INTERRUPTED");  // no process serves it: its state stays
  int more = 0;
  while (AskAndTell(run) != 0) ++more;
  EXPECT_EQ(more, 2);
  ExpectAllCompleted(run, 4);
  auto done = RunProcess({kSextant, "ask", run});
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_EQ(done.out, "");
  EXPECT_THAT(done.err, HasSubstr("has ended"));
}

TEST_F(AskTellCliTest, AskRefusesARunOfCommands) {
  const std::string run = dir_ + "/run";
  WriteFile(dir_ + "/exp.yaml", R"(name: commands
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {max_trials: 1}
trial:
  command: [sh, -c, "echo loss=1"]
)");
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto asked = RunProcess({kSextant, "ask", run});
  EXPECT_EQ(asked.exit_code, 2);
  EXPECT_THAT(asked.err, HasSubstr("is not an ask/tell run"));
  auto missing = RunProcess({kSextant, "ask", dir_ + "/nowhere"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("is not a Sextant run directory"));
}

}  // namespace
}  // namespace sextant
