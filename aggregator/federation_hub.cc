#include "aggregator/federation_hub.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sextant {

std::vector<SenderReport> MergeBySender(const std::vector<SenderReport>& senders) {
  std::map<std::string, SenderReport> by_id;
  for (const SenderReport& s : senders) {
    auto [it, fresh] = by_id.try_emplace(s.client_id, s);
    if (fresh) continue;
    SenderReport& m = it->second;
    const double w = m.weight + s.weight, e = m.metrics.eval_weight + s.metrics.eval_weight;
    if (w > 0) {
      m.metrics.train_loss =
          (m.metrics.train_loss * m.weight + s.metrics.train_loss * s.weight) / w;
    }
    if (e > 0) {
      m.metrics.eval_loss = (m.metrics.eval_loss * m.metrics.eval_weight +
                             s.metrics.eval_loss * s.metrics.eval_weight) /
                            e;
      m.metrics.eval_accuracy = (m.metrics.eval_accuracy * m.metrics.eval_weight +
                                 s.metrics.eval_accuracy * s.metrics.eval_weight) /
                                e;
    }
    m.metrics.eval_weight = e;
    m.weight = w;
    m.count += s.count;
    m.rejected += s.rejected;
  }
  std::vector<SenderReport> out;
  for (auto& [id, s] : by_id) out.push_back(std::move(s));
  return out;
}

namespace {
// Contacts are kept for WaitForContact; a sender naming ever new ids cannot grow them past this.
constexpr size_t kMaxContacts = 1 << 16;

// What a caller of a stopping tier hears: ask again (its replacement answers).
absl::Status StoppingStatus() {
  return absl::UnavailableError("this aggregator is stopping; its replacement takes over here");
}

// Reads floats [offset, offset + out.size()) of the native float32 file at path. DataLoss when
// it cannot be opened or is short.
absl::Status ReadFloats(const std::string& path, int64_t offset, absl::Span<float> out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(path, ": ", std::strerror(errno)));
  const size_t want = out.size() * sizeof(float);
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::pread(fd, reinterpret_cast<char*>(out.data()) + got, want - got,
                        offset * static_cast<int64_t>(sizeof(float)) + got);
    if (n <= 0) break;
    got += n;
  }
  ::close(fd);
  if (got != want) return absl::DataLossError(absl::StrCat(path, " is shorter than the model"));
  return absl::OkStatus();
}

}  // namespace

FederationHub::FederationHub(RoundCoordinator coordinator, Clock* clock,
                             absl::Duration stall_timeout, double min_floats_per_second,
                             VersionStarts starts)
    : clock_(clock),
      coordinator_(std::move(coordinator)),
      experiment_id_(coordinator_.experiment_id()),
      starts_(std::move(starts)),
      lease_(stall_timeout, min_floats_per_second) {}

absl::Status FederationHub::Publish(int64_t round, const std::string& model_path,
                                    std::map<std::string, RoundTask> tasks, double deadline_seconds,
                                    int64_t min_updates) {
  if (tasks.empty()) return absl::InvalidArgumentError("a round needs participants");
  std::vector<std::string> participants;
  for (auto& [id, task] : tasks) {
    participants.push_back(id);
    task.kind = RoundTask::Kind::kTrain;
    task.round = round;
  }
  absl::MutexLock lock(&mu_);
  coordinator_.SetCloseRule(deadline_seconds, min_updates);
  if (absl::Status s = coordinator_.OpenRound(round, std::move(participants)); !s.ok()) return s;
  round_ = round;
  published_at_ = clock_->Now();
  starts_.Published(round, published_at_);
  model_path_ = model_path;
  tasks_ = std::move(tasks);
  model_size_ = tasks_.begin()->second.model_size;
  if (!coordinator_.buffered()) {
    lease_.Release();  // an update still streaming for the old round lost its buffer with it
    senders_.clear();
  }
  failed_this_round_.clear();
  notifier_.Notify();
  return absl::OkStatus();
}

