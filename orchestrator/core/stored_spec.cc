#include "orchestrator/core/stored_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/core/experiment_loader.h"

namespace sextant {

v1::ExperimentSpec WithoutEnvValues(v1::ExperimentSpec spec) {
  for (auto& [name, value] : *spec.mutable_trial()->mutable_env()) value.clear();
  return spec;
}

absl::Status RestoreEnvValues(v1::ExperimentSpec* spec) {
  if (spec->trial().env().empty()) return absl::OkStatus();
  const std::string& file = spec->source_path();
  const std::string why = "a run keeps no trial env: values (they may hold secrets), so ";
  LoadResult loaded = LoadExperimentFile(file);
  if (!loaded.ok()) {
    std::vector<std::string> lines;
    for (const LoadError& e : loaded.errors) lines.push_back(e.ToString());
    return absl::InvalidArgumentError(absl::StrCat(why, "they are read again from ", file,
                                                   ", which does not load:\n",
                                                   absl::StrJoin(lines, "\n")));
  }
  const auto& now = loaded.spec.trial().env();
  for (const auto& [name, unused] : spec->trial().env()) {
    if (!now.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(why, "they are read again from ", file,
                                                     ", which no longer sets trial env ", name));
    }
  }
  for (auto& [name, value] : *spec->mutable_trial()->mutable_env()) value = now.at(name);
  return absl::OkStatus();
}

}  // namespace sextant
