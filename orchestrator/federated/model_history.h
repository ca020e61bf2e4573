#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_MODEL_HISTORY_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_MODEL_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "federation/server_optimizer.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "orchestrator/federated/global_model.h"

namespace sextant {

// The global model's history on disk, written as rounds complete and read back on resume:
// each completed round's checkpoint (the commit point: the model, the server optimiser's state
// and the round's rows), RUN_DIR/model/round-NNNN.safetensors of the latest kRoundModelsKept
// rounds, and RUN_DIR/model/final.safetensors. The store's meta `model_file` names the newest
// model file (`results --format json` names it). Not thread-safe.
class ModelHistory {
 public:
  // How many per-round model files are kept.
  static constexpr int kRoundModelsKept = 3;

  // Everything is borrowed and must outlive the history. ckpt_dir holds the checkpoints,
  // model_dir the safetensors files.
  ModelHistory(GlobalModel* model, ServerOptimizer* optimizer, RoundsTable* rounds, Store* store,
               std::string ckpt_dir, std::string model_dir);

  // Commits round `round`: its checkpoint, carrying `rows`, then its model file, then the rows
  // in the rounds table. A round is listed only once committed (so a listed round is never redone
  // with other values), and a kill before the rows reach the table is repaired by Restore.
  absl::Status Commit(int64_t round, const std::vector<RoundRow>& rows);

  // The final model, model_dir/final.safetensors.
  absl::Status WriteFinal();

  // The latest checkpoint, read back into the model and the optimiser, its rows put in the
  // rounds table. round 0 (and no rows) when no round was committed yet.
  struct Restored {
    int64_t round = 0;
    std::vector<RoundRow> rows;
  };
  absl::StatusOr<Restored> Restore();

 private:
  // The model as safetensors model_dir/name, written atomically, named by the meta model_file.
  absl::Status WriteModelFile(const std::string& name);

  GlobalModel* const model_;
  ServerOptimizer* const optimizer_;
  RoundsTable* const rounds_;
  Store* const store_;
  const std::string ckpt_dir_, model_dir_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_MODEL_HISTORY_H_