absl::Status FederationHub::RecordFailure(const std::string& experiment_id, int64_t round,
                                          const std::string& reporter, const std::string& failed,
                                          const std::string& error) {
  absl::MutexLock lock(&mu_);
  if (experiment_id != experiment_id_) {
    return absl::AbortedError("another experiment is served here");
  }
  if (round != round_ || done_) {
    return absl::AbortedError(absl::StrCat("round ", round, " is not open (open: ", round_, ")"));
  }
  if (failed != reporter) {
    // A region relays its own client's failure: news only; the region still pushes or fails.
    auto task = tasks_.find(reporter);
    if (task == tasks_.end() ||
        std::find(task->second.participants.begin(), task->second.participants.end(), failed) ==
            task->second.participants.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(failed, " is not a client of ", reporter, " in round ", round));
    }
  } else if (tasks_.count(reporter) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(reporter, " is not a participant of round ", round));
  } else if (!coordinator_.buffered()) {
    SEXTANT_RETURN_IF_ERROR(coordinator_.MarkFailed(reporter));
  }
  if (!failed_this_round_.insert(failed).second) return absl::OkStatus();  // said already
  if (failures_.size() >= kMaxPendingFailures) {
    return absl::ResourceExhaustedError("too many failure reports wait to be read");
  }
  failures_.push_back(FailureReport{round, reporter, failed, error});
  notifier_.Notify();
  return absl::OkStatus();
}

std::vector<FailureReport> FederationHub::TakeFailures() {
  absl::MutexLock lock(&mu_);
  std::vector<FailureReport> out;
  out.swap(failures_);
  return out;
}

RoundProgress FederationHub::Progress() {
  absl::MutexLock lock(&mu_);
  RoundProgress p;
  p.round = round_;
  if (!coordinator_.round_open()) return p;
  p.participants = static_cast<int64_t>(coordinator_.participants().size());
  p.delivered = static_cast<int64_t>(coordinator_.gate().accepted());
  p.failed = coordinator_.failed_count();
  p.count = coordinator_.accepted_count();
  p.deadline_passed = coordinator_.DeadlinePassed();
  return p;
}

std::vector<std::string> FederationHub::FailedParticipants() {
  absl::MutexLock lock(&mu_);
  if (!coordinator_.round_open()) return {};
  return coordinator_.failed();
}

std::vector<int64_t> FederationHub::RoundSegments() {
  absl::MutexLock lock(&mu_);
  return tasks_.empty() ? std::vector<int64_t>() : tasks_.begin()->second.segments;
}

void FederationHub::SetDone() {
  absl::MutexLock lock(&mu_);
  done_ = true;
  notifier_.Notify();
}

void FederationHub::SetStopping() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  notifier_.Notify();
}

absl::StatusOr<RoundTask> FederationHub::WaitForRound(const std::string& experiment_id,
                                                      const std::string& client_id,
                                                      int64_t after_round, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  if (experiment_id != experiment_id_) {
    return absl::AbortedError(
        absl::StrCat("experiment '", experiment_id, "', this is '", experiment_id_, "'"));
  }
  if (contacted_.size() < kMaxContacts && contacted_.insert(client_id).second)
    notifier_.cv().SignalAll();
  const absl::Time deadline = clock_->Now() + wait;
  // Buffered: a version's places (VersionStarts) are drawn among the clients asking for it.
  if (tasks_.count(client_id)) starts_.Ask(client_id, after_round);
  while (true) {
    if (stopping_ && !done_) return StoppingStatus();
    if (done_) {
      if (contacted_.count(client_id) && heard_done_.insert(client_id).second)
        notifier_.cv().SignalAll();
      RoundTask done;
      done.kind = RoundTask::Kind::kDone;
      return done;
    }
    if (round_ > after_round && coordinator_.round_open()) {
      auto it = tasks_.find(client_id);
      // One that failed this round (a replacement asking in its place) waits for the next.
      const bool failed = !coordinator_.buffered() && failed_this_round_.count(client_id) > 0;
      if (it != tasks_.end() && !failed && starts_.Admit(client_id, round_, clock_->Now())) {
        return it->second;
      }
    }
    if (clock_->WaitUntil(notifier_.cv(), mu_, deadline)) return RoundTask{};
  }
}

absl::Status FederationHub::ReadModel(int64_t round, int64_t offset, absl::Span<float> out) {
  std::string path;
  {
    absl::MutexLock lock(&mu_);
    if (round != round_) {
      return absl::UnavailableError(
          absl::StrCat("round ", round, " was replaced by ", round_, "; ask again"));
    }
    path = model_path_;
  }
  return ReadFloats(path, offset, out);
}

