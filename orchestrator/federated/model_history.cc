#include "orchestrator/federated/model_history.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "orchestrator/federated/global_checkpoint.h"

namespace sextant {
namespace {

// The file of the global model after `round` in the model folder.
std::string RoundModelName(int64_t round) {
  return absl::StrFormat("round-%04d.safetensors", round);
}

}  // namespace

ModelHistory::ModelHistory(GlobalModel* model, ServerOptimizer* optimizer, RoundsTable* rounds,
                           Store* store, std::string ckpt_dir, std::string model_dir)
    : model_(model),
      optimizer_(optimizer),
      rounds_(rounds),
      store_(store),
      ckpt_dir_(std::move(ckpt_dir)),
      model_dir_(std::move(model_dir)) {}

absl::Status ModelHistory::WriteModelFile(const std::string& name) {
  SEXTANT_ASSIGN_OR_RETURN(const std::string path, model_->WriteTo(model_dir_, name));
  return store_->PutMeta("model_file", path);
}

absl::Status ModelHistory::Commit(int64_t round, const std::vector<RoundRow>& rows) {
  // In pieces, the model's a view of its values: no copy of the model is made (payload:
  // global_checkpoint.h).
  const GlobalCheckpointPieces c =
      EncodeGlobalCheckpointPieces(round, model_->values(), optimizer_->state(), rows);
  const absl::string_view pieces[] = {c.head, c.model, c.tail};
  const absl::Status written = WriteCheckpoint(ckpt_dir_, round, pieces).status();
  model_->Release();
  SEXTANT_RETURN_IF_ERROR(written);
  SEXTANT_RETURN_IF_ERROR(WriteModelFile(RoundModelName(round)));
  std::error_code ec;
  std::filesystem::remove(model_dir_ + "/" + RoundModelName(round - kRoundModelsKept), ec);
  return rounds_->Put(rows);
}

absl::Status ModelHistory::WriteFinal() { return WriteModelFile("final.safetensors"); }

absl::StatusOr<ModelHistory::Restored> ModelHistory::Restore() {
  auto ck = LoadLatestCheckpoint(ckpt_dir_);
  if (!ck.ok()) return Restored{};  // nothing completed yet
  SEXTANT_ASSIGN_OR_RETURN(GlobalCheckpoint c, DecodeGlobalCheckpoint(ck->payload, model_->size()));
  SEXTANT_RETURN_IF_ERROR(optimizer_->Restore(std::move(c.optimizer)));
  // A kill between the checkpoint and the rounds table's commit left the rows out.
  if (!c.rows.empty()) SEXTANT_RETURN_IF_ERROR(rounds_->Put(c.rows));
  std::copy(c.model.begin(), c.model.end(), model_->values().begin());
  model_->Release();
  return Restored{c.round, std::move(c.rows)};
}

}  // namespace sextant
