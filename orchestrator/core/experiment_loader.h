#ifndef SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_LOADER_H_
#define SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/search_space.h"

namespace sextant {

// Explicit limits on what the loader accepts.
inline constexpr int kMaxParameters = 1000;                  // entries under `parameters:`
inline constexpr int64_t kMaxExperimentFileBytes = 4 << 20;  // LoadExperimentFile reads 4 MiB

// One problem found in an experiment file. line and col are 1-based (0 when unknown, e.g. for a
// file that cannot be read).
struct LoadError {
  std::string file;
  int line = 0;
  int col = 0;
  std::string message;  // names the key, e.g. "parameters.lr.min: must be > 0 with log: true"
  // "FILE:LINE:COL: message", always with both numbers ("FILE:0:0: ..." when unknown).
  std::string ToString() const;
};

// The result of loading: either a valid spec or every error found (not just the first).
// When errors is non-empty, spec is cleared and must not be used.
struct LoadResult {
  v1::ExperimentSpec spec;
  std::vector<LoadError> errors;  // sorted by (line, col); document order within a position
  bool ok() const { return errors.empty(); }
};

// Parses and validates YAML text. `file` is used in error messages and as spec.source_path.
// Unknown keys (the message lists the allowed ones), duplicate keys, wrong types, missing
// required keys, min >= max, log on a non-positive range, empty or one-value categoricals,
// a bad name, an unknown sampler or scheduler, conditions (`when:`) that name a missing,
// float or self/cyclic parameter or a value it cannot take, and a ${x} in trial.command,
// trial.env or trial.builtin.args that names no parameter are all errors. Malformed YAML is one
// error at the parser's position. Never throws.
//
// Defaults filled in: objective.goal MINIMIZE; search.sampler RANDOM, scheduler NONE, seed 0,
// max_trials 20, max_concurrent 1, fidelity.reduction_factor 3; budget.currency "USD";
// resources.provider "local"; pool market ON_DEMAND, min_instances 0, max_instances 1;
// trial.working_dir: the file's folder ("." when it has none), and a relative working_dir is
// joined to that folder (lexically; the filesystem is not touched). With a `federation:` block:
// rounds 10, clients_per_round 1 (all), local_epochs 1, local_batch_size 32, local_lr 0.01,
// aggregation "fedavg", server_optimizer "fedavg", server_lr 1, min_clients 1, eval_every 1,
// partition "iid", dirichlet_alpha 0.5, secure_aggregation true. An experiment with
// `federation:` and no `search:` (plain federated training) may have no parameters, and with
// federation.model (a model of the user's own, read from its safetensors header) no `trial`.
LoadResult LoadExperimentFromString(const std::string& yaml, const std::string& file);

// Reads and loads a file. A file that cannot be read, or is larger than
// kMaxExperimentFileBytes, is one LoadError at line 0, col 0 ("FILE:0:0: cannot read: ...").
LoadResult LoadExperimentFile(const std::string& path);

// The search space the samplers see: one ParamSpec per spec.parameters entry, in declaration
// order, with kind, bounds, log, step, values, grid_points and when copied over.
SearchSpace ToSearchSpace(const v1::ExperimentSpec& spec);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_LOADER_H_
