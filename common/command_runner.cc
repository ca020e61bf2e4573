#include "common/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/metric_parser.h"

extern char** environ;

namespace sextant {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::nanoseconds;

constexpr size_t kReadChunkBytes = 64 * 1024;
// How long descendants may hold the output pipes open after the command itself has exited.
constexpr nanoseconds kOrphanGrace = std::chrono::seconds(1);
// Without a pidfd, a command that closed its pipes is polled for exit at most this often.
constexpr nanoseconds kMaxReapBackoff = std::chrono::milliseconds(50);
// Caps a single wait when nothing else bounds it, so timers are re-checked regularly.
constexpr nanoseconds kMaxWait = std::chrono::milliseconds(100);

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // close() is not retried on EINTR: on Linux the descriptor is gone either way.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Moves fd above 0..2 so that dup2-ing the pipes onto stdout/stderr in the child cannot clobber
// one with the other when the worker itself runs with closed stdio.
Fd AboveStdio(int fd) {
  if (fd > 2) return Fd(fd);
  Fd low(fd);
  return Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
}

// Capture files are best effort once open: a full disk must not fail the trial.
void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

absl::StatusOr<Fd> OpenCapture(const std::string& path) {
  if (path.empty()) return Fd();
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == ELOOP) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture file ", path, " is a symbolic link; refusing to write through it"));
  }
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open capture file ", path));
  return Fd(fd);
}

Fd OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return Fd();
#endif
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat(sig);
}

// The inherited environment with spec.env laid over it, as an envp array. Inherited entries are
// referenced, not copied, since this runs once per trial.
class Environment {
 public:
  explicit Environment(const std::map<std::string, std::string>& overrides) {
    for (const auto& [key, value] : overrides) owned_.push_back(absl::StrCat(key, "=", value));
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      if (!IsOverridden(*entry, overrides)) pointers_.push_back(*entry);
    }
    for (std::string& entry : owned_) pointers_.push_back(entry.data());
    pointers_.push_back(nullptr);
  }
  char* const* envp() { return pointers_.data(); }

 private:
  static bool IsOverridden(std::string_view entry,
                           const std::map<std::string, std::string>& overrides) {
    std::string_view key = entry.substr(0, entry.find('='));
    for (const auto& [name, value] : overrides) {
      if (name == key) return true;
    }
    return false;
  }

  std::vector<std::string> owned_;
  std::vector<char*> pointers_;
};

// posix_spawn's attribute and file-action objects, destroyed on scope exit.
struct SpawnSetup {
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
};

struct Child {
  pid_t pid = -1;
  Fd stdout_read;
  Fd stderr_read;
};

absl::Status SpawnError(int error, const std::string& name) {
  if (error == ENOENT) return absl::NotFoundError(absl::StrCat("command not found: ", name));
  return absl::FailedPreconditionError(
      absl::StrCat("cannot run ", name, ": ", std::strerror(error)));
}

absl::Status CheckWorkingDir(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("working directory ", dir, ": ", std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("not a directory: ", dir));
  }
  return absl::OkStatus();
}

// Starts the command in its own process group with stdin from /dev/null, stdout and stderr on
// fresh pipes, and default signal dispositions and an empty mask, so that a worker that ignores
// SIGPIPE (as gRPC servers do) does not pass that on. The error message is the one-line reason.
absl::StatusOr<Child> Spawn(const CommandSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return absl::InvalidArgumentError("empty command");
  if (absl::Status dir = CheckWorkingDir(spec.working_dir); !dir.ok()) return dir;
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return SpawnError(errno, spec.argv[0]);
  Fd out_read = AboveStdio(out[0]), out_write = AboveStdio(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return SpawnError(errno, spec.argv[0]);
  Fd err_read = AboveStdio(err[0]), err_write = AboveStdio(err[1]);
  if (!out_read.valid() || !out_write.valid() || !err_read.valid() || !err_write.valid()) {
    return SpawnError(EMFILE, spec.argv[0]);
  }

  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err_write.get(), 2);
  if (!spec.working_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&setup.actions, spec.working_dir.c_str());
  }
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setsigdefault(&setup.attr, &all);

  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  Environment env(spec.env);
  Child child;
  int rc =
      ::posix_spawnp(&child.pid, argv[0], &setup.actions, &setup.attr, argv.data(), env.envp());
  if (rc != 0) return SpawnError(rc, spec.argv[0]);
  child.stdout_read = std::move(out_read);
  child.stderr_read = std::move(err_read);
  return child;
}

