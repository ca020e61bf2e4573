#include "orchestrator/federated/federated_billing.h"

#include <algorithm>
#include <utility>

namespace sextant {

FederatedBilling::FederatedBilling(FederatedPlacement placement, const Clock* clock,
                                   absl::Time run_start, std::vector<CostRow> prior)
    : placement_(std::move(placement)),
      clock_(clock),
      run_start_(run_start),
      ledger_offset_(absl::ToDoubleSeconds(clock->Now() - run_start)),
      ledger_(clock),
      prior_(std::move(prior)) {
  for (const CostRow& c : prior_) {
    if (c.kind == "transfer") {
      transfer_ += c.cost;
    } else if (c.kind != "trial") {
      prior_total_ += c.cost;
    }
  }
  closed_at_ = Committed();
  closed_transfer_ = transfer_;
  closed_time_ = clock->Now();
}

int64_t FederatedBilling::Start(const std::string& region, bool aggregator) {
  return StartOn(placement_.For(region, aggregator));
}

int64_t FederatedBilling::StartOn(const PoolOffer& pool) {
  const int64_t id = ledger_.Launch(pool.owner, pool.offer.billing);
  live_[id] = true;
  return id;
}

void FederatedBilling::Stop(int64_t id) {
  auto it = live_.find(id);
  if (it == live_.end() || !it->second) return;
  it->second = false;
  (void)ledger_.Terminate(id);
}

void FederatedBilling::StopAll() {
  for (auto& [id, live] : live_) {
    if (live) (void)ledger_.Terminate(id);
    live = false;
  }
}

void FederatedBilling::MeterTransfer(const std::map<std::string, TransferMeter::Bytes>& totals) {
  const double now = Seconds(clock_->Now());
  for (const auto& [sender, bytes] : totals) {
    const std::optional<FederatedPlacement::TransferPrice> price =
        placement_.TransferPerByte(sender);
    if (!price) continue;  // not a region's aggregator
    TransferMeter::Bytes& metered = metered_[sender];
    const int64_t down = bytes.sent - metered.sent, up = bytes.received - metered.received;
    const int64_t fresh = down + up;
    if (fresh <= 0) continue;
    metered = bytes;
    const double cost = static_cast<double>(down) * price->down + static_cast<double>(up) * price->up;
    transfer_ += cost;
    transfers_.push_back({"transfer", fresh, "transfer", sender, "", now, now, cost});
  }
}

double FederatedBilling::Committed() const {
  return prior_total_ + ledger_.Committed() + transfer_;
}

double FederatedBilling::CloseRound() {
  const double now = Committed();
  const double cost = now - closed_at_;
  const absl::Time t = clock_->Now();
  last_rounds_.push_back({absl::ToDoubleSeconds(t - closed_time_), transfer_ - closed_transfer_});
  if (last_rounds_.size() > 3) last_rounds_.pop_front();
  closed_at_ = now;
  closed_time_ = t;
  closed_transfer_ = transfer_;
  return cost;
}

double FederatedBilling::KeepingCost(absl::Duration longer) const {
  const absl::Time until = clock_->Now() + longer;
  double compute = 0;
  for (const auto& [id, live] : live_) {
    if (live) compute += ledger_.ExtraUntil(id, until);
  }
  return compute;
}

double FederatedBilling::NextRoundProjection(absl::Duration then) const {
  if (last_rounds_.empty()) return 0;
  double seconds = 0, transfer = 0;
  for (const ClosedRound& r : last_rounds_) {
    seconds = std::max(seconds, r.seconds);
    transfer = std::max(transfer, r.transfer);
  }
  return KeepingCost(absl::Seconds(seconds) + then) + transfer;
}

std::vector<CostRow> FederatedBilling::Rows() const {
  std::vector<CostRow> rows = prior_;
  for (const InstanceBill& b : ledger_.Bills()) {
    const double end =
        b.terminated_at > 0 ? b.terminated_at : Seconds(clock_->Now()) - ledger_offset_;
    rows.push_back({"instance", b.id, b.owner.pool, b.owner.region, MarketName(b.owner.market),
                    ledger_offset_ + b.launched_at, ledger_offset_ + end, b.cost});
  }
  rows.insert(rows.end(), transfers_.begin(), transfers_.end());
  return rows;
}

}  // namespace sextant
