// One trial of a federated search: the federation hyperparameters a search may tune, and how a
// trial's values go into the federation block it then runs as a plain federated run.
#ifndef SEXTANT_ORCHESTRATOR_CORE_FEDERATED_TRIAL_PARAMS_H_
#define SEXTANT_ORCHESTRATOR_CORE_FEDERATED_TRIAL_PARAMS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The parameter names a federated search may tune, for messages: "local_lr, client_lr, ...".
std::string FederationHyperparameterNames();

// True when `name` is one of them. clip_norm (federation.dp.clip_norm) needs dp:.
bool IsFederationHyperparameter(const std::string& name);

// Puts the trial's values (value(name); nullopt when the parameter is inactive) into spec's
// federation block and clears spec's parameters. InvalidArgument for a name that is not a
// federation hyperparameter, a value that is not a number (but server_optimizer's), clip_norm
// without dp:, clients_per_round too small for secure aggregation's quota of 2 per region, or,
// under mode: buffered, below buffer_size (it is how many start on each model version).
absl::Status ApplyFederatedTrialParams(
    v1::ExperimentSpec& spec,
    const std::function<std::optional<std::string>(const std::string&)>& value);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_FEDERATED_TRIAL_PARAMS_H_
