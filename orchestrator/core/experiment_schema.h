#ifndef SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_SCHEMA_H_
#define SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_SCHEMA_H_

#include <string_view>

namespace sextant {

// The experiment file's JSON Schema (draft 2020-12): the bytes of schema/experiment.schema.json
// as they were when the binary was built, so an installed binary needs no file. Kept in lockstep
// with the loader (experiment_loader.h) by tests/orchestrator/schema_lockstep.py.
std::string_view ExperimentSchemaJson();

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_EXPERIMENT_SCHEMA_H_
