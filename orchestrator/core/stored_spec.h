#ifndef SEXTANT_ORCHESTRATOR_CORE_STORED_SPEC_H_
#define SEXTANT_ORCHESTRATOR_CORE_STORED_SPEC_H_

#include "absl/status/status.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The experiment as a run writes it down (the store's "spec", the federation's spec.pb):
// trial.env keeps its names but not their values, which may be secrets (API tokens, passwords)
// and are never written into a run directory.
v1::ExperimentSpec WithoutEnvValues(v1::ExperimentSpec spec);

// Puts the env values of a spec read back from a store in again, from its experiment file
// (spec->source_path) as that file is now, for the names the spec has. OK at once when
// trial.env is empty. InvalidArgument naming the file when it no longer loads, or naming the
// variable it no longer sets; *spec is then unchanged.
absl::Status RestoreEnvValues(v1::ExperimentSpec* spec);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_STORED_SPEC_H_
