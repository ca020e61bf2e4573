#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_CHECKPOINT_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "federation/server_optimizer.h"
#include "orchestrator/core/rounds_table.h"

namespace sextant {

// What a federated run checkpoints after each completed round: the round, the global model, the
// server optimiser's state and the round's rows of the rounds table. The checkpoint is the
// round's commit point: a resume writes its rows to the table, so the rows found after a crash
// are exactly those of the committed round. It travels as the payload of a WriteCheckpoint file
// (atomic and checksummed), so this codec sees only payloads that passed the checksum.
struct GlobalCheckpoint {
  int64_t round = 0;
  std::vector<float> model;
  ServerOptimizer::State optimizer;
  std::vector<RoundRow> rows;
};

// The payload: round, model, optimiser rounds, then m and v each as a length and floats, then
// the row count and the rows (absent in checkpoints written before rows were added: none).
std::string EncodeGlobalCheckpoint(const GlobalCheckpoint& checkpoint);

// The same payload in three pieces for WriteCheckpoint, without a copy of the model: the bytes
// before the model's floats, the floats themselves (a view of `model`, valid while it is), and
// the bytes after. head + model + tail == EncodeGlobalCheckpoint's payload.
struct GlobalCheckpointPieces {
  std::string head;
  absl::string_view model;
  std::string tail;
};
GlobalCheckpointPieces EncodeGlobalCheckpointPieces(int64_t round, absl::Span<const float> model,
                                                    const ServerOptimizer::State& optimizer,
                                                    const std::vector<RoundRow>& rows);

// Decodes a payload for a model of model_size floats. DataLoss naming the field when it is
// truncated or has trailing bytes; InvalidArgument when the round or optimiser rounds are
// negative or a moment is neither empty nor model_size long, or the row count is negative or
// above 2^20. Allocates at most 3 * model_size floats whatever the payload says (rows only as
// they are read).
absl::StatusOr<GlobalCheckpoint> DecodeGlobalCheckpoint(const std::string& payload,
                                                        size_t model_size);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_CHECKPOINT_H_
