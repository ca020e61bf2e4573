#include "orchestrator/session/run_session.h"

#include <signal.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process_setup.h"
#include "common/status_macros.h"
#include "orchestrator/core/command_script.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/federated_trial_params.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/stored_spec.h"
#include "orchestrator/core/study_privacy.h"

namespace sextant {
namespace {

std::atomic<int> g_stop_signal{0};

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

// Marks RunSession::Open's error for an experiment file that did not load.
constexpr char kLoadErrorPayload[] = "sextant/load-error";

std::optional<std::string> TrialParamFromEnv(const std::string& name) {
  std::string var = "SEXTANT_PARAM_";
  for (char c : name) {
    var += std::isalnum(static_cast<unsigned char>(c)) ? absl::ascii_toupper(c) : '_';
  }
  const char* v = std::getenv(var.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunSession>> RunSession::Open(const RunOptions& options,
                                                             const RunEnv& env) {
  std::unique_ptr<RunSession> s(new RunSession(options, env));
  SEXTANT_RETURN_IF_ERROR(s->ReadExperiment());
  SEXTANT_RETURN_IF_ERROR(s->OpenStore());
  SEXTANT_RETURN_IF_ERROR(s->LoadSecurity());
  if (options.metrics_port >= 0) {
    // Every local user can reach the port: the page is served only with this run's token, kept
    // beside the run's other secrets for whoever needs the address again.
    SEXTANT_ASSIGN_OR_RETURN(
        std::string token,
        CreateSecretFile(std::filesystem::absolute(s->path_ + "/secrets").string(), "live-report"));
    SEXTANT_ASSIGN_OR_RETURN(s->monitor_, RunMonitor::Start(options.metrics_port, token, s->spec_,
                                                            s->path_, env.clock, *env.out));
  }
  return s;
}

RunSession::~RunSession() = default;

absl::Status RunSession::ReadExperiment() {
  if (options_.resume) {
    path_ = options_.run_dir;
    if (!std::filesystem::exists(RunDir::DbPath(path_))) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " is not a Sextant run directory (no state.db)"));
    }
    return absl::OkStatus();  // the spec is the stored one (OpenStore)
  }
  LoadResult loaded = LoadExperimentFile(options_.experiment_file);
  if (!loaded.ok()) {
    std::vector<std::string> lines;
    for (const LoadError& e : loaded.errors) lines.push_back(e.ToString());
    absl::Status s = absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
    s.SetPayload(kLoadErrorPayload, absl::Cord("1"));
    return s;
  }
  spec_ = std::move(loaded.spec);
  // What validate warns of, run says too, before it launches trials that would all fail.
  for (const std::string& w : MissingCommandScriptWarnings(spec_)) {
    *env_.err << options_.experiment_file << ": warning: " << w << "\n";
  }
  ApplyBudgetOverrides();
  SEXTANT_RETURN_IF_ERROR(CheckMaxEpsilonApplies());
  // Stored paths are absolute, so that `resume` from any directory finds the same files.
  const std::string wd = spec_.trial().working_dir().empty() ? "." : spec_.trial().working_dir();
  spec_.mutable_trial()->set_working_dir(std::filesystem::absolute(wd).lexically_normal().string());
  spec_.set_source_path(std::filesystem::absolute(spec_.source_path()).string());
  path_ = options_.run_dir.empty() ? "runs/" + spec_.name() : options_.run_dir;
  // One trial of a federated search runs with its parameters in the environment
  // (trial_command.h); a retried attempt continues the trial's own federated run.
  const char* trial = std::getenv("SEXTANT_FEDERATED_TRIAL");
  if (trial != nullptr && std::string(trial) == "1" && spec_.has_federation() &&
      spec_.parameters_size() > 0) {
    SEXTANT_RETURN_IF_ERROR(ApplyFederatedTrialParams(spec_, TrialParamFromEnv));
    options_.resume = std::filesystem::exists(RunDir::DbPath(path_));
    options_.federated_trial = true;
    // Rounds as the fidelity: this attempt runs to the scheduler's rung (a whole round).
    const char* rung = std::getenv("SEXTANT_FIDELITY");
    double target = 0;
    if (spec_.search().fidelity().name() == "rounds" && rung != nullptr &&
        absl::SimpleAtod(rung, &target) && target >= 1) {
      options_.pause_after_round = static_cast<int64_t>(std::ceil(target));
    }
  }
  return absl::OkStatus();
}

void RunSession::ApplyBudgetOverrides() {
  if (options_.max_cost) spec_.mutable_budget()->set_max_cost(*options_.max_cost);
  if (options_.max_wall_time_seconds) {
    spec_.mutable_budget()->set_max_wall_time_seconds(*options_.max_wall_time_seconds);
  }
  if (options_.max_epsilon) spec_.mutable_budget()->set_max_epsilon(*options_.max_epsilon);
}

absl::Status RunSession::CheckMaxEpsilonApplies() const {
  if (!options_.max_epsilon || (spec_.has_federation() && spec_.federation().has_dp() &&
                                spec_.parameters_size() > 0)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "--max-epsilon applies to a federated search with differential privacy (federation.dp and "
      "parameters: to tune)");
}

absl::Status RunSession::RaiseMaxTrials(int max_trials) {
  if (spec_.has_federation() && spec_.parameters_size() == 0) {
    return absl::InvalidArgumentError(
        "--max-trials applies to a search; a federated run has rounds (federation.rounds)");
  }
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> trials, store_->LoadTrials());
  if (max_trials < static_cast<int>(trials.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--max-trials ", max_trials, " is below the ",
                                                   trials.size(), " trials ", path_,
                                                   " already has"));
  }
  const int before = spec_.search().max_trials();
  spec_.mutable_search()->set_max_trials(max_trials);
  return store_->AddEvent(absl::ToUnixMicros(env_.clock->Now()) / 1e6, "max_trials", 0,
                          absl::StrCat("search.max_trials set from ", before, " to ", max_trials,
                                       " by resume --max-trials"));
}

