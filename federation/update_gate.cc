#include "federation/update_gate.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {

absl::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kWrongExperiment:
      return "wrong_experiment";
    case RejectReason::kStaleRound:
      return "stale_round";
    case RejectReason::kFutureRound:
      return "future_round";
    case RejectReason::kDuplicate:
      return "duplicate";
    case RejectReason::kNotSampled:
      return "not_sampled";
    case RejectReason::kWrongShape:
      return "wrong_shape";
    case RejectReason::kNonFinite:
      return "non_finite";
    case RejectReason::kBadWeight:
      return "bad_weight";
  }
  return "unknown";
}

UpdateGate::UpdateGate(std::string experiment_id, size_t model_size)
    : experiment_id_(std::move(experiment_id)), model_size_(model_size) {}

absl::Status UpdateGate::OpenRound(int64_t round, absl::Span<const std::string> sampled_clients) {
  if (round <= round_) {
    return absl::InvalidArgumentError(
        absl::StrCat("round ", round, " does not follow round ", round_));
  }
  round_ = round;
  open_ = true;
  sampled_ = absl::flat_hash_set<std::string>(sampled_clients.begin(), sampled_clients.end());
  if (buffered()) return absl::OkStatus();  // updates in flight for earlier rounds go on
  delivered_.clear();
  in_flight_.clear();
  cut_off_.clear();
  return absl::OkStatus();
}

void UpdateGate::SetBuffered(int64_t max_staleness, bool distinct_senders) {
  max_staleness_ = std::max<int64_t>(0, max_staleness);
  distinct_senders_ = distinct_senders;
}

void UpdateGate::CloseRound() {
  open_ = false;
  cut_off_ = std::move(in_flight_);
  in_flight_.clear();
}

absl::Status UpdateGate::NotInFlight(absl::string_view client_id) {
  if (cut_off_.erase(client_id) > 0) {
    return Reject(
        client_id, RejectReason::kStaleRound,
        absl::AbortedError(absl::StrCat("round ", round_, " closed while the update from '",
                                        client_id, "' was arriving")));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("client '", client_id, "' has no update in flight"));
}

absl::Status UpdateGate::Admit(const UpdateHeader& h, size_t declared_size) {
  const std::string& c = h.client_id;
  if (h.experiment_id != experiment_id_) {
    return Reject(c, RejectReason::kWrongExperiment,
                  absl::AbortedError(absl::StrCat("update for experiment '", h.experiment_id,
                                                  "', this is '", experiment_id_, "'")));
  }
  if (buffered() && h.round <= round_ && h.round < round_ - max_staleness_) {
    return Reject(c, RejectReason::kStaleRound,
                  absl::AbortedError(absl::StrCat(
                      "update computed on round ", h.round, " is ", round_ - h.round,
                      " rounds stale; max_staleness is ", max_staleness_)));
  }
  if (!buffered() && (h.round < round_ || (h.round == round_ && !open_))) {
    return Reject(c, RejectReason::kStaleRound,
                  absl::AbortedError(absl::StrCat("stale update for round ", h.round, "; round ",
                                                  round_, open_ ? " is open" : " closed")));
  }
  if (h.round > round_) {
    return Reject(c, RejectReason::kFutureRound,
                  absl::AbortedError(absl::StrCat("update for round ", h.round,
                                                  " before it opened (current ", round_, ")")));
  }
  if (buffered() && distinct_senders_ && delivered_.contains(c) && !in_flight_.contains(c)) {
    return absl::UnavailableError(
        absl::StrCat("'", c, "' already delivered to this buffer; the next one takes it"));
  }
  if ((!buffered() && delivered_.contains(c)) || in_flight_.contains(c)) {
    return Reject(
        c, RejectReason::kDuplicate,
        absl::AbortedError(absl::StrCat("duplicate update from '", c, "' in round ", h.round)));
  }
  if (!sampled_.empty() && !sampled_.contains(c)) {
    return Reject(c, RejectReason::kNotSampled,
                  absl::FailedPreconditionError(
                      absl::StrCat("client '", c, "' was not sampled for round ", h.round)));
  }
  if (!std::isfinite(h.num_examples) || h.num_examples <= 0) {
    return Reject(c, RejectReason::kBadWeight,
                  absl::InvalidArgumentError(
                      absl::StrCat("num_examples must be finite and > 0, got ", h.num_examples)));
  }
  if (declared_size != model_size_) {
    return Reject(c, RejectReason::kWrongShape,
                  absl::InvalidArgumentError(absl::StrCat("update has ", declared_size,
                                                          " values, the model has ", model_size_)));
  }
  in_flight_.insert(c);
  return absl::OkStatus();
}

absl::Status UpdateGate::CheckValues(absl::string_view client_id, absl::Span<const float> chunk) {
  if (!in_flight_.contains(client_id)) return NotInFlight(client_id);
  for (size_t i = 0; i < chunk.size(); ++i) {
    if (!std::isfinite(chunk[i])) {
      in_flight_.erase(client_id);
      return Reject(
          client_id, RejectReason::kNonFinite,
          absl::InvalidArgumentError(absl::StrCat("update from '", client_id,
                                                  "' has a non-finite value at chunk index ", i)));
    }
  }
  return absl::OkStatus();
}

absl::Status UpdateGate::Accept(absl::string_view client_id) {
  auto it = in_flight_.find(client_id);
  if (it == in_flight_.end()) return NotInFlight(client_id);
  delivered_.insert(std::string(client_id));
  in_flight_.erase(it);
  return absl::OkStatus();
}

void UpdateGate::Abandon(absl::string_view client_id) {
  auto it = in_flight_.find(client_id);
  if (it != in_flight_.end()) in_flight_.erase(it);
}

absl::Status UpdateGate::Check(const UpdateHeader& header, absl::Span<const float> update) {
  if (absl::Status s = Admit(header, update.size()); !s.ok()) return s;
  if (absl::Status s = CheckValues(header.client_id, update); !s.ok()) return s;
  return Accept(header.client_id);
}

int64_t UpdateGate::rejections(absl::string_view client_id, RejectReason reason) const {
  auto it = rejections_.find(client_id);
  return it == rejections_.end() ? 0 : it->second[static_cast<size_t>(reason)];
}

int64_t UpdateGate::rejections(absl::string_view client_id) const {
  int64_t total = 0;
  for (size_t r = 0; r < kNumRejectReasons; ++r) {
    total += rejections(client_id, static_cast<RejectReason>(r));
  }
  return total;
}

int64_t UpdateGate::rejections(RejectReason reason) const {
  int64_t total = 0;
  for (const auto& [client, counts] : rejections_) total += counts[static_cast<size_t>(reason)];
  return total;
}

absl::Status UpdateGate::Reject(absl::string_view client_id, RejectReason reason,
                                absl::Status status) {
  auto [it, inserted] = rejections_.try_emplace(client_id);
  if (inserted) it->second.fill(0);
  ++it->second[static_cast<size_t>(reason)];
  return status;
}

}  // namespace sextant
