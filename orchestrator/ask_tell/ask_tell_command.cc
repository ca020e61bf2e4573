#include "orchestrator/ask_tell/ask_tell_command.h"

#include <chrono>
#include <filesystem>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "orchestrator/ask_tell/ask_tell.h"
#include "orchestrator/ask_tell/run_address.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/warm_start.h"
#include "rpc/channel_credentials.h"
#include "rpc/status_conversion.h"
#include "sextant/v1/trial_service.grpc.pb.h"

namespace sextant {
namespace {

// How long to wait for a run directory held by another `sextant ask`/`tell` (it lets go within
// one call) or by a run that has not yet written its address.
constexpr double kLockWaitSeconds = 10;
// The deadline of a call to a live run beyond its long-poll.
constexpr double kCallSeconds = 30;

// The four operations, live or offline.
class Session {
 public:
  virtual ~Session() = default;
  virtual const std::string& run_id() const = 0;
  virtual absl::StatusOr<v1::AskResponse> Ask(const v1::AskRequest& r) = 0;
  virtual absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& r) = 0;
  virtual absl::StatusOr<v1::TellResponse> Tell(const v1::TellRequest& r) = 0;
  // The experiment's fidelity key ("" without one).
  virtual std::string fidelity_key() const = 0;
};

// Over the gRPC TrialService of a live run.
class LiveSession final : public Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Dial(const std::string& dir,
                                                       const RunAddress& a) {
    SEXTANT_ASSIGN_OR_RETURN(auto credentials,
                             LoadChannelCredentials(a.tls_dir, "worker", a.secret_file));
    std::unique_ptr<LiveSession> s(new LiveSession);
    s->run_id_ = a.run_id;
    // The experiment, from the store (readers need no lock), for its fidelity key.
    SEXTANT_ASSIGN_OR_RETURN(auto store,
                             Store::Open(RunDir::DbPath(dir), false, /*read_only=*/true));
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> spec, store->GetMeta("spec"));
    v1::ExperimentSpec parsed;
    if (spec && parsed.ParseFromString(*spec)) s->fidelity_key_ = parsed.search().fidelity().name();
    s->stub_ = v1::TrialService::NewStub(grpc::CreateChannel(a.address, credentials));
    return std::unique_ptr<Session>(std::move(s));
  }
  const std::string& run_id() const override { return run_id_; }
  std::string fidelity_key() const override { return fidelity_key_; }

  absl::StatusOr<v1::AskResponse> Ask(const v1::AskRequest& r) override {
    return Call(r, r.wait_seconds(), &v1::TrialService::Stub::Ask);
  }
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& r) override {
    return Call(r, 0, &v1::TrialService::Stub::ReportStep);
  }
  absl::StatusOr<v1::TellResponse> Tell(const v1::TellRequest& r) override {
    return Call(r, 0, &v1::TrialService::Stub::Tell);
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(const Request& request, double wait,
                                grpc::Status (v1::TrialService::Stub::*method)(grpc::ClientContext*,
                                                                               const Request&,
                                                                               Response*)) {
    grpc::ClientContext context;
    context.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>((wait + kCallSeconds) * 1000)));
    Response response;
    grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  std::string run_id_;
  std::string fidelity_key_;
  std::unique_ptr<v1::TrialService::Stub> stub_;
};

