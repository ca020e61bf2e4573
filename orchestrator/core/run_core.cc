#include "orchestrator/core/run_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sextant {

RunCore::RunCore(std::unique_ptr<Dispatcher> dispatcher, const Clock* clock, absl::Time start)
    : dispatcher_(std::move(dispatcher)),
      spec_(dispatcher_->spec()),
      clock_(clock),
      start_(start) {}

void RunCore::AttachPools(std::unique_ptr<Pools> pools) {
  absl::MutexLock lock(&mu_);
  pools_ = std::move(pools);
  pools_->Connect(*dispatcher_);
}

bool RunCore::has_pools() {
  absl::MutexLock lock(&mu_);
  return pools_ != nullptr;
}

absl::StatusOr<v1::RegisterResponse> RunCore::Register(const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Register(request);
}

absl::StatusOr<v1::LeaseResponse> RunCore::Lease(int64_t worker_id) {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Lease(worker_id);
}

absl::StatusOr<v1::TrialAction> RunCore::Heartbeat(const v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Heartbeat(request);
}

absl::StatusOr<v1::TrialAction> RunCore::Report(const v1::ReportRequest& request) {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Report(request);
}

absl::StatusOr<v1::CompleteResponse> RunCore::Complete(const v1::CompleteRequest& request) {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Complete(request);
}

std::vector<int64_t> RunCore::WorkerIds() {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> ids;
  for (const auto& [id, info] : dispatcher_->roster().workers()) ids.push_back(id);
  return ids;
}

absl::Status RunCore::ExpireLeases() {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Tick().status();
}

absl::StatusOr<PoolsRound> RunCore::RoundLocked() {
  SEXTANT_RETURN_IF_ERROR(dispatcher_->Tick().status());
  if (!pools_) return PoolsRound{};
  return pools_->Round(*dispatcher_);
}

absl::StatusOr<PoolsRound> RunCore::Round() {
  absl::MutexLock lock(&mu_);
  return RoundLocked();
}

absl::StatusOr<Ending> RunCore::Step(const std::function<absl::Status()>& after_round) {
  SEXTANT_ASSIGN_OR_RETURN(const PoolsRound r, Round());
  if (after_round) SEXTANT_RETURN_IF_ERROR(after_round());
  absl::MutexLock lock(&mu_);
  return VerdictLocked(r);
}

Ending RunCore::VerdictLocked(const PoolsRound& r) {
  if (std::optional<std::string> why = dispatcher_->FailureStop()) {
    return Ending{RunEnd::kFailed, *why, ""};
  }
  if (dispatcher_->Finished()) {
    if (dispatcher_->CreateLimited()) {
      return Ending{RunEnd::kEpsilonExhausted, "budget.max_epsilon allows no more trials", ""};
    }
    return Ending{RunEnd::kCompleted, "every trial finished", ""};
  }
  const double wall = spec_.budget().max_wall_time_seconds();
  if (wall > 0 && absl::ToDoubleSeconds(clock_->Now() - start_) + 1e-9 >= wall) {
    return Ending{RunEnd::kOutOfBudget, absl::StrCat("budget.max_wall_time reached (", wall, " s)"),
                  "--max-wall-time DURATION"};
  }
  if (r.exhausted) {
    return Ending{RunEnd::kOutOfBudget,
                  absl::StrCat("budget.max_cost reached (", spec_.budget().max_cost(), ")"),
                  "--max-cost AMOUNT"};
  }
  switch (r.stuck_on) {
    case StuckOn::kNone:
      break;
    case StuckOn::kBudget:
      return Ending{RunEnd::kOutOfBudget, absl::StrCat("budget.max_cost reached: ", r.stuck),
                    "--max-cost AMOUNT"};
    case StuckOn::kLaunchFailed:
      return Ending{RunEnd::kCannotRun, r.stuck, ""};
  }
  return Ending{};
}

absl::Status RunCore::BeginWindDown(const std::string& why) {
  absl::MutexLock lock(&mu_);
  dispatcher_->SetHold(true);
  SEXTANT_RETURN_IF_ERROR(dispatcher_->BeginStop(why));
  if (pools_) pools_->NoticeAll();
  return absl::OkStatus();
}

absl::Status RunCore::End(v1::RunState state, const std::string& why) {
  absl::MutexLock lock(&mu_);
  // The state is recorded even when cancelling failed (a store that refuses writes): the first
  // error is returned.
  absl::Status cancelled;
  if (state != v1::RUN_COMPLETED && state != v1::RUN_EPSILON_EXHAUSTED) {
    cancelled = dispatcher_->Interrupt();
  }
  absl::Status marked = dispatcher_->MarkRunState(state, why);
  return cancelled.ok() ? marked : cancelled;
}

void RunCore::TerminatePools() {
  absl::MutexLock lock(&mu_);
  if (pools_) pools_->TerminateAll();
}

int RunCore::ReapPools(bool force) {
  absl::MutexLock lock(&mu_);
  return pools_ ? pools_->Reap(force) : 0;
}

absl::Status RunCore::WritePoolCosts() {
  absl::MutexLock lock(&mu_);
  return pools_ ? pools_->WriteCosts() : absl::OkStatus();
}

DispatchStats RunCore::Stats() {
  absl::MutexLock lock(&mu_);
  DispatchStats s = dispatcher_->Stats();
  if (pools_) s.spend = pools_->committed();
  return s;
}

bool RunCore::Finished() {
  absl::MutexLock lock(&mu_);
  return dispatcher_->Finished();
}

int RunCore::running() {
  absl::MutexLock lock(&mu_);
  return dispatcher_->running();
}

int64_t RunCore::trial_count() {
  absl::MutexLock lock(&mu_);
  return dispatcher_->trials().size();
}

std::optional<TrialRow> RunCore::Trial(int64_t id) {
  absl::MutexLock lock(&mu_);
  const TrialRow* row = dispatcher_->trials().row(id);
  if (row == nullptr) return std::nullopt;
  return *row;
}

std::optional<std::pair<int, int>> RunCore::PoolWorkers() {
  absl::MutexLock lock(&mu_);
  if (!pools_) return std::nullopt;
  const std::set<int64_t> live = pools_->LiveWorkers();
  int busy = 0;
  for (const auto& [worker, trial] : dispatcher_->trials().RunningByWorker()) busy += live.count(worker);
  return std::pair<int, int>(static_cast<int>(live.size()), busy);
}

}  // namespace sextant
