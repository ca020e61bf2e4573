#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_RUN_TIMING_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_RUN_TIMING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/rounds_table.h"

namespace sextant {

// How long a federated run took to start and to run a round, as it measured them: what a
// forecast of its twin (`sextant simulate --calibrate RUN_DIR`) uses instead of the
// simulate: block's guesses.
struct RunTiming {
  double startup_seconds = 0;  // from the run's start to its first round's opening
  double round_seconds = 0;    // one round, training and transfers, as closes are apart
  int64_t gaps = 0;            // consecutive rounds the median is taken over
};

// From the global rows (region "") of a run's rounds table: round_seconds is the median of the
// gaps between the closes of consecutive rounds (a round missing from the table, one that
// failed, breaks the sequence), startup_seconds the first round's close less one round (at
// least 0). InvalidArgument when no two consecutive rounds closed.
absl::StatusOr<RunTiming> MeasureRunTiming(const std::vector<RoundRow>& rows);

// The same, read from RUN_DIR/state.db. InvalidArgument naming run_dir when it holds no run
// state or too few rounds.
absl::StatusOr<RunTiming> MeasureRunTiming(const std::string& run_dir);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_RUN_TIMING_H_