// On a run directory that no process holds: the run is loaded, one operation done and
// committed, and the directory let go.
class OfflineSession final : public Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Open(RunDir dir, Clock* clock) {
    std::unique_ptr<OfflineSession> s(new OfflineSession(std::move(dir)));
    SEXTANT_RETURN_IF_ERROR(s->Load(clock));
    return std::unique_ptr<Session>(std::move(s));
  }
  ~OfflineSession() override {
    // No process serves the run: it keeps the state it had, unless this call finished it.
    if (dispatcher_ == nullptr) return;
    if (dispatcher_->Finished()) {
      (void)dispatcher_->MarkRunState(v1::RUN_COMPLETED);
    } else if (state_ != v1::RUN_STATE_UNSPECIFIED) {
      (void)store_->SetRunState(state_);
    }
  }
  const std::string& run_id() const override { return core_->run_id(); }
  std::string fidelity_key() const override { return spec_.search().fidelity().name(); }
  absl::StatusOr<v1::AskResponse> Ask(const v1::AskRequest& r) override {
    return core_->Ask(r, "");
  }
  absl::StatusOr<v1::ReportStepResponse> ReportStep(const v1::ReportStepRequest& r) override {
    return core_->ReportStep(r, "");
  }
  absl::StatusOr<v1::TellResponse> Tell(const v1::TellRequest& r) override {
    return core_->Tell(r, "");
  }

 private:
  explicit OfflineSession(RunDir dir) : dir_(std::move(dir)) {}

  absl::Status Load(Clock* clock) {
    SEXTANT_ASSIGN_OR_RETURN(store_, Store::Open(dir_.db_path(), /*create=*/false));
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> spec, store_->GetMeta("spec"));
    if (!spec || !spec_.ParseFromString(*spec)) {
      return absl::InvalidArgumentError(absl::StrCat(dir_.path(), " holds no experiment"));
    }
    if (spec_.search().mode() != v1::Search::ASK_TELL) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir_.path(), " is not an ask/tell run (its experiment has no search.mode: ask_tell)"));
    }
    SEXTANT_ASSIGN_OR_RETURN(state_, store_->GetRunState());
    SEXTANT_ASSIGN_OR_RETURN(
        auto sampler, MakeRunSampler(spec_, store_.get(),
                                     absl::ToDoubleSeconds(clock->Now() - absl::UnixEpoch())));
    DispatcherOptions options;
    options.lease_seconds = AskTellLeaseSeconds(spec_);
    options.logs_dir = std::filesystem::absolute(dir_.logs_dir()).string();
    options.checkpoints_dir = std::filesystem::absolute(dir_.checkpoints_dir()).string();
    options.quiet_load = true;
    SEXTANT_ASSIGN_OR_RETURN(options.held_leases, LoadHeldLeases(*store_));
    SEXTANT_ASSIGN_OR_RETURN(
        dispatcher_, Dispatcher::Create(spec_, store_.get(), std::move(sampler), clock, options,
                                        MakeScheduler(spec_)));
    SEXTANT_ASSIGN_OR_RETURN(core_, AskTell::Create(dispatcher_.get(), store_.get(), clock));
    return absl::OkStatus();
  }

  RunDir dir_;
  v1::ExperimentSpec spec_;
  v1::RunState state_ = v1::RUN_STATE_UNSPECIFIED;  // the run's state before this call
  std::unique_ptr<Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<AskTell> core_;
};

// The exit code for a refusal: 2 when the caller's input is at fault.
int ExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange:
      return 2;
    default:
      return 1;
  }
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << "sextant: " << s.message() << "\n";
  return ExitCode(s);
}

// The live run that holds dir, or the directory itself when none does.
absl::StatusOr<std::unique_ptr<Session>> OpenSession(const std::string& dir, Clock* clock) {
  if (!std::filesystem::exists(RunDir::DbPath(dir))) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " is not a Sextant run directory (no state.db)"));
  }
  const absl::Time give_up = clock->Now() + absl::Seconds(kLockWaitSeconds);
  while (true) {
    absl::StatusOr<RunDir> held = RunDir::Acquire(dir);
    if (held.ok()) return OfflineSession::Open(*std::move(held), clock);
    if (held.status().code() != absl::StatusCode::kFailedPrecondition) return held.status();
    absl::StatusOr<RunAddress> address = ReadRunAddress(dir);
    if (address.ok()) return LiveSession::Dial(dir, *address);
    if (clock->Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          held.status().message(), ", and it serves no ask/tell (no ", RunAddressPath(dir), ")"));
    }
    clock->SleepFor(absl::Milliseconds(50));
  }
}

