#ifndef SEXTANT_WORKER_FEDERATED_FEDERATED_MAIN_H_
#define SEXTANT_WORKER_FEDERATED_FEDERATED_MAIN_H_

#include <atomic>

#include "aggregator/federation_service.h"
#include "common/clock.h"

namespace sextant {

// True when argv asks for a federated role: `--role aggregator` or `--role evaluator`, or
// `--role client` with `--spec` (a plain `--role client` is a trial worker); the `--role=R` and
// `--spec=FILE` forms count too.
bool IsFederatedInvocation(int argc, char** argv);

// `sextant-worker --role client|aggregator --region R --connect HOST:PORT --experiment-id ID ...`:
//   client:     --index I --spec FILE (a serialized ExperimentSpec) [--threads N]
//               [--work-dir DIR] (the command client's exchange folder)
//   aggregator: --model-size N --work-dir DIR [--listen ADDR] [--port-file FILE]
//               [--aggregation fedavg|median|trimmed_mean|krum|multi_krum] [--trim-fraction B]
//               [--byzantine F] [--krum-selected M]
//               [--clients N] (the region's clients, <region>/0..N-1: it waits for them to
//               connect, up to --startup-wait S seconds, default 120, before its first round)
// `sextant-worker --role evaluator --spec FILE --work-dir DIR [--threads N]`: the global tier's
//               evaluator (evaluator.h); needs none of --region, --connect, --experiment-id.
// Flags are parsed with CLI11 (`--flag value` or `--flag=value`; a repeated flag keeps its last
// value); `--help` lists them. Returns the exit code: 0 when the experiment ended or after
// --help, 2 on bad arguments (an unknown flag, a flag without its value, a bad value), 1 on
// failure. clock (not owned) is every role's time and waits and must outlive the call.
// interceptors, when set, go on an aggregator's server (RegionalAggregatorOptions).
int RunFederatedMain(int argc, char** argv, Clock* clock, const std::atomic<bool>* stop,
                     const ServerInterceptors& interceptors = {});

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_FEDERATED_MAIN_H_
