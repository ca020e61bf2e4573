// Worker faults with real processes: a worker that hangs (SIGSTOP) past its lease, and network
// cuts shorter and longer than the lease between a worker and the orchestrator (a userspace TCP
// relay that holds every byte while cut). A short outage keeps the attempt; a long one makes
// exactly one new attempt, and the old attempt's late messages are rejected as stale.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "tests/fakes/tcp_proxy.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WaitFor;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

enum class Fault { kHang, kShortCut, kLongCut };

constexpr double kLeaseSeconds = 3;

class WorkerFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("fault");
    // The first trial the external worker gets is the victim: it reports step 1, then waits
    // until the fault is over and reports 999. Every other trial waits until the victim is
    // chosen (so that the local worker cannot take them all); the victim's re-run on the local
    // worker finishes only after the fault is over, so the run is still up to hear the old
    // attempt's late messages.
    WriteFile(dir_ + "/trial.sh", absl::StrCat(R"SH(#!/bin/sh
d=")SH",
                                               dir_, R"SH("
wait_for() { i=0; while [ ! -f "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done; }
if [ "$FAULT_EXTERNAL" = 1 ] && mkdir "$d/claimed" 2>/dev/null; then
  echo "$SEXTANT_TRIAL_ID" > "$d/marker.tmp"; mv "$d/marker.tmp" "$d/marker"
  echo "step=1 loss=500"
  wait_for "$d/healed"
  echo "step=2 loss=999"
  exit 0
fi
wait_for "$d/marker"
if [ "$(cat "$d/marker")" = "$SEXTANT_TRIAL_ID" ]; then wait_for "$d/healed"; sleep 1.5; fi
echo "step=2 loss=$SEXTANT_TRIAL_ID"
)SH"));
    WriteFile(dir_ + "/exp.yaml", R"(name: fault
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 2, max_trials: 3, max_concurrent: 2}
trial:
  command: [sh, trial.sh]
)");
  }

  // Runs the experiment with one local worker and one external worker (through a relay when
  // the fault is a cut), injects the fault on the victim, and returns the victim's id.
  int64_t RunWithFault(Fault fault, double fault_seconds) {
    BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run",
                           "--workers", "1", "--lease-timeout", "3s", "--heartbeat", "0.5s"});
    EXPECT_TRUE(run.WaitForOutput("listening on", 30)) << run.err();
    std::string out = run.out();
    size_t at = out.find("listening on 127.0.0.1:");
    if (at == std::string::npos) return 0;
    at += std::string("listening on 127.0.0.1:").size();
    int port = 0;
    EXPECT_TRUE(absl::SimpleAtoi(out.substr(at, out.find(')', at) - at), &port));
    auto proxy = testing::TcpProxy::Start(port);
    EXPECT_TRUE(proxy.ok()) << proxy.status();
    if (!proxy.ok()) return 0;
    std::string target =
        fault == Fault::kHang ? absl::StrCat("127.0.0.1:", port) : (*proxy)->address();
    setenv("FAULT_EXTERNAL", "1", 1);
    BackgroundProcess worker({kWorker, "--connect", target, "--region", "remote", "--secret-file",
                              dir_ + "/run/secrets/worker.secret"});
    unsetenv("FAULT_EXTERNAL");
    EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(dir_ + "/marker"); }, 30))
        << run.out() << run.err() << worker.err();
    int64_t victim = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(dir_ + "/marker")), &victim));
    // Let the victim report its first step and heartbeat through the relay before the fault.
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    if (fault == Fault::kHang) {
      worker.Signal(SIGSTOP);
    } else {
      (*proxy)->Cut();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(fault_seconds * 1000)));
    if (fault == Fault::kHang) {
      worker.Signal(SIGCONT);
    } else {
      (*proxy)->Heal();
    }
    WriteFile(dir_ + "/healed", "");
    EXPECT_EQ(run.Wait(60), 0) << run.out() << run.err();
    worker_err_ = worker.err();
    worker.Signal(SIGINT);
    worker.Wait(10);
    return victim;
  }

  nlohmann::json Trial(int64_t id) {
    auto r = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["trials"].size(), 3u);
    for (const auto& t : j["trials"]) {
      EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
      if (t["id"] == id) return t;
    }
    ADD_FAILURE() << "no trial " << id;
    return {};
  }

  int LeaseExpiries(int64_t trial) {
    auto events = RunProcess({kSextant, "events", dir_ + "/run"});
    int n = 0;
    for (size_t p = events.out.find("\"kind\":\"lease_expired\""); p != std::string::npos;
         p = events.out.find("\"kind\":\"lease_expired\"", p + 1)) {
      size_t line_end = events.out.find('\n', p);
      std::string line = events.out.substr(p, line_end - p);
      n += line.find(absl::StrCat("\"trial\":", trial)) != std::string::npos;
    }
    return n;
  }

  // True when any stored measurement of the trial carries the old attempt's late value.
  bool StoredLateValue(int64_t trial) {
    auto store = Store::Open(RunDir::DbPath(dir_ + "/run"), false, true);
    EXPECT_TRUE(store.ok());
    auto ms = (*store)->LoadMeasurements(trial);
    EXPECT_TRUE(ms.ok());
    for (const MeasurementRow& m : *ms) {
      if (m.metrics_json.find("999") != std::string::npos) return true;
    }
    return false;
  }

  void ExpectOneNewAttemptAndStaleRejection(int64_t victim) {
    nlohmann::json t = Trial(victim);
    EXPECT_EQ(t["attempts"], 2) << t.dump();
    EXPECT_EQ(t["value"], victim) << t.dump();  // the new attempt's result
    EXPECT_EQ(LeaseExpiries(victim), 1);
    EXPECT_FALSE(StoredLateValue(victim));
    // The old attempt did speak after the fault, and was told it is stale.
    EXPECT_THAT(worker_err_, HasSubstr(absl::StrCat("trial ", victim, " attempt 1")));
    EXPECT_THAT(worker_err_, HasSubstr("stale"));
  }

  std::string dir_;
  std::string worker_err_;
};