nlohmann::json ParamJson(const v1::ParamValue& p) {
  switch (p.kind_case()) {
    case v1::ParamValue::kNumber:
      return p.number();
    case v1::ParamValue::kInteger:
      return p.integer();
    case v1::ParamValue::kCategory:
      return p.category();
    default:
      return nullptr;
  }
}

const char* ActionWord(v1::TrialAction action) {
  switch (action) {
    case v1::ACTION_CONTINUE:
      return "continue";
    case v1::ACTION_STOP:
      return "stop";
    case v1::ACTION_NOTICE:
      return "notice";  // the run winds down: save a checkpoint and tell
    default:
      return "pause";  // a rung reached: save a checkpoint and tell
  }
}

absl::StatusOr<double> ParseNumber(absl::string_view text, absl::string_view what) {
  double v = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &v)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "' is not a number"));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> ParseMetricList(const std::string& text) {
  std::map<std::string, double> out;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    absl::string_view name = absl::StripAsciiWhitespace(kv.first);
    if (name.empty() || entry.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics entry '", entry, "' is not NAME=VALUE"));
    }
    SEXTANT_ASSIGN_OR_RETURN(out[std::string(name)],
                             ParseNumber(kv.second, absl::StrCat("--metrics ", name)));
  }
  return out;
}

absl::StatusOr<std::vector<double>> ParseValueList(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    SEXTANT_ASSIGN_OR_RETURN(double v, ParseNumber(entry, "--values entry"));
    out.push_back(v);
  }
  return out;
}