// Splits a byte stream into lines, cutting any line at max_bytes so that memory stays bounded
// however long a line is; the rest of a cut line is dropped up to its newline.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_bytes) : max_bytes_(max_bytes) {}

  template <typename OnLine>
  void Feed(std::string_view data, OnLine&& on_line) {
    while (!data.empty()) {
      size_t newline = data.find('\n');
      Append(data.substr(0, newline));
      if (newline == std::string_view::npos) return;
      on_line(std::string_view(line_));
      line_.clear();
      cut_ = false;
      data.remove_prefix(newline + 1);
    }
  }

  // Emits a final line that had no newline.
  template <typename OnLine>
  void Finish(OnLine&& on_line) {
    if (!line_.empty()) on_line(std::string_view(line_));
    line_.clear();
    cut_ = false;
  }

  int64_t long_lines() const { return long_lines_; }

 private:
  void Append(std::string_view part) {
    if (cut_) return;
    size_t room = max_bytes_ - line_.size();
    if (part.size() > room) {
      part = part.substr(0, room);
      cut_ = true;
      ++long_lines_;
    }
    line_.append(part);
  }

  size_t max_bytes_;
  std::string line_;
  bool cut_ = false;
  int64_t long_lines_ = 0;
};

// One run of one command: the spawned child, its pipes and the timers that govern it.
class CommandRun {
 public:
  CommandRun(const CommandSpec& spec, CommandObserver* observer, Clock* clock)
      : spec_(spec),
        observer_(observer),
        clock_(clock != nullptr ? clock : RealClockInstance()),
        tick_(std::max<nanoseconds>(ToNanos(spec.tick_seconds), std::chrono::milliseconds(1))),
        lines_(spec.max_line_bytes),
        buffer_(kReadChunkBytes),
        out_(&spec.redact),
        err_(&spec.redact) {}

  absl::StatusOr<CommandResult> Run();

 private:
  struct Stream {
    explicit Stream(const Redactor* redactor) : redact(redactor) {}
    Fd pipe;
    Fd capture;
    StreamRedactor redact;  // what goes to capture
  };

  static nanoseconds ToNanos(double seconds) {
    return absl::ToChronoNanoseconds(absl::Seconds(std::max(0.0, seconds)));
  }
  bool PipesOpen() const { return out_.pipe.valid() || err_.pipe.valid(); }
  bool Ticking() const { return !result_.stopped && !result_.timed_out; }
  double Elapsed() const { return absl::ToDoubleSeconds(clock_->Now() - start_); }

  void Loop();
  nanoseconds NextWait();
  void WaitAndRead(nanoseconds wait);
  void ReadStream(Stream& stream, bool is_stdout);
  void HandleLine(std::string_view line);
  void AppendStderrTail(std::string_view data);
  void Reap();
  void ServiceTimers();
  void RequestStop(absl::Time now, Steady::time_point real_now);
  void SignalGroup(int sig);
  void Finish();

  const CommandSpec& spec_;
  CommandObserver* observer_;
  Clock* clock_;
  const nanoseconds tick_;
  LineSplitter lines_;
  std::vector<char> buffer_;
  CommandResult result_;

  pid_t pid_ = -1;
  Fd pidfd_;
  Stream out_, err_;
  bool exited_ = false;
  bool have_status_ = false;
  int wait_status_ = 0;
  bool sigkill_sent_ = false;

  absl::Time start_;
  absl::Time timeout_at_ = absl::InfiniteFuture();
  // Stop grace runs on both clocks, so a frozen FakeClock cannot keep a stuck command alive.
  absl::Time kill_at_ = absl::InfiniteFuture();
  Steady::time_point kill_at_real_ = Steady::time_point::max();
  Steady::time_point next_tick_;
  Steady::time_point orphan_deadline_ = Steady::time_point::max();
  nanoseconds reap_backoff_ = std::chrono::microseconds(100);
};

