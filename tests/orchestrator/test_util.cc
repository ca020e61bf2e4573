#include "tests/orchestrator/test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"

extern char** environ;

namespace sextant::testing {

std::string MakeTempDir(const std::string& prefix) {
  std::string base = ::testing::TempDir() + "/sextant-" + prefix + "-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

std::string CheckpointingStepsScript(int steps, bool report_start) {
  // $d is the last step reported, the only one saved: a notice between a step's start and its
  // report must not save a step whose metrics never went out (its resumed attempt would start
  // past it, and the trial end one step short of its target).
  return absl::StrCat(R"SH(#!/bin/sh
ck="$SEXTANT_CHECKPOINT_DIR/step"
d=0
[ -f "$ck" ] && d=$(cat "$ck")
)SH",
                      report_start ? "echo \"resumed_from=$d\"\n" : "",
                      R"SH(trap 'echo "$d" > "$ck"; exit 75' TERM
while [ "$d" -lt )SH",
                      steps, R"SH( ]; do
  i=$((d + 1))
  echo "step=$i loss=$((100 - i))"
  d=$i
  echo "$d" > "$ck"
  sleep 0.3 & wait $!
done
)SH");
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

v1::ExperimentSpec SpecFromYaml(const std::string& yaml) {
  LoadResult r = LoadExperimentFromString(yaml, "test.yaml");
  for (const auto& e : r.errors) ADD_FAILURE() << e.ToString();
  return r.spec;
}

namespace {

int Spawn(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // A process group of its own, as a shell gives a job: SignalGroup reaches it and its children
  // as a terminal's Ctrl-C would.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "cannot spawn " << argv[0];
  return rc == 0 ? pid : -1;
}

int Decode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

bool WaitFor(const std::function<bool()>& cond, double timeout_seconds) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv) {
  std::string dir = MakeTempDir("proc");
  out_path_ = dir + "/out";
  err_path_ = dir + "/err";
  pid_ = Spawn(argv, out_path_, err_path_);
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && exit_code_ == -1000) {
    kill(pid_, SIGKILL);
    Wait(10);
  }
}

void BackgroundProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

void BackgroundProcess::SignalGroup(int sig) {
  if (pid_ > 0) kill(-pid_, sig);
}

int BackgroundProcess::Wait(double timeout_seconds) {
  if (exit_code_ != -1000 || pid_ <= 0) return exit_code_;
  int status = 0;
  bool done = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_seconds);
  if (done) exit_code_ = Decode(status);
  return exit_code_;
}

std::string BackgroundProcess::out() const { return ReadFile(out_path_); }
std::string BackgroundProcess::err() const { return ReadFile(err_path_); }

bool BackgroundProcess::WaitForOutput(const std::string& needle, double timeout_seconds) {
  return WaitFor([&] { return out().find(needle) != std::string::npos; }, timeout_seconds);
}

CommandOutput RunProcess(const std::vector<std::string>& argv, double timeout_seconds) {
  BackgroundProcess p(argv);
  CommandOutput result;
  result.exit_code = p.Wait(timeout_seconds);
  result.out = p.out();
  result.err = p.err();
  return result;
}

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

std::string HttpExchange(int port, const std::string& request) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

std::string HttpBody(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

std::vector<std::vector<std::string>> QueryRows(const std::string& db_path,
                                                const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 2000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        std::vector<std::string> row;
        for (int c = 0; c < sqlite3_column_count(st); ++c) {
          const unsigned char* t = sqlite3_column_text(st, c);
          row.push_back(t ? reinterpret_cast<const char*>(t) : "");
        }
        rows.push_back(row);
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return rows;
}

}  // namespace sextant::testing
