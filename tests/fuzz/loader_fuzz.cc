// Fuzz target: the YAML experiment loader. Any input must give a spec or errors, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "orchestrator/core/experiment_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string yaml(reinterpret_cast<const char*>(data), size);
  sextant::LoadResult r = sextant::LoadExperimentFromString(yaml, "fuzz.yaml");
  for (const auto& e : r.errors) (void)e.ToString();
  return 0;
}
