#include "orchestrator/core/experiment_schema.h"

namespace sextant {

std::string_view ExperimentSchemaJson() {
  // Generated at build time from schema/experiment.schema.json (embed_text.cmake).
  static constexpr std::string_view kSchema =
#include "experiment_schema_json.inc"
      ;
  return kSchema;
}

}  // namespace sextant
