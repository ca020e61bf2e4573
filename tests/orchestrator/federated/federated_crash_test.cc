// Crash safety of a federated run with real processes: the orchestrator of a 2-region run is
// SIGKILLed at seeded random moments (alone, or with its whole process group as a machine crash
// would take its aggregators and clients too), and `sextant resume` continues after the last
// committed round each time. Nothing listed is lost or changed, no round is done twice, the
// numbering has no gaps, and the final checkpoint holds the model of the last round.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/checkpoint.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/run_dir.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"
#include "worker/federated/federated_job.h"
#include "worker/federated/local_trainer.h"
#include "worker/train/dataset.h"

extern char** environ;

namespace sextant {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WaitFor;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
constexpr int kRounds = 40;
constexpr int kKills = 20;

// `sextant` in a process group of its own (which its aggregators and clients join), with
// stdout and stderr to one file.
class Orchestrator {
 public:
  Orchestrator(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, &attr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
  }
  ~Orchestrator() {
    if (pid_ > 0 && !exited_) {
      kill(-pid_, SIGKILL);
      Wait(30);
    }
  }
  bool ok() const { return pid_ > 0; }
  std::string output() const { return ReadFile(log_); }
  void KillGroup() { kill(-pid_, SIGKILL); }
  void KillAlone() { kill(pid_, SIGKILL); }
  // The exit code, -N for signal N, or -1000 on timeout.
  int Wait(double seconds) {
    int status = 0;
    if (!exited_ && WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, seconds)) {
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    return code_;
  }
  // The live (not zombie) processes of the group, as "pid cmdline" lines.
  std::string GroupMembers() const {
    std::string out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string stat = ReadFile(e.path().string() + "/stat");
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream fields(stat.substr(close + 2));
      char state = 0;
      long ppid = 0, pgrp = 0;
      if (!(fields >> state >> ppid >> pgrp) || pgrp != pid_ || state == 'Z') continue;
      std::string cmd = ReadFile(e.path().string() + "/cmdline");
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      absl::StrAppend(&out, e.path().filename().string(), " ", std::string(1, state), " ", cmd,
                      "\n");
    }
    return out;
  }
  // Whether a live (not zombie) process of the group is still there.
  bool GroupAlive() const { return !GroupMembers().empty(); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1000;
};

using RowKey = std::pair<int64_t, std::string>;  // (round, region)
using Rows = std::map<RowKey, RoundRow>;

Rows LoadRows(const std::string& run_dir) {
  Rows out;
  auto table = RoundsTable::Open(RunDir::DbPath(run_dir));
  EXPECT_TRUE(table.ok()) << table.status();
  if (!table.ok()) return out;
  auto rows = table->Load();
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return out;
  for (const RoundRow& r : *rows) out[{r.round, r.region}] = r;
  return out;
}

int64_t LastGlobalRound(const Rows& rows) {
  int64_t last = 0;
  for (const auto& [key, row] : rows) {
    if (key.second.empty()) last = std::max(last, key.first);
  }
  return last;
}

// Global rounds 1..last each with one row per region that took part; an error message or "".
std::string Contiguity(const Rows& rows, const std::vector<std::string>& regions) {
  const int64_t last = LastGlobalRound(rows);
  for (int64_t r = 1; r <= last; ++r) {
    if (!rows.count({r, ""})) return absl::StrCat("round ", r, " is missing before ", last);
    for (const std::string& region : regions) {
      if (!rows.count({r, region})) return absl::StrCat("round ", r, " lacks region ", region);
    }
  }
  for (const auto& [key, row] : rows) {
    if (key.first < 1 || key.first > last) return absl::StrCat("stray round ", key.first);
  }
  return "";
}

bool SameRow(const RoundRow& a, const RoundRow& b) {
  return std::tie(a.round, a.region, a.accuracy, a.loss, a.clients, a.rejected, a.epsilon,
                  a.time) ==
         std::tie(b.round, b.region, b.accuracy, b.loss, b.clients, b.rejected, b.epsilon, b.time);
}

std::string Experiment() {
  return absl::StrCat(R"(name: fl-crash
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "8"}}
federation:
  regions: [{name: east, clients: 1}, {name: west, clients: 1}]
  rounds: )",
                      kRounds, R"(
  local_lr: 0.05
  min_clients: 2
  round_deadline: 120s
  seed: 7
  examples_per_client: 1500
  validation_examples: 500
  secure_aggregation: false
)");
}

