#include "orchestrator/federated/round_failures.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "aggregator/tier_settings.h"
#include "common/error_line.h"

namespace sextant {

double RoundFailures::EventTime() const { return absl::ToUnixMicros(clock_->Now()) / 1e6; }

int RoundFailures::MaxFailedRounds() const {
  return fed_.max_failed_rounds() > 0 ? fed_.max_failed_rounds() : 3;
}

void RoundFailures::Show(const std::vector<FailureReport>& reports, const RoundProgress& progress,
                         int64_t last_round) {
  for (const FailureReport& f : reports) {
    const bool region = f.failed == f.reporter;
    const std::string why = ErrorLine(f.error);
    (void)store_->AddEvent(EventTime(), region ? "region_failed" : "client_failed", 0,
                           absl::StrCat("round ", f.round, ": ", f.failed, ": ", f.error));
    *out_ << "sextant: round " << f.round << ": " << (region ? "region " : "client ") << f.failed
          << " failed: " << why << "\n"
          << std::flush;
    ++(region ? regions_failed_ : clients_failed_);
    if (!region || last_failure_.empty()) last_failure_ = absl::StrCat(f.failed, ": ", why);
  }
  const int64_t min_clients = std::max(1, fed_.min_clients());
  if (progress.deadline_passed && progress.round > last_round && progress.round != deadline_said_ &&
      progress.count < min_clients && fed_.round_deadline_seconds() > 0 && !Buffered(fed_)) {
    deadline_said_ = progress.round;
    deadline_said_at_ = clock_->Now();
    *out_ << "sextant: round " << progress.round << ": the deadline passed with " << progress.count
          << " client updates in, fewer than min_clients " << min_clients << "; waiting for more\n"
          << std::flush;
  }
}

bool RoundFailures::GiveUp(int64_t round) {
  if (deadline_said_ != round || fed_.hide_region_sums()) return false;
  const absl::Duration limit =
      std::max(absl::Minutes(5), absl::Seconds(10 * fed_.round_deadline_seconds()));
  if (clock_->Now() - deadline_said_at_ < limit) return false;
  if (given_up_ != round) {
    given_up_ = round;
    *out_ << "sextant: round " << round << ": no more updates came in "
          << absl::FormatDuration(limit) << " after its deadline; it closes with what it has\n"
          << std::flush;
  }
  return true;
}

std::optional<std::string> RoundFailures::RoundFailed(int64_t round, int64_t count,
                                                      const std::string& logs_dir) {
  ++failed_in_a_row_;
  const std::string line = absl::StrCat(
      "round ", round, " failed: ", count, " client updates of min_clients ",
      std::max(1, fed_.min_clients()), "; ", clients_failed_, " clients and ", regions_failed_,
      " regions failed", last_failure_.empty() ? "" : absl::StrCat(" (last: ", last_failure_, ")"));
  (void)store_->AddEvent(EventTime(), "round_failed", 0, line);
  *out_ << "sextant: " << line << "\n" << std::flush;
  clients_failed_ = 0;
  regions_failed_ = 0;
  if (failed_in_a_row_ < MaxFailedRounds()) return std::nullopt;
  return absl::StrCat(failed_in_a_row_, " rounds in a row failed (federation.",
                      "max_failed_rounds: ", MaxFailedRounds(), "); the last: ", line,
                      ". Each participant's log is in ", logs_dir);
}

void RoundFailures::RoundCompleted() {
  failed_in_a_row_ = 0;
  clients_failed_ = 0;
  regions_failed_ = 0;
  last_failure_.clear();
}

void RoundFailures::RecordRegionsSittingOut(int64_t round, double seconds,
                                            std::vector<RoundRow>& rows) {
  if (Buffered(fed_) || fed_.hide_region_sums()) return;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const v1::FederatedRegion& r : fed_.regions()) {
    bool in = false;
    for (const RoundRow& row : rows) in = in || row.region == r.name();
    if (in) continue;
    rows.push_back({round, r.name(), nan, nan, 0, 0, std::nullopt, seconds});
    const std::string line =
        absl::StrCat("round ", round, ": region ", r.name(), " sat the round out (no aggregate)");
    (void)store_->AddEvent(EventTime(), "region_sat_out", 0, line);
    *out_ << "sextant: " << line << "\n" << std::flush;
  }
}

}  // namespace sextant