absl::StatusOr<CommandResult> CommandRun::Run() {
  absl::StatusOr<Fd> out_capture = OpenCapture(spec_.stdout_path);
  if (!out_capture.ok()) return out_capture.status();
  absl::StatusOr<Fd> err_capture = OpenCapture(spec_.stderr_path);
  if (!err_capture.ok()) return err_capture.status();
  out_.capture = *std::move(out_capture);
  err_.capture = *std::move(err_capture);

  start_ = clock_->Now();
  absl::StatusOr<Child> child = Spawn(spec_);
  if (!child.ok()) {
    result_.spawn_failed = true;
    result_.exit_code = 127;
    result_.error = std::string(child.status().message());
    return std::move(result_);
  }
  pid_ = child->pid;
  out_.pipe = std::move(child->stdout_read);
  err_.pipe = std::move(child->stderr_read);
  pidfd_ = OpenPidFd(pid_);
  if (observer_ != nullptr) observer_->OnStarted(pid_);
  if (spec_.timeout_seconds > 0) timeout_at_ = start_ + absl::Seconds(spec_.timeout_seconds);
  next_tick_ = Steady::now() + tick_;

  Loop();
  Finish();
  return std::move(result_);
}

void CommandRun::Loop() {
  while (!exited_ || PipesOpen()) {
    WaitAndRead(NextWait());
    Reap();
    ServiceTimers();
  }
}

// The real time until the next timer is due. Clock-based deadlines are converted as if the
// clock ran at real speed; with a FakeClock the tick keeps the wait short, so advancing the
// clock from another thread is noticed within a tick.
nanoseconds CommandRun::NextWait() {
  Steady::time_point real_now = Steady::now();
  absl::Time now = clock_->Now();
  nanoseconds wait = Ticking() ? next_tick_ - real_now : kMaxWait;
  if (!exited_ && Ticking()) wait = std::min(wait, absl::ToChronoNanoseconds(timeout_at_ - now));
  if (result_.stopped && !sigkill_sent_) {
    wait = std::min({wait, kill_at_real_ - real_now, absl::ToChronoNanoseconds(kill_at_ - now)});
  }
  if (exited_) wait = std::min(wait, orphan_deadline_ - real_now);
  if (!exited_ && !pidfd_.valid() && !PipesOpen()) {
    wait = std::min(wait, reap_backoff_);
    reap_backoff_ = std::min(reap_backoff_ * 2, kMaxReapBackoff);
  }
  return std::clamp(wait, nanoseconds(0), kMaxWait * 10);
}

