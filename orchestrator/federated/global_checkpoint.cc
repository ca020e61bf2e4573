#include "orchestrator/federated/global_checkpoint.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

absl::Status Field(const absl::Status& s, const char* name) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("global checkpoint, ", name, ": ", s.message()));
}

// A moment: its length (0 or model_size) and that many floats.
absl::Status ReadMoment(ByteReader& r, size_t model_size, const char* name,
                        std::vector<float>* out) {
  absl::StatusOr<int64_t> n = r.I64();
  SEXTANT_RETURN_IF_ERROR(Field(n.status(), name));
  if (*n != 0 && *n != static_cast<int64_t>(model_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("global checkpoint, ", name, ": ", *n, " values for a model of ", model_size));
  }
  out->resize(static_cast<size_t>(*n));
  return Field(r.Floats(out->data(), *n), name);
}

absl::Status ReadRows(ByteReader& r, std::vector<RoundRow>* rows) {
  absl::StatusOr<int64_t> n = r.I64();
  SEXTANT_RETURN_IF_ERROR(Field(n.status(), "row count"));
  if (*n < 0 || *n > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("global checkpoint: ", *n, " rows"));
  }
  for (int64_t i = 0; i < *n; ++i) {
    RoundRow row;
    SEXTANT_ASSIGN_OR_RETURN(row.round, r.I64());
    SEXTANT_ASSIGN_OR_RETURN(row.region, r.Bytes());
    SEXTANT_ASSIGN_OR_RETURN(row.accuracy, r.F64());
    SEXTANT_ASSIGN_OR_RETURN(row.loss, r.F64());
    SEXTANT_ASSIGN_OR_RETURN(row.clients, r.I64());
    SEXTANT_ASSIGN_OR_RETURN(row.rejected, r.I64());
    SEXTANT_ASSIGN_OR_RETURN(int64_t has_epsilon, r.I64());
    SEXTANT_ASSIGN_OR_RETURN(double epsilon, r.F64());
    if (has_epsilon != 0) row.epsilon = epsilon;
    SEXTANT_ASSIGN_OR_RETURN(row.time, r.F64());
    rows->push_back(std::move(row));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeGlobalCheckpoint(const GlobalCheckpoint& c) {
  GlobalCheckpointPieces p = EncodeGlobalCheckpointPieces(c.round, c.model, c.optimizer, c.rows);
  return absl::StrCat(p.head, p.model, p.tail);
}

GlobalCheckpointPieces EncodeGlobalCheckpointPieces(int64_t round, absl::Span<const float> model,
                                                    const ServerOptimizer::State& optimizer,
                                                    const std::vector<RoundRow>& rows) {
  GlobalCheckpointPieces p;
  ByteWriter head;
  head.I64(round);
  head.U64(static_cast<uint64_t>(model.size()));  // ByteWriter::Floats's length prefix
  p.head = head.str();
  // The floats as ByteWriter::Floats appends them: their bytes in host order.
  p.model =
      absl::string_view(reinterpret_cast<const char*>(model.data()), model.size() * sizeof(float));
  ByteWriter w;
  w.I64(optimizer.rounds);
  w.I64(static_cast<int64_t>(optimizer.m.size()));
  w.Floats(optimizer.m.data(), static_cast<int64_t>(optimizer.m.size()));
  w.I64(static_cast<int64_t>(optimizer.v.size()));
  w.Floats(optimizer.v.data(), static_cast<int64_t>(optimizer.v.size()));
  w.I64(static_cast<int64_t>(rows.size()));
  for (const RoundRow& row : rows) {
    w.I64(row.round);
    w.Bytes(row.region);
    w.F64(row.accuracy);
    w.F64(row.loss);
    w.I64(row.clients);
    w.I64(row.rejected);
    w.I64(row.epsilon ? 1 : 0);
    w.F64(row.epsilon.value_or(0));
    w.F64(row.time);
  }
  p.tail = w.str();
  return p;
}

absl::StatusOr<GlobalCheckpoint> DecodeGlobalCheckpoint(const std::string& payload,
                                                        size_t model_size) {
  ByteReader r(payload);
  GlobalCheckpoint c;
  absl::StatusOr<int64_t> round = r.I64();
  SEXTANT_RETURN_IF_ERROR(Field(round.status(), "round"));
  c.model.resize(model_size);
  SEXTANT_RETURN_IF_ERROR(
      Field(r.Floats(c.model.data(), static_cast<int64_t>(model_size)), "model"));
  absl::StatusOr<int64_t> rounds = r.I64();
  SEXTANT_RETURN_IF_ERROR(Field(rounds.status(), "optimizer rounds"));
  if (*round < 0 || *rounds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global checkpoint: round ", *round, ", optimizer rounds ", *rounds));
  }
  c.round = *round;
  c.optimizer.rounds = *rounds;
  SEXTANT_RETURN_IF_ERROR(ReadMoment(r, model_size, "m", &c.optimizer.m));
  SEXTANT_RETURN_IF_ERROR(ReadMoment(r, model_size, "v", &c.optimizer.v));
  if (!r.done()) SEXTANT_RETURN_IF_ERROR(ReadRows(r, &c.rows));
  if (!r.done()) return absl::DataLossError("global checkpoint: trailing bytes after the rows");
  return c;
}

}  // namespace sextant
