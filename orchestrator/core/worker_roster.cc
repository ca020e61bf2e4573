#include "orchestrator/core/worker_roster.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/status_macros.h"

namespace sextant {

absl::Status CheckRegistration(const v1::ExperimentSpec& spec, const v1::RegisterRequest& request) {
  if (request.protocol_version() != v1::PROTOCOL_VERSION_CURRENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker speaks protocol version ", request.protocol_version(),
        " but this orchestrator speaks ", static_cast<int>(v1::PROTOCOL_VERSION_CURRENT),
        "; use matching sextant and sextant-worker binaries"));
  }
  // Bounded before anything is kept: every field is stored and shown.
  for (const auto& [field, id] :
       {std::pair{"region", &request.region()}, std::pair{"pool", &request.pool()},
        std::pair{"launch_token", &request.launch_token()}}) {
    if (!id->empty()) SEXTANT_RETURN_IF_ERROR(CheckId(field, *id));
  }
  if (request.hostname().size() > kMaxHostnameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("hostname is ", request.hostname().size(),
                                                   " bytes; at most ", kMaxHostnameBytes));
  }
  for (const v1::Pool& pool : spec.resources().pools()) {
    if (pool.name() == request.pool() && pool.region() != request.region()) {
      return absl::PermissionDeniedError(absl::StrCat("pool ", pool.name(), " is in region ",
                                                      pool.region(), "; a worker of region ",
                                                      request.region(), " may not join it"));
    }
  }
  return absl::OkStatus();
}

int64_t WorkerRoster::Add(const v1::RegisterRequest& request) {
  const int64_t id = next_id_++;
  workers_[id] = WorkerInfo{request.region(), request.pool(), request.launch_token()};
  return id;
}

const std::string& WorkerRoster::pool(int64_t worker) const {
  static const std::string kNone;
  auto it = workers_.find(worker);
  return it == workers_.end() ? kNone : it->second.pool;
}

absl::Status TelemetryBuffer::Flush(Store* store, absl::Time now, absl::Duration every) {
  if (rows_.empty() || now - flushed_ < every) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(WithinTransaction(store, [&]() -> absl::Status {
    for (const TelemetryRow& t : rows_) SEXTANT_RETURN_IF_ERROR(store->AddTelemetry(t));
    return absl::OkStatus();
  }));
  rows_.clear();
  flushed_ = now;
  return absl::OkStatus();
}

}  // namespace sextant