TEST(FederatedCrashTest, TwentySigkillsKeepEveryListedRoundAndEndWithTheLastRoundsModel) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists(train::kFashionMnistDir), "no Fashion-MNIST");
  const std::string dir = MakeTempDir("fl-crash");
  WriteFile(dir + "/exp.yaml", Experiment());
  const std::string run_dir = dir + "/run";
  const std::vector<std::string> regions = {"east", "west"};
  std::mt19937 rng(20241129);
  std::vector<Rows> snapshots;
  std::vector<std::string> outputs;
  int group_kills = 0;
  bool finished = false;
  for (int kill = 0; kill < kKills && !finished; ++kill) {
    std::vector<std::string> argv =
        kill == 0
            ? std::vector<std::string>{kSextant, "run", dir + "/exp.yaml", "--run-dir", run_dir}
            : std::vector<std::string>{kSextant, "resume", run_dir};
    const Rows before = kill == 0 ? Rows{} : LoadRows(run_dir);
    Orchestrator run(argv, absl::StrCat(dir, "/out-", kill, ".txt"));
    ASSERT_TRUE(run.ok());
    ASSERT_TRUE(
        WaitFor([&] { return run.output().find("federated run") != std::string::npos; }, 120))
        << run.output();
    // A quarter of the kills land while the participants start; the rest once this life has
    // committed a round, at a random point of the round that follows. A delay ends early when
    // another round is listed, so that a life advances at most two rounds however fast the
    // machine runs them (20 lives then stay inside the 40 rounds).
    const int64_t from = LastGlobalRound(before);
    auto sleep_within_round = [&](int ms, int64_t after) {
      const absl::Time until = absl::Now() + absl::Milliseconds(ms);
      while (absl::Now() < until && LastGlobalRound(LoadRows(run_dir)) <= after) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    };
    if (rng() % 4 == 0) {
      sleep_within_round(static_cast<int>(rng() % 1500), from);
    } else {
      WaitFor([&] { return LastGlobalRound(LoadRows(run_dir)) > from; }, 120);
      sleep_within_round(static_cast<int>(rng() % 200), LastGlobalRound(LoadRows(run_dir)));
    }
    const bool whole_group = rng() % 2 == 0;
    if (whole_group) {
      run.KillGroup();
      ++group_kills;
    } else {
      run.KillAlone();  // its aggregators and clients follow it (parent-death signal)
    }
    const int rc = run.Wait(60);
    outputs.push_back(run.output());
    if (rc == 0) {
      finished = true;  // it ended before the kill landed
      break;
    }
    ASSERT_EQ(rc, -SIGKILL) << outputs.back();
    EXPECT_TRUE(WaitFor([&] { return !run.GroupAlive(); }, 30))
        << "participants outlived kill " << kill << (whole_group ? " (group)" : " (alone)") << ":\n"
        << run.GroupMembers();
    snapshots.push_back(LoadRows(run_dir));
    EXPECT_EQ(Contiguity(snapshots.back(), regions), "") << "after kill " << kill;
  }
  ASSERT_GE(snapshots.size(), 10u) << "the run ended before most kills";
  const int64_t listed_at_last_kill = LastGlobalRound(snapshots.back());
  EXPECT_LT(listed_at_last_kill, kRounds) << "every kill should land in a running federation";
  Orchestrator last({kSextant, "resume", run_dir}, dir + "/out-final.txt");
  ASSERT_EQ(last.Wait(300), 0) << last.output();
  outputs.push_back(last.output());

  // Each resume continued from the last committed round: never before a listed round (which
  // would do it twice) and never past the next one.
  for (size_t life = 1; life < outputs.size(); ++life) {
    std::smatch m;
    if (!std::regex_search(outputs[life], m, std::regex("resuming after round (\\d+)"))) {
      EXPECT_EQ(LastGlobalRound(snapshots[life - 1]), 0) << outputs[life];
      continue;
    }
    const int64_t resumed = std::stoll(m[1]);
    const int64_t listed = LastGlobalRound(snapshots[life - 1]);
    EXPECT_TRUE(resumed == listed || resumed == listed + 1)
        << "life " << life << " resumed after " << resumed << " with " << listed << " listed";
    for (int64_t r = 1; r <= resumed; ++r) {
      EXPECT_EQ(outputs[life].find(absl::StrCat("round=", r, " ")), std::string::npos)
          << "round " << r << " was done again in life " << life;
    }
  }

  // The final table: rounds 1..kRounds, each once per tier, every row of every snapshot intact.
  const Rows final_rows = LoadRows(run_dir);
  EXPECT_EQ(Contiguity(final_rows, regions), "");
  EXPECT_EQ(LastGlobalRound(final_rows), kRounds);
  EXPECT_EQ(final_rows.size(), static_cast<size_t>(kRounds * (1 + regions.size())));
  for (size_t k = 0; k < snapshots.size(); ++k) {
    for (const auto& [key, row] : snapshots[k]) {
      auto it = final_rows.find(key);
      ASSERT_NE(it, final_rows.end())
          << "kill " << k << ": round " << key.first << " region '" << key.second << "' was lost";
      EXPECT_TRUE(SameRow(it->second, row))
          << "kill " << k << ": round " << key.first << " region '" << key.second
          << "' changed: accuracy " << row.accuracy << " -> " << it->second.accuracy << ", time "
          << row.time << " -> " << it->second.time;
    }
  }
  for (int64_t r = 1; r <= kRounds; ++r) {
    EXPECT_EQ(final_rows.at({r, ""}).clients, 2) << "round " << r;
  }

  // The final checkpoint is round kRounds, and its model is the one the last row measured.
  auto ck = LoadLatestCheckpoint(run_dir + "/artifacts/checkpoints/federation");
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->step, kRounds);
  EXPECT_TRUE(ck->skipped.empty());
  auto job = FederatedJobFromSpec(testing::SpecFromYaml(Experiment()));
  ASSERT_TRUE(job.ok()) << job.status();
  auto evaluator = LocalTrainer::Create(job->model, job->seed, 2);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  std::vector<float> weights(static_cast<size_t>((*evaluator)->size()));
  ByteReader reader(ck->payload);
  auto round = reader.I64();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(*round, kRounds);
  ASSERT_TRUE(reader.Floats(weights.data(), static_cast<int64_t>(weights.size())).ok());
  auto data = train::LoadFashionMnist(job->dataset_dir, job->validation_examples, job->seed);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE((*evaluator)->SetWeights(weights).ok());
  auto eval = (*evaluator)->Evaluate(data->validation);
  ASSERT_TRUE(eval.ok()) << eval.status();
  const RoundRow& final_global = final_rows.at({kRounds, ""});
  EXPECT_DOUBLE_EQ(eval->accuracy, final_global.accuracy);
  EXPECT_NEAR(eval->loss, final_global.loss, 1e-4);
  EXPECT_GT(final_global.accuracy, 0.5);  // it learned (chance is 0.1)

  auto results = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), 1u);
  EXPECT_EQ(j["trials"][0]["state"], "COMPLETED");
  EXPECT_NEAR(j["trials"][0]["value"].get<double>(), final_global.accuracy, 1e-9);
  RecordProperty("kills", static_cast<int>(snapshots.size()));
  RecordProperty("group_kills", group_kills);
  std::cout << "kills=" << snapshots.size() << " group_kills=" << group_kills
            << " listed_at_last_kill=" << listed_at_last_kill << "\n";
}

}  // namespace
}  // namespace sextant