void CommandRun::WaitAndRead(nanoseconds wait) {
  pollfd fds[3];
  Stream* streams[3] = {nullptr, nullptr, nullptr};
  nfds_t count = 0;
  for (Stream* stream : {&out_, &err_}) {
    if (!stream->pipe.valid()) continue;
    streams[count] = stream;
    fds[count++] = {stream->pipe.get(), POLLIN, 0};
  }
  if (pidfd_.valid() && !exited_) fds[count++] = {pidfd_.get(), POLLIN, 0};

  timespec timeout;
  timeout.tv_sec = static_cast<time_t>(wait.count() / 1'000'000'000);
  timeout.tv_nsec = static_cast<long>(wait.count() % 1'000'000'000);
  // EINTR and timeouts need nothing here: the caller's loop re-checks everything.
  if (::ppoll(fds, count, &timeout, nullptr) <= 0) return;
  for (nfds_t i = 0; i < count; ++i) {
    if (streams[i] == nullptr || fds[i].revents == 0) continue;
    ReadStream(*streams[i], streams[i] == &out_);
  }
}

void CommandRun::ReadStream(Stream& stream, bool is_stdout) {
  ssize_t n;
  do {
    n = ::read(stream.pipe.get(), buffer_.data(), buffer_.size());
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    stream.pipe.Reset();
    return;
  }
  std::string_view data(buffer_.data(), static_cast<size_t>(n));
  if (stream.capture.valid()) {
    const std::string safe = stream.redact.Feed(data);
    WriteAll(stream.capture.get(), safe.data(), safe.size());
  }
  if (is_stdout) {
    lines_.Feed(data, [this](std::string_view line) { HandleLine(line); });
  } else {
    AppendStderrTail(data);
  }
}

void CommandRun::HandleLine(std::string_view line) {
  if (EventLine event; ParseEventLine(line, &event)) {
    if (observer_ != nullptr) observer_->OnEvent(event.kind, event.message, Elapsed());
    return;
  }
  ParsedLine parsed = ParseMetricLine(line);
  result_.ignored_tokens += parsed.ignored_tokens;
  if (!parsed.metrics.empty() && observer_ != nullptr) {
    observer_->OnMetrics(parsed.metrics, Elapsed());
  }
}

// Trimming only when the tail reaches twice its size keeps this amortised O(bytes).
void CommandRun::AppendStderrTail(std::string_view data) {
  size_t keep = spec_.stderr_tail_bytes;
  if (keep == 0) return;
  if (data.size() > keep) data = data.substr(data.size() - keep);
  result_.stderr_tail.append(data);
  if (result_.stderr_tail.size() >= 2 * keep) {
    result_.stderr_tail.erase(0, result_.stderr_tail.size() - keep);
  }
}

void CommandRun::Reap() {
  if (exited_) return;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return;
  // r < 0 (ECHILD) means someone else reaped it, e.g. SIGCHLD is ignored; the status is lost.
  exited_ = true;
  have_status_ = r == pid_;
  wait_status_ = status;
  pidfd_.Reset();
  if (PipesOpen()) orphan_deadline_ = Steady::now() + kOrphanGrace;
}

void CommandRun::ServiceTimers() {
  Steady::time_point real_now = Steady::now();
  absl::Time now = clock_->Now();
  if (!exited_ && Ticking() && now >= timeout_at_) {
    result_.timed_out = true;
    SignalGroup(SIGKILL);
  }
  if (result_.stopped && !sigkill_sent_ && (now >= kill_at_ || real_now >= kill_at_real_)) {
    SignalGroup(SIGKILL);
  }
  if (exited_ && PipesOpen() && real_now >= orphan_deadline_) {
    // Descendants still hold the pipes after the command exited: kill them and stop listening.
    SignalGroup(SIGKILL);
    out_.pipe.Reset();
    err_.pipe.Reset();
  }
  if (Ticking() && real_now >= next_tick_) {
    next_tick_ = real_now + tick_;
    if (observer_ != nullptr && !observer_->OnTick()) RequestStop(now, real_now);
  }
}

void CommandRun::RequestStop(absl::Time now, Steady::time_point real_now) {
  result_.stopped = true;
  double grace = spec_.kill_grace_seconds;
  if (observer_ != nullptr && observer_->StopGraceSeconds() >= 0) {
    grace = observer_->StopGraceSeconds();
  }
  kill_at_ = now + absl::Seconds(std::max(0.0, grace));
  kill_at_real_ = real_now + ToNanos(grace);
  SignalGroup(SIGTERM);
}

// The group id is the child's pid (POSIX_SPAWN_SETPGROUP with 0), and stays reserved while any
// member lives, so this cannot hit an unrelated group while there is anything left to signal.
void CommandRun::SignalGroup(int sig) {
  if (sig == SIGKILL) sigkill_sent_ = true;
  ::killpg(pid_, sig);
}

void CommandRun::Finish() {
  lines_.Finish([this](std::string_view line) { HandleLine(line); });
  for (Stream* stream : {&out_, &err_}) {
    if (!stream->capture.valid()) continue;
    const std::string rest = stream->redact.Finish();
    WriteAll(stream->capture.get(), rest.data(), rest.size());
  }
  result_.long_lines = lines_.long_lines();
  size_t keep = spec_.stderr_tail_bytes;
  if (result_.stderr_tail.size() > keep) {
    result_.stderr_tail.erase(0, result_.stderr_tail.size() - keep);
  }

  if (!have_status_) {
    result_.exit_code = 255;
  } else if (WIFSIGNALED(wait_status_)) {
    result_.exit_code = -WTERMSIG(wait_status_);
  } else {
    result_.exit_code = WEXITSTATUS(wait_status_);
  }

  if (result_.timed_out) {
    result_.error = absl::StrCat("timed out after ", spec_.timeout_seconds, "s");
  } else if (result_.stopped) {
    result_.error = "stopped on request";
  } else if (!have_status_) {
    result_.error = "exit status lost (the process was reaped elsewhere)";
  } else if (result_.exit_code > 0) {
    result_.error = absl::StrCat("exited with status ", result_.exit_code);
  } else if (result_.exit_code < 0) {
    result_.error = absl::StrCat("killed by signal ", SignalName(-result_.exit_code));
  }
}

}  // namespace

absl::StatusOr<CommandResult> RunCommand(const CommandSpec& spec, CommandObserver* observer,
                                         Clock* clock) {
  return CommandRun(spec, observer, clock).Run();
}

}  // namespace sextant