absl::Status FederationHub::Begin(const UpdateHeader& header, size_t total_size, int64_t count,
                                  absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = clock_->Now() + wait;
  while (true) {
    if (done_) return absl::UnavailableError("the experiment has ended");
    if (stopping_) return StoppingStatus();
    absl::Status s = coordinator_.Begin(header, total_size, count);
    if (s.ok()) lease_.Grant(header.client_id, total_size, clock_->Now());
    if (!absl::IsUnavailable(s)) return s;
    const absl::Time now = clock_->Now();
    if (lease_.Expired(now)) {
      // The holder stalled, or trickles: cut it off so that one slow sender cannot hold the
      // round.
      coordinator_.Abandon(lease_.holder());
      lease_.CutOff();
      continue;
    }
    // Wake up now and then to look at the holder's progress.
    clock_->WaitUntil(notifier_.cv(), mu_, std::min(deadline, now + absl::Milliseconds(100)));
    if (clock_->Now() >= deadline) return s;
  }
}

absl::Status FederationHub::AddChunk(const std::string& client_id, size_t offset,
                                     absl::Span<const float> v) {
  absl::MutexLock lock(&mu_);
  if (lease_.holder() != client_id) return lease_.CutOffError(client_id);
  absl::Status s = coordinator_.AddChunk(client_id, offset, v);
  lease_.Touch(clock_->Now());
  if (!s.ok()) {
    lease_.Release();
    notifier_.Notify();  // the staging buffer is free again
  }
  return s;
}

absl::Time FederationHub::published_at() {
  absl::MutexLock lock(&mu_);
  return published_at_;
}

absl::Status FederationHub::Finish(const std::string& client_id, double weight, int64_t count,
                                   const SenderMetrics& metrics, int64_t rejected,
                                   std::vector<std::pair<std::string, double>> client_seconds) {
  absl::MutexLock lock(&mu_);
  if (lease_.holder() != client_id) return lease_.CutOffError(client_id);
  lease_.Release();
  absl::Status s = coordinator_.Finish(client_id, metrics);
  if (s.ok()) {
    senders_.push_back({client_id, weight, count, metrics, rejected,
                        absl::ToDoubleSeconds(clock_->Now() - published_at_),
                        std::move(client_seconds)});
  }
  notifier_.Notify();
  return s;
}

bool FederationHub::done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

void FederationHub::Abandon(const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  if (lease_.holder() != client_id) return;  // cut off already; the buffer is someone else's
  lease_.Release();
  coordinator_.Abandon(client_id);
  notifier_.Notify();
}

bool FederationHub::WaitUntilAllHeardDone(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = clock_->Now() + wait;
  while (heard_done_.size() < contacted_.size()) {
    if (clock_->WaitUntil(notifier_.cv(), mu_, until) && heard_done_.size() < contacted_.size()) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> FederationHub::WaitForContact(const std::vector<std::string>& ids,
                                                       absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = clock_->Now() + wait;
  std::vector<std::string> missing;
  while (true) {
    missing.clear();
    for (const std::string& id : ids) {
      if (!contacted_.contains(id)) missing.push_back(id);
    }
    if (missing.empty() || clock_->Now() >= until) return missing;
    clock_->WaitUntil(notifier_.cv(), mu_, until);
  }
}

void FederationHub::RestartDeadline() {
  absl::MutexLock lock(&mu_);
  coordinator_.RestartDeadline();
}

bool FederationHub::WaitReadyToClose(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  // The round's own deadline passes on the same clock, so wake at it (or every 20 ms).
  const absl::Time until = clock_->Now() + wait;
  while (!coordinator_.ReadyToClose()) {
    if (clock_->Now() >= until) return false;
    clock_->WaitUntil(notifier_.cv(), mu_, std::min(until, clock_->Now() + absl::Milliseconds(20)));
  }
  return true;
}

absl::StatusOr<RoundOutcome> FederationHub::Close(std::vector<SenderReport>* senders) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<RoundOutcome> out = coordinator_.Close();
  if (out.ok() && senders != nullptr) *senders = senders_;
  if (out.ok() && coordinator_.buffered()) senders_.clear();  // the next buffer's
  notifier_.Notify();
  return out;
}

void FederationHub::ResumeBuffering() {
  absl::MutexLock lock(&mu_);
  coordinator_.ResumeBuffering();
  notifier_.Notify();
}

void FederationHub::ReleaseOutcome() {
  absl::MutexLock lock(&mu_);
  coordinator_.ReleaseOutcome();
}

int64_t FederationHub::total_rejections() {
  absl::MutexLock lock(&mu_);
  return coordinator_.total_rejections();
}

int64_t FederationHub::stalled_senders() {
  absl::MutexLock lock(&mu_);
  return lease_.cut_off();
}

int64_t FederationHub::rejections(const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  return coordinator_.gate().rejections(client_id);
}

}  // namespace sextant
