// Asking a peer again while it cannot be reached: the one retry loop of the participants (a
// client pulling its round, a regional tier pulling upstream's, a participant started by hand
// joining).
#ifndef SEXTANT_COMMON_RETRY_H_
#define SEXTANT_COMMON_RETRY_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace sextant {

struct RetryPolicy {
  // How long the peer may stay unreachable, from the first unreachable answer.
  absl::Duration give_up_after = absl::Seconds(60);
  // The pause between tries.
  absl::Duration pause = absl::Milliseconds(200);
};

// Unavailable or DeadlineExceeded: the peer is starting, restarting or not reachable yet.
inline bool IsUnreachable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// Calls attempt() until its answer is not IsUnreachable (that answer is returned, OK or not),
// or until policy.give_up_after has passed on clock since the first unreachable answer (the
// last unreachable status is returned). Before each pause it calls between(last status), when
// given: a non-OK status from it (an interruption) ends the retries and is returned. The pause
// is slept on clock, so a FakeClock drives the loop.
template <typename T>
absl::StatusOr<T> RetryWhileUnreachable(
    Clock* clock, const RetryPolicy& policy, const std::function<absl::StatusOr<T>()>& attempt,
    const std::function<absl::Status(const absl::Status&)>& between = nullptr) {
  absl::Time first = absl::InfiniteFuture();
  while (true) {
    absl::StatusOr<T> answer = attempt();
    if (!IsUnreachable(answer.status())) return answer;
    if (first == absl::InfiniteFuture()) first = clock->Now();
    if (clock->Now() - first > policy.give_up_after) return answer.status();
    if (between) {
      if (absl::Status s = between(answer.status()); !s.ok()) return s;
    }
    clock->SleepFor(policy.pause);
  }
}

}  // namespace sextant

#endif  // SEXTANT_COMMON_RETRY_H_