absl::Status RunSession::OpenStore() {
  SEXTANT_ASSIGN_OR_RETURN(RunDir dir, RunDir::Acquire(path_));
  run_dir_ = std::make_unique<RunDir>(std::move(dir));
  const bool existed = std::filesystem::exists(run_dir_->db_path());
  SEXTANT_ASSIGN_OR_RETURN(store_, Store::Open(run_dir_->db_path(), /*create=*/true));
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> stored, store_->GetMeta("spec"));
  if (options_.resume) {
    // A federated trial's retry keeps the spec it has (the one its first attempt stored).
    if (spec_.name().empty()) {
      if (!stored || !spec_.ParseFromString(*stored)) {
        return absl::InvalidArgumentError(absl::StrCat(path_, " holds no experiment to resume"));
      }
      SEXTANT_RETURN_IF_ERROR(RestoreEnvValues(&spec_));
    }
    if (options_.max_trials) SEXTANT_RETURN_IF_ERROR(RaiseMaxTrials(*options_.max_trials));
    SEXTANT_RETURN_IF_ERROR(CheckMaxEpsilonApplies());
    if (options_.max_cost || options_.max_wall_time_seconds || options_.max_trials ||
        options_.max_epsilon) {
      ApplyBudgetOverrides();
      SEXTANT_RETURN_IF_ERROR(store_->PutMeta("spec", WithoutEnvValues(spec_).SerializeAsString()));
    }
    return absl::OkStatus();
  }
  if (existed && stored) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, " already holds a run; continue it with `sextant resume ", path_,
                     "` or pick another --run-dir"));
  }
  SEXTANT_RETURN_IF_ERROR(DrawStudyTrialsOnce());
  SEXTANT_RETURN_IF_ERROR(store_->PutMeta("spec", WithoutEnvValues(spec_).SerializeAsString()));
  return store_->PutTimeMeta("started_at", absl::ToUnixMicros(env_.clock->Now()) / 1e6);
}

absl::Status RunSession::DrawStudyTrialsOnce() {
  std::optional<RandomStopping> r = RandomStoppingOf(spec_);
  if (!r || spec_.parameters_size() == 0) return absl::OkStatus();
  const int64_t k = DrawStudyTrials(*r, spec_.search().seed());
  spec_.mutable_search()->set_max_trials(static_cast<int32_t>(std::min<int64_t>(k, std::numeric_limits<int32_t>::max())));
  SEXTANT_RETURN_IF_ERROR(store_->AddEvent(
      absl::ToUnixMicros(env_.clock->Now()) / 1e6, "random_stopping", 0,
      absl::StrCat("privacy.selection random_stopping drew ", k,
                   " trials (expected ", ExpectedTrials(*r),
                   "); only the best trial's model will be kept")));
  *env_.out << "sextant: random stopping drew " << k << " trials (expected "
            << ExpectedTrials(*r) << "); only the best trial's model will be kept\n";
  return absl::OkStatus();
}

absl::Status RunSession::LoadSecurity() {
  if (!options_.tls_dir.empty()) {
    tls_dir_ = std::filesystem::absolute(options_.tls_dir).string();
    absl::StatusOr<ServerSecurity> loaded = LoadServerSecurity(options_.tls_dir);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-dir: ", loaded.status().message()));
    }
    security_ = *std::move(loaded);
  } else {
    // Loopback: every call must carry this run's secret, which only this user can read.
    SEXTANT_ASSIGN_OR_RETURN(secrets_,
                             CreateRunSecrets(std::filesystem::absolute(path_ + "/secrets")));
    security_ = LoopbackSecurity(secrets_);
  }
  if (absl::Status s = CheckListenAllowed(options_.listen, security_); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  return absl::OkStatus();
}

std::string RunSession::worker_binary() const {
  if (!options_.worker_binary.empty()) return options_.worker_binary;
  return BinaryBesideThisOne("sextant-worker");
}

int RunSession::stop_signal() const { return g_stop_signal.load(); }

void RunSession::RequestStop(int sig) { g_stop_signal.store(sig); }

void InstallStopHandlers() { InstallSignalHandlers(OnStopSignal); }

bool IsLoadError(const absl::Status& status) {
  return status.GetPayload(kLoadErrorPayload).has_value();
}

int ExitCode(const absl::Status& status, std::ostream& err) {
  if (status.ok()) return 0;
  if (absl::IsCancelled(status)) return 130;
  if (IsLoadError(status)) {
    err << status.message() << "\n";
  } else {
    err << "sextant: " << status.message() << "\n";
  }
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

}  // namespace sextant
