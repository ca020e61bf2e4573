#ifndef SEXTANT_ORCHESTRATOR_EXPERIMENT_LOADER_H_
#define SEXTANT_ORCHESTRATOR_EXPERIMENT_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/search_space.h"

namespace sextant {

// One problem found in an experiment file. line and col are 1-based (0 when unknown).
struct LoadError {
  std::string file;
  int line = 0;
  int col = 0;
  std::string message;  // names the key, e.g. "parameters.lr.min: must be > 0 with log: true"
  // "FILE:LINE:COL: message".
  std::string ToString() const;
};

// The result of loading: either a valid spec or every error found (not just the first).
struct LoadResult {
  v1::ExperimentSpec spec;
  std::vector<LoadError> errors;
  bool ok() const { return errors.empty(); }
};

// Parses and validates YAML text. `file` is used in error messages and as spec.source_path.
// Unknown keys, wrong types, missing required keys, min > max, log on a non-positive range,
// empty categoricals, a bad name, an unknown sampler or scheduler, and a ${x} in the command
// that names no parameter are all errors. Defaults are filled in (see README).
LoadResult LoadExperimentFromString(const std::string& yaml, const std::string& file);

// Reads and loads a file; a file that cannot be read is one LoadError.
LoadResult LoadExperimentFile(const std::string& path);

// The search space the samplers see.
SearchSpace ToSearchSpace(const v1::ExperimentSpec& spec);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_EXPERIMENT_LOADER_H_
