#ifndef SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_JOURNAL_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_JOURNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/import/optuna_storage.h"

namespace sextant {

// Bounds on a journal, beside those of optuna_storage.h that apply to it too (kMaxOptunaValueBytes
// bounds a line, kMaxOptunaJsonDepth its nesting, kMaxOptunaNameBytes a name or key,
// kMaxOptunaObjectives a study's directions, and kMaxOptunaTextBytes the lines whose
// operations are kept, over all studies). Each is checked before the memory is taken.
inline constexpr int64_t kMaxOptunaJournalBytes = int64_t{1} << 30;  // the file
inline constexpr int64_t kMaxOptunaJournalLines = 10'000'000;        // its lines

// Reads one study of an Optuna journal file (JournalFileBackend's log; JournalFileStorage's
// before Optuna 4): one JSON object per line, each an operation, replayed in order as
// Optuna's JournalStorage replays them, into the same OptunaStudy that ReadOptunaStudy makes
// of an SQLite storage. Times carry their offset (UTC, from Optuna 5) or are naive local time
// (before). Optuna's rules are kept: ids are given in order of creation (studies from 0,
// trials from 0 across all studies, a trial's number from 0 within its study); an operation
// on a study or trial that does not exist, on a finished trial, a second RUNNING, a creation
// under a name taken, and a parameter whose distribution is incompatible with the one the
// study's first trial with it used are ignored, as Optuna ignores another worker's;
// DISCARD_TRIALS is ignored. The last line is skipped when it has no line break or is not
// JSON (a write cut short, as Optuna skips it).
// Errors (all InvalidArgument, naming the file and, for a line, its number from 1): the
// file cannot be read or is past kMaxOptunaJournalBytes, a line that is not JSON before the
// last, an unknown op_code, a field missing or of another type than Optuna writes, a
// distribution ParseOptunaDistribution refuses, a categorical index out of range, more
// values than the study has objectives, anything past the bounds above, and, as for
// ReadOptunaStudy, no study called `study` (an empty `study` names the only study).
absl::StatusOr<OptunaStudy> ReadOptunaJournal(const std::string& path, const std::string& study);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_JOURNAL_H_
