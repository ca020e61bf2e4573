// A run directory against other local users and against links planted in it, through the real
// binaries: its folders are 0700 and its files 0600, a trial's env values are nowhere in it,
// and Sextant writes through no symbolic link in it.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;
using testing::BackgroundProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

constexpr char kSecret[] = "tok-5e7a91c2d4b8f063";

class RunDirSecurityTest : public ::testing::Test {
 protected:
  // Under /tmp and open to all (0755), so that for another user the run directory's own mode
  // is the only thing in the way (the build may sit under /root, which they cannot enter).
  void SetUp() override {
    char tmpl[] = "/tmp/sextant-rundir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    run_ = dir_ + "/run";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A search of `trials` trials whose script sleeps `sleep` seconds, then records the API_TOKEN
  // it was given in DIR/seen-<trial id> (outside the run directory) and prints it on stdout and
  // stderr. extra_env: more `env:` entries.
  void WriteExperiment(int trials, double sleep = 0, const std::string& extra_env = "") {
    WriteFile(dir_ + "/trial.sh",
              absl::StrCat("#!/bin/sh\nsleep ", sleep, "\nprintf '%s' \"$API_TOKEN\" > ", dir_,
                           "/seen-$SEXTANT_TRIAL_ID\n", "echo \"token is $API_TOKEN\"\n",
                           "echo \"token is $API_TOKEN\" >&2\necho loss=1\n"));
    WriteFile(dir_ + "/exp.yaml",
              absl::StrCat(R"(name: private
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 1, max_trials: )",
                           trials, R"(, max_concurrent: 1}
trial:
  command: [sh, )",
                           dir_, "/trial.sh]\n  env: {API_TOKEN: ", kSecret, extra_env, "}\n"));
  }

  testing::CommandOutput Run() {
    return RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run_});
  }

  // A file outside the run directory that a link in it points to, with an old mtime, so that
  // any write through the link shows in its content or its mtime.
  std::string Target() {
    const std::string target = dir_ + "/precious.txt";
    WriteFile(target, "precious\n");
    const fs::file_time_type old = fs::file_time_type::clock::now() - std::chrono::hours(24);
    fs::last_write_time(target, old);
    return target;
  }
  void ExpectUntouched(const std::string& target) {
    EXPECT_EQ(ReadFile(target), "precious\n");
    EXPECT_LT(fs::last_write_time(target),
              fs::file_time_type::clock::now() - std::chrono::hours(23));
  }
  void ReplaceWithLink(const std::string& entry, const std::string& target) {
    fs::remove(entry);
    fs::create_symlink(target, entry);
  }

  std::string dir_, run_;
};