int RunAskCommand(const AskOptions& options, std::ostream& out, std::ostream& err, Clock* clock) {
  if (options.count < 1 || options.count > kMaxAskCount) {
    err << "sextant: --n must be 1 to " << kMaxAskCount << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Session>> session = OpenSession(options.run_dir, clock);
  if (!session.ok()) return Fail(err, session.status());
  v1::AskRequest request;
  request.set_count(options.count);
  request.set_wait_seconds(options.wait_seconds);
  absl::StatusOr<v1::AskResponse> response = (*session)->Ask(request);
  if (!response.ok()) return Fail(err, response.status());
  for (const v1::AskedTrial& t : response->trials()) {
    nlohmann::json params = nlohmann::json::object();
    for (const auto& [name, value] : t.params()) params[name] = ParamJson(value);
    nlohmann::json line = {{"trial", t.trial_id()}, {"attempt", t.attempt()},
                           {"params", params},      {"checkpoint_dir", t.checkpoint_dir()},
                           {"resume", t.resume()},  {"lease_seconds", t.lease_seconds()},
                           {"run_id", t.run_id()}};
    if (t.fidelity_target() > 0) line["fidelity_target"] = t.fidelity_target();
    if (!t.fidelity_key().empty()) line["fidelity_key"] = t.fidelity_key();
    out << line.dump() << "\n";
  }
  if (response->done()) {
    err << "sextant: the search in " << options.run_dir
        << " has ended; no trial will come (for room to ask more: sextant resume "
        << options.run_dir << " --max-trials N)\n";
  } else if (!response->waiting().empty()) {
    err << "sextant: " << absl::StrReplaceAll(response->waiting(), {{"RUN_DIR", options.run_dir}})
        << "\n";
    return 1;
  } else if (response->trials_size() == 0) {
    err << "sextant: no trial can start now (search.max_concurrent trials are asked and not yet "
           "told)\n";
    return 1;
  }
  return 0;
}

int RunTellCommand(const TellOptions& options, std::ostream& out, std::ostream& err, Clock* clock) {
  const std::string trial = absl::StrCat("trial ", options.trial);
  const int given = (options.value ? 1 : 0) + (options.values.empty() ? 0 : 1) +
                    (options.state.empty() ? 0 : 1) + (options.step ? 1 : 0);
  // --metrics alone is a completed tell by metric names; the run checks they name every
  // objective.
  if (given > 1 || (given == 0 && options.metrics.empty())) {
    err << "sextant: tell " << options.trial
        << " takes one of --value V, --values V1,V2, --metrics NAME=V,..., --state "
           "pruned|failed, --step S\n";
    return 2;
  }
  if (options.step && options.metrics.empty()) {
    err << "sextant: " << trial << ": --step needs --metrics NAME=VALUE,...\n";
    return 2;
  }
  if (!options.state.empty() && options.state != "pruned" && options.state != "failed") {
    err << "sextant: " << trial << ": --state must be pruned or failed, not '" << options.state
        << "'\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Session>> session = OpenSession(options.run_dir, clock);
  if (!session.ok()) return Fail(err, session.status());
  Session& s = **session;
  if (options.step) {
    v1::ReportStepRequest request;
    request.set_run_id(s.run_id());
    request.set_trial_id(options.trial);
    request.set_attempt(options.attempt);
    for (const auto& [k, v] : options.metrics) (*request.mutable_metrics())[k] = v;
    // The step marks the fidelity (unless the metrics name it themselves).
    std::string key = s.fidelity_key();
    if (key.empty()) key = "step";
    if (!request.metrics().contains(key)) (*request.mutable_metrics())[key] = *options.step;
    absl::StatusOr<v1::ReportStepResponse> r = s.ReportStep(request);
    if (!r.ok()) return Fail(err, r.status());
    out << ActionWord(r->action()) << "\n";
    return 0;
  }
  v1::TellRequest request;
  request.set_run_id(s.run_id());
  request.set_trial_id(options.trial);
  request.set_attempt(options.attempt);
  for (const auto& [k, v] : options.metrics) (*request.mutable_metrics())[k] = v;
  if (options.value) request.add_values(*options.value);
  for (double v : options.values) request.add_values(v);
  request.set_outcome(options.state == "pruned"   ? v1::TellRequest::PRUNED
                      : options.state == "failed" ? v1::TellRequest::FAILED
                                                  : v1::TellRequest::COMPLETED);
  request.set_error(options.error);
  absl::StatusOr<v1::TellResponse> r = s.Tell(request);
  if (!r.ok()) return Fail(err, r.status());
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [k, v] : r->metrics()) values[k] = v;
  out << nlohmann::json{{"trial", options.trial},
                        {"attempt", r->attempt()},
                        {"state", v1::TrialState_Name(r->state())},
                        {"already_told", r->already_told()},
                        {"values", values}}
             .dump()
      << "\n";
  return 0;
}

int RunTellCommandLine(const TellFlags& flags, std::ostream& out, std::ostream& err, Clock* clock) {
  TellOptions options;
  options.run_dir = flags.run_dir;
  auto bad = [&](absl::string_view why) {
    err << "sextant: tell " << flags.trial << ": " << why << "\n";
    return 2;
  };
  if (!absl::SimpleAtoi(flags.trial, &options.trial) || options.trial < 1) {
    return bad("TRIAL must be a trial id (1, 2, ...)");
  }
  if (!flags.attempt.empty() &&
      (!absl::SimpleAtoi(flags.attempt, &options.attempt) || options.attempt < 1)) {
    return bad("--attempt must be a positive integer");
  }
  if (!flags.value.empty()) {
    absl::StatusOr<double> v = ParseNumber(flags.value, "--value");
    if (!v.ok()) return bad(v.status().message());
    options.value = *v;
  }
  if (!flags.values.empty()) {
    absl::StatusOr<std::vector<double>> v = ParseValueList(flags.values);
    if (!v.ok()) return bad(v.status().message());
    options.values = *std::move(v);
  }
  if (!flags.metrics.empty()) {
    absl::StatusOr<std::map<std::string, double>> m = ParseMetricList(flags.metrics);
    if (!m.ok()) return bad(m.status().message());
    options.metrics = *std::move(m);
  }
  if (!flags.step.empty()) {
    absl::StatusOr<double> v = ParseNumber(flags.step, "--step");
    if (!v.ok()) return bad(v.status().message());
    options.step = *v;
  }
  options.state = flags.state;
  options.error = flags.error;
  return RunTellCommand(options, out, err, clock);
}

}  // namespace sextant
