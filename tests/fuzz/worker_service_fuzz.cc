// Fuzz target: the WorkerService's handling of every request it receives (Register, Lease,
// Heartbeat, Report, Complete), through the logic the gRPC adapter calls (the Redactor, then the
// Dispatcher over a real SQLite store, in memory), with no network. A fresh run per input, with
// either no scheduler or ASHA (tag of the first record & 0x40). Records (internal/records.h),
// by tag & 7: 0 Register, 1 Lease, 2 Heartbeat, 3 Report, 4 Complete (the bytes are the request
// proto; tag & 0x80 sets the ids to the live worker's lease so that deeper paths are reached),
// 5 advances the fake clock by tag >> 3 seconds and ticks (lease expiry), 6 and 7 register and
// lease legitimately.
// Invariants: every answer is OK or a caller's error (Aborted, NotFound, FailedPrecondition,
// InvalidArgument): anything else would stop the orchestrator, so a worker must not be able to
// cause it; and no secret survives redaction.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/redactor.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/strategy_factory.h"
#include "tests/fuzz/internal/records.h"

namespace {

using sextant::v1::Measurement;

constexpr char kSecret[] = "s3cr3t-token-value";

const char* kPlain = R"(
name: fuzz
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
  k: {type: categorical, values: [a, b]}
search: {sampler: random, seed: 3, max_trials: 4, max_concurrent: 2}
trial:
  command: [echo, "x=${x}"]
  max_restarts: 1
)";

const char* kAsha = R"(
name: fuzz-asha
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}
  seed: 3
  max_trials: 6
  max_concurrent: 3
trial:
  command: [echo, "x=${x}"]
)";

const sextant::v1::ExperimentSpec& Spec(bool asha) {
  static const sextant::v1::ExperimentSpec* specs[2] = {nullptr, nullptr};
  const sextant::v1::ExperimentSpec*& s = specs[asha ? 1 : 0];
  if (s == nullptr) {
    sextant::LoadResult r = sextant::LoadExperimentFromString(asha ? kAsha : kPlain, "fuzz.yaml");
    if (!r.errors.empty()) abort();
    s = new sextant::v1::ExperimentSpec(r.spec);
  }
  return *s;
}

// What a worker may cause: its own request refused. Anything else stops the orchestrator.
void CheckCallerError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
      return;
    default:
      fprintf(stderr, "worker request caused %s\n", s.ToString().c_str());
      abort();
  }
}

std::string Redact(const sextant::Redactor& r, const std::string& text) {
  std::string out = r.Apply(text);
  if (out.find(kSecret) != std::string::npos) abort();
  return out;
}

struct Run {
  sextant::FakeClock clock;
  std::unique_ptr<sextant::Store> store;
  std::unique_ptr<sextant::Dispatcher> dispatcher;
  sextant::Redactor redactor{{{"HF_TOKEN", kSecret}}};
  int64_t worker = 0;
  int64_t trial = 0;
  int32_t attempt = 0;

  void Lease(int64_t worker_id) {
    auto r = dispatcher->Lease(worker_id);
    CheckCallerError(r.status());
    if (r.ok() && r->has_assignment()) {
      worker = worker_id;
      trial = r->assignment().trial_id();
      attempt = r->assignment().attempt();
    }
  }

  void PatchMeasurements(google::protobuf::RepeatedPtrField<Measurement>* ms, bool patch) {
    for (Measurement& m : *ms) {
      if (patch) {
        m.set_trial_id(trial);
        m.set_attempt(attempt);
      }
      if (!m.event().empty()) m.set_event(Redact(redactor, m.event()));
    }
  }

  void Handle(uint8_t tag, const std::string& bytes);
};

void Run::Handle(uint8_t tag, const std::string& bytes) {
  const bool patch = (tag & 0x80) != 0;
  switch (tag & 7) {
    case 0: {
      sextant::v1::RegisterRequest req;
      if (!req.ParseFromString(bytes)) return;
      CheckCallerError(dispatcher->Register(req).status());
      return;
    }
    case 1: {
      sextant::v1::LeaseRequest req;
      if (!req.ParseFromString(bytes)) return;
      Lease(patch ? worker : req.worker_id());
      return;
    }
    case 2: {
      sextant::v1::HeartbeatRequest req;
      if (!req.ParseFromString(bytes)) return;
      if (patch) {
        req.set_worker_id(worker);
        req.set_trial_id(trial);
        req.set_attempt(attempt);
      }
      CheckCallerError(dispatcher->Heartbeat(req).status());
      return;
    }
    case 3: {
      sextant::v1::ReportRequest req;
      if (!req.ParseFromString(bytes)) return;
      if (patch) req.set_worker_id(worker);
      PatchMeasurements(req.mutable_measurements(), patch);
      CheckCallerError(dispatcher->Report(req).status());
      return;
    }
    case 4: {
      sextant::v1::CompleteRequest req;
      if (!req.ParseFromString(bytes)) return;
      if (patch) {
        req.set_worker_id(worker);
        req.set_trial_id(trial);
        req.set_attempt(attempt);
      }
      req.set_error(Redact(redactor, req.error()));
      PatchMeasurements(req.mutable_measurements(), patch);
      auto r = dispatcher->Complete(req);
      CheckCallerError(r.status());
      if (r.ok() && r->next().has_assignment()) {
        trial = r->next().assignment().trial_id();
        attempt = r->next().assignment().attempt();
      }
      return;
    }
    case 5:
      clock.Advance(absl::Seconds(tag >> 3));
      CheckCallerError(dispatcher->Tick().status());
      return;
    default: {
      sextant::v1::RegisterRequest req;
      req.set_protocol_version(sextant::v1::PROTOCOL_VERSION_CURRENT);
      req.set_region("local");
      auto r = dispatcher->Register(req);
      CheckCallerError(r.status());
      if (r.ok()) Lease(r->worker_id());
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<sextant::fuzz::Record> records = sextant::fuzz::SplitRecords(data, size, 32);
  const bool asha = !records.empty() && (records[0].tag & 0x40) != 0;
  const sextant::v1::ExperimentSpec& spec = Spec(asha);
  Run run;
  auto store = sextant::Store::Open(":memory:", true);
  if (!store.ok()) abort();
  run.store = *std::move(store);
  sextant::DispatcherOptions options;
  options.lease_seconds = 10;
  auto d = sextant::Dispatcher::Create(spec, run.store.get(),
                                       sextant::NewRandomSampler(sextant::ToSearchSpace(spec), 3),
                                       &run.clock, options, sextant::MakeScheduler(spec));
  if (!d.ok()) abort();
  run.dispatcher = *std::move(d);
  run.Handle(6, "");  // a live worker with a lease, for the records that patch their ids in
  for (const sextant::fuzz::Record& r : records) run.Handle(r.tag, r.bytes);
  return 0;
}
