#ifndef SEXTANT_ORCHESTRATOR_CORE_TRIAL_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_CORE_TRIAL_COMMAND_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sextant/v1/experiment.pb.h"
#include "sextant/v1/worker_service.pb.h"
#include "strategies/search_space.h"

namespace sextant {

// Replaces each ${name} in text by the parameter's formatted value. A ${name} of an inactive
// conditional parameter becomes the empty string. Returns InvalidArgument for a ${name} that
// is not a parameter (the loader rejects those earlier) or an unterminated "${".
absl::StatusOr<std::string> SubstituteParams(const std::string& text, const Params& params,
                                             const SearchSpace& space);

// Params as a JSON object: floats as numbers, ints as integers, categoricals as strings.
std::string ParamsToJson(const Params& params);
// The inverse of ParamsToJson, typed by the search space. InvalidArgument on malformed JSON.
absl::StatusOr<Params> ParamsFromJson(const std::string& json, const SearchSpace& space);

// Hyperparameters of the built-in trainer (trial.builtin). A search parameter with one of these
// names is passed to it as the matching flag (batch_size -> --batch-size); builtin.args may
// name them too, with values that hold ${param}.
inline const std::set<std::string> kBuiltinTrainerOptions = {
    "batch_size",   "hidden",        "optimizer",    "lr",
    "dropout",      "weight_decay",  "momentum",     "seed",
    "threads",      "memory_cap_mb", "nan_patience", "checkpoint_every",
    "train_subset", "val_subset",    "data_dir",     "depth"};

struct AssignmentContext {
  int64_t trial_id = 0;
  int attempt = 0;
  std::string checkpoint_dir;  // this trial's folder (same for every attempt)
  // Federated tuning: flags appended to the inner run's command line (--tls-dir DIR,
  // --slurm-partition P, ...). Default none.
  std::vector<std::string> federated_flags;
};

// Builds what the worker runs: argv with ${name} substituted (for trial.builtin, the
// `sextant-worker train` command line with the trainer's hyperparameters), and the environment:
// the experiment's env (substituted), SEXTANT_PARAMS (JSON), SEXTANT_PARAM_<NAME> (upper case),
// SEXTANT_TRIAL_ID, SEXTANT_ATTEMPT, SEXTANT_EXPERIMENT and SEXTANT_CHECKPOINT_DIR.
// With a federation block the trial is a whole federated run: argv is `sextant run FILE
// --run-dir CHECKPOINT_DIR/federation` and context.federated_flags, with
// SEXTANT_FEDERATED_TRIAL=1 (see
// RunSession::Open in orchestrator/session/run_session.h).
absl::StatusOr<v1::Assignment> BuildAssignment(const v1::ExperimentSpec& spec,
                                               const SearchSpace& space, const Params& params,
                                               const AssignmentContext& context);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_TRIAL_COMMAND_H_
