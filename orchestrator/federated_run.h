#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_RUN_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_RUN_H_

#include <optional>

#include "orchestrator/orchestrator.h"

namespace sextant {

// Runs (or resumes) a plain federated experiment (a `federation:` block and no `search:`): the
// global tier of hierarchical FedAvg. It launches one `sextant-worker --role aggregator` per
// region and its clients as local processes, serves FederationService to the aggregators on
// loopback, and per round samples clients (seeded), streams the global model once per region,
// folds the regional aggregates weighted by example counts, steps the server optimiser,
// evaluates on the validation split, checkpoints the global model and records the round in the
// `rounds` table (round, region ('' = global), accuracy, loss, clients, rejected, epsilon, time)
// and as events. `sextant resume` continues after the last completed round. The final global
// metric is trial 1's value, so that `results` reports it as the objective.
// Returns nullopt when the experiment (options.experiment_file, or the stored one on resume) is
// not a plain federated one, so that the caller runs it as a search; otherwise the exit code.
std::optional<int> MaybeRunFederated(const RunOptions& options, const RunEnv& env);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_RUN_H_
