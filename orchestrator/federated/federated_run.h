#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_RUN_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_RUN_H_

#include "absl/status/status.h"
#include "orchestrator/session/run_session.h"

namespace sextant {

// The federated loop: runs (or resumes) the session's plain federated experiment (a
// `federation:` block and no parameters; RunSession::federated()): the global tier of
// hierarchical FedAvg. It launches one `sextant-worker --role aggregator` per region and its
// clients as local processes, serves FederationService to the aggregators on loopback, and per
// round samples clients (seeded), streams the global model once per region, folds the regional
// aggregates weighted by example counts, steps the server optimiser, evaluates on the
// validation split, checkpoints the global model, writes it as named tensors to
// RUN_DIR/model/round-NNNN.safetensors (the latest 3 kept) and records the round in the `rounds`
// table (round, region ('' = global), accuracy, loss, clients, rejected, epsilon, time) and as
// events. `sextant resume` continues after the last completed round. The final global metric
// is trial 1's value, so that `results` reports it as the objective; the final model is
// RUN_DIR/model/final.safetensors. With federation.model.file the first global model is that
// file's tensors (widened to f32, stored back in their own dtypes) and there is no evaluator:
// a round's global metrics are the clients' eval_loss/eval_accuracy of the model they received,
// weighted by their examples.
// federation.client_selection picks each synchronous round's clients from the speeds the regions
// report (client_selection.h). With federation.mode: buffered there are no sampled rounds: every
// client trains continuously, each region pushes its full buffers, and a "round" is one server
// step over buffer_size client updates, damped by their staleness (BufferPolicy).
// OK when the rounds end (or the privacy or wall-time budget stops them); Cancelled when
// interrupted (it can be resumed); otherwise the error.
absl::Status RunFederated(RunSession& session);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_RUN_H_