TEST_F(WorkerFaultTest, HangPastTheLeaseMakesOneNewAttemptAndLateReportsAreStale) {
  int64_t victim = RunWithFault(Fault::kHang, 2 * kLeaseSeconds);
  ASSERT_GT(victim, 0);
  ExpectOneNewAttemptAndStaleRejection(victim);
}

TEST_F(WorkerFaultTest, NetworkCutShorterThanTheLeaseKeepsTheSameAttempt) {
  int64_t victim = RunWithFault(Fault::kShortCut, kLeaseSeconds / 3);
  ASSERT_GT(victim, 0);
  nlohmann::json t = Trial(victim);
  EXPECT_EQ(t["attempts"], 1) << t.dump();
  EXPECT_EQ(t["value"], 999.0) << t.dump();  // the same attempt ran to its end
  EXPECT_EQ(LeaseExpiries(victim), 0);
  EXPECT_THAT(worker_err_, ::testing::Not(HasSubstr("stale")));
}

TEST_F(WorkerFaultTest, NetworkCutLongerThanTheLeaseMakesOneNewAttemptAndLateReportsAreStale) {
  int64_t victim = RunWithFault(Fault::kLongCut, 2 * kLeaseSeconds);
  ASSERT_GT(victim, 0);
  ExpectOneNewAttemptAndStaleRejection(victim);
}

// A preemption notice (SIGTERM to the worker) that lands just as the trial's command ends by
// itself, before the worker's next tick (0.2 s) sees it: the trial signals its own worker as its
// last act and exits within a millisecond. Runs one trial with one local worker; the first
// attempt exits `first_exit`, a later one reports loss=1. Returns the trial's results entry and
// sets *events to the run's event log.
nlohmann::json RunWithLateNotice(const std::string& name, int first_exit, std::string* events) {
  const std::string dir = MakeTempDir(name);
  WriteFile(dir + "/trial.sh", absl::StrCat(R"SH(#!/bin/sh
if mkdir ")SH",
                                            dir, R"SH(/first" 2>/dev/null; then
  echo "step=1 loss=7"
  kill -TERM $PPID
  exit )SH",
                                            first_exit, R"SH(
fi
echo "step=1 loss=1"
)SH"));
  WriteFile(dir + "/exp.yaml", R"(name: late-notice
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 2, max_trials: 1, max_concurrent: 1}
trial:
  command: [sh, trial.sh]
)");
  auto run = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--workers",
                         "1", "--lease-timeout", "3s", "--heartbeat", "0.5s"},
                        60);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  *events = RunProcess({kSextant, "events", dir + "/run"}).out;
  auto r = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object() || j["trials"].size() != 1u) {
    ADD_FAILURE() << r.out;
    return {};
  }
  return j["trials"][0];
}

// A trial that finished: its attempt is reported, not dropped. Before, the worker exited without
// a word and the trial sat RUNNING until its lease lapsed, then ran again.
TEST(WorkerNoticeTest, ANoticeJustAfterTheCommandEndedStillReportsTheAttempt) {
  std::string events;
  nlohmann::json t = RunWithLateNotice("late-notice", 0, &events);
  EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
  EXPECT_THAT(events, ::testing::Not(HasSubstr("\"kind\":\"lease_expired\""))) << events;
  // Unless the worker's tick fell inside the millisecond between the signal and the exit (the
  // attempt is then handed back as preempted and runs again), the first attempt is the result.
  if (t["preemptions"] == 0) {
    EXPECT_EQ(t["attempts"], 1) << t.dump();
    EXPECT_EQ(t["value"], 7.0) << t.dump();
  }
}

// The notice reached the trial as well (as Slurm's `scancel --full --signal=TERM` does): it
// saved its checkpoint and exited 75 before the worker's tick. The attempt is handed back as
// preempted at once, not failed, and not left to lapse.
TEST(WorkerNoticeTest, ATrialThatAnswersTheNoticeItselfIsHandedBackAsPreempted) {
  std::string events;
  nlohmann::json t = RunWithLateNotice("late-notice-75", 75, &events);
  EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
  EXPECT_EQ(t["preemptions"], 1) << t.dump();
  EXPECT_EQ(t["attempts"], 2) << t.dump();
  EXPECT_EQ(t["value"], 1.0) << t.dump();
  EXPECT_THAT(events, HasSubstr("\"kind\":\"trial_preempted\"")) << events;
  EXPECT_THAT(events, ::testing::Not(HasSubstr("\"kind\":\"lease_expired\""))) << events;
}

}  // namespace
}  // namespace sextant
