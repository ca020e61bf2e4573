#ifndef SEXTANT_ORCHESTRATOR_CORE_RUNG_RECORD_H_
#define SEXTANT_ORCHESTRATOR_CORE_RUNG_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/sampler.h"
#include "strategies/scheduler.h"

namespace sextant {

// The rung bookkeeping of a multi-fidelity run, one implementation shared by the Dispatcher
// (`sextant run`) and the Simulator (`sextant simulate`), so that both record the scheduler's
// decisions the same way. Plain functions over a TrialRow; thread-compatible.

// Appends one scheduler decision ("promoted", "paused", "pruned", "completed") to
// row.rungs_json: the fidelity the trial reached (row.fidelity), its last value (null when
// none or not finite) and, for "promoted", the new target (row.target). A rungs_json that is
// not a JSON array is replaced by one.
void AppendRung(TrialRow& row, std::optional<double> value, std::string_view decision);

// A trial still paused when the schedule ends was never promoted: it becomes PRUNED at the
// rung it reached, finished at `now` (unix seconds), with its last value when finite, and the
// "pruned" decision is appended. Does nothing to a row that is not paused; returns whether it
// changed the row.
bool PrunePausedAtScheduleEnd(TrialRow& row, std::optional<double> value, double now);

// The message of a "trial_promoted" event: "to <fidelity name>=<target>".
std::string PromotionMessage(const v1::ExperimentSpec& spec, double target);

// What BOHB's sampler is fitted on: the values at the highest fidelity that holds at least
// (parameter count + 2) of them, not whatever fidelity each trial happened to reach. For
// trials 1..count in order: one with a value there is a completed observation (its values
// with several objectives, else its first value, and violations(id)); one still running is a
// pending observation; the others are left out (seen only at lower, incomparable fidelities).
std::vector<Observation> BestFidelityHistory(
    const Scheduler& scheduler, int parameters, bool several_objectives, int64_t count,
    absl::FunctionRef<const Params&(int64_t)> params, absl::FunctionRef<bool(int64_t)> running,
    absl::FunctionRef<std::vector<double>(int64_t)> violations);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_RUNG_RECORD_H_