// Every regular file under dir whose bytes hold needle.
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& needle) {
  std::vector<std::string> found;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << f.rdbuf();
    if (bytes.str().find(needle) != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

TEST_F(RunDirSecurityTest, FoldersAreOwnerOnlyAndFilesOwnerReadWrite) {
  WriteExperiment(2);
  auto r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int files = 0;
  EXPECT_EQ(fs::status(run_).permissions() & fs::perms::all, fs::perms::owner_all);
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(run_)) {
    const fs::perms p = e.symlink_status().permissions() & fs::perms::all;
    if (e.is_directory()) {
      EXPECT_EQ(p, fs::perms::owner_all) << e.path();
    } else {
      ++files;
      EXPECT_EQ(p, fs::perms::owner_read | fs::perms::owner_write) << e.path();
    }
  }
  // state.db, lock, the secrets, the worker's log and both trials' logs at least.
  EXPECT_GE(files, 8);
  EXPECT_TRUE(fs::exists(run_ + "/logs/trial-2.1.err"));
}

TEST_F(RunDirSecurityTest, AnotherUserCannotListOrReadTheRun) {
  SEXTANT_REQUIRE_COMPONENT(geteuid() == 0 && fs::exists("/usr/bin/setpriv"),
                            "needs root and setpriv to act as a second user");
  WriteExperiment(1);
  auto r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto as_nobody = [](std::vector<std::string> argv) {
    argv.insert(argv.begin(),
                {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
    return RunProcess(argv, 30);
  };
  // The control: a file beside the run that anyone may read is read, so what fails below fails
  // for the run directory's own modes.
  WriteFile(dir_ + "/public.txt", "public\n");
  ASSERT_EQ(::chmod((dir_ + "/public.txt").c_str(), 0644), 0);
  auto control = as_nobody({"/bin/cat", dir_ + "/public.txt"});
  ASSERT_EQ(control.exit_code, 0) << control.err;
  ASSERT_EQ(control.out, "public\n");
  for (const std::string& file :
       {run_ + "/state.db", run_ + "/logs/trial-1.1.err", run_ + "/logs/trial-1.1.out"}) {
    auto read = as_nobody({"/bin/cat", file});
    EXPECT_NE(read.exit_code, 0) << file;
    EXPECT_THAT(read.err, HasSubstr("Permission denied")) << file;
    EXPECT_EQ(read.out, "") << file;
  }
  for (const std::string& folder : {run_, run_ + "/logs"}) {
    auto list = as_nobody({"/bin/ls", folder});
    EXPECT_NE(list.exit_code, 0) << folder;
    EXPECT_THAT(list.err, HasSubstr("Permission denied")) << folder;
    EXPECT_EQ(list.out, "") << folder;
  }
}

TEST_F(RunDirSecurityTest, EnvValuesReachTheTrialButNoFileOfTheRunDirectory) {
  WriteExperiment(1, 0, ", PLAIN: visible-value");
  auto r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(dir_ + "/seen-1"), kSecret);
  // The trial printed it on both streams: its logs hold the mask instead.
  EXPECT_THAT(ReadFile(run_ + "/logs/trial-1.1.out"), HasSubstr("token is [REDACTED]"));
  EXPECT_THAT(ReadFile(run_ + "/logs/trial-1.1.err"), HasSubstr("token is [REDACTED]"));
  EXPECT_THAT(FilesHolding(run_, kSecret), ::testing::IsEmpty());
  // No value is kept, not only the secret-looking ones.
  EXPECT_THAT(FilesHolding(run_, "visible-value"), ::testing::IsEmpty());
  EXPECT_THAT(r.out + r.err, Not(HasSubstr(kSecret)));

  // A resume reads the values from the experiment file again: its new trial gets the secret,
  // and still nothing of the run directory holds it.
  auto resumed = RunProcess({kSextant, "resume", run_, "--max-trials", "2"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_EQ(ReadFile(dir_ + "/seen-2"), kSecret);
  EXPECT_THAT(FilesHolding(run_, kSecret), ::testing::IsEmpty());

  // An experiment file that no longer sets the variable: the resume says which, and runs nothing.
  std::string yaml = ReadFile(dir_ + "/exp.yaml");
  yaml.replace(yaml.find("API_TOKEN"), 9, "OTHER_X");
  WriteFile(dir_ + "/exp.yaml", yaml);
  auto lost = RunProcess({kSextant, "resume", run_, "--max-trials", "3"});
  EXPECT_EQ(lost.exit_code, 2) << lost.out << lost.err;
  EXPECT_THAT(lost.err, HasSubstr("no longer sets trial env API_TOKEN"));
  EXPECT_FALSE(fs::exists(dir_ + "/seen-3"));
}

TEST_F(RunDirSecurityTest, ResumeAndOfflineTellRefuseALockThatIsALink) {
  WriteExperiment(1);
  auto r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string target = Target();
  ReplaceWithLink(run_ + "/lock", target);
  auto resumed = RunProcess({kSextant, "resume", run_});
  EXPECT_EQ(resumed.exit_code, 2) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr(run_ + "/lock is a symbolic link"));
  ExpectUntouched(target);
  // A tell that would be refused anyway (this run serves no ask/tell) touches nothing either.
  auto told = RunProcess({kSextant, "tell", run_, "1", "--value", "1"});
  EXPECT_EQ(told.exit_code, 2) << told.out << told.err;
  EXPECT_THAT(told.err, HasSubstr(run_ + "/lock is a symbolic link"));
  ExpectUntouched(target);
  EXPECT_TRUE(fs::is_symlink(run_ + "/lock"));
}

TEST_F(RunDirSecurityTest, ResumeRefusesALogThatIsALink) {
  WriteExperiment(1);
  auto r = Run();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string target = Target();
  ReplaceWithLink(run_ + "/logs/trial-1.1.err", target);
  auto resumed = RunProcess({kSextant, "resume", run_, "--max-trials", "2"});
  EXPECT_EQ(resumed.exit_code, 2) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.err, HasSubstr(run_ + "/logs/trial-1.1.err is a symbolic link"));
  ExpectUntouched(target);
  EXPECT_FALSE(fs::exists(dir_ + "/seen-2"));
}

TEST_F(RunDirSecurityTest, ATrialLogLinkedDuringTheRunIsNotWrittenThrough) {
  // Trial 1 sleeps long enough for the links of trial 2's logs to be in place before it starts.
  WriteExperiment(2, 2);
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run_});
  ASSERT_TRUE(run.WaitForOutput("listening on", 30)) << run.err();
  const std::string target = Target();
  ReplaceWithLink(run_ + "/logs/trial-2.1.out", target);
  ReplaceWithLink(run_ + "/logs/trial-2.1.err", target);
  run.Wait(60);
  ExpectUntouched(target);
  auto results = RunProcess({kSextant, "results", run_, "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  EXPECT_THAT(results.out,
              HasSubstr("trial-2.1.out is a symbolic link; refusing to write through"));
  // Trial 1 was not disturbed.
  EXPECT_EQ(ReadFile(dir_ + "/seen-1"), kSecret);
}

}  // namespace
}  // namespace sextant
