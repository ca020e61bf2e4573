#include "aggregator/tier_settings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_plan.h"
#include "aggregator/sender_gate.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "federation/secure_quantizer.h"

namespace sextant {

bool Buffered(const v1::Federation& f) { return f.mode() == "buffered"; }

BufferPolicy StalenessPolicy(const v1::Federation& f) {
  BufferPolicy b;
  b.enabled = true;
  b.max_staleness = f.max_staleness();
  if (f.staleness_weighting() == "constant") b.weighting = BufferPolicy::Weighting::kConstant;
  return b;
}

int64_t RegionBufferSize(const v1::Federation& f, int64_t clients) {
  const int64_t regions = std::max(1, f.regions_size());
  return std::clamp<int64_t>((f.buffer_size() + regions - 1) / regions, 1,
                             std::max<int64_t>(1, clients));
}

int64_t RegionVersionStarts(const v1::Federation& f, int64_t clients) {
  const int64_t total = std::max<int64_t>(1, TotalClients(f));
  const int64_t per = ClientsPerRound(f);
  if (per >= total) return 0;
  const int64_t share = (per * clients + total - 1) / total;
  return std::clamp<int64_t>(std::max({share, RegionBufferSize(f, clients),
                                       f.secure_aggregation() ? int64_t{2} : int64_t{1}}),
                             1, std::max<int64_t>(1, clients));
}

SecAggQuantization BaseQuantization(const v1::Federation& f) {
  SecAggQuantization q;
  q.bits = 16;
  q.clip = 4.0;
  q.max_weight = SecAggMaxWeight(f);
  if (f.has_dp()) q.clip = std::max(q.clip, DpClipNorm(f) + 6 * MaxClientNoiseStddev(f));
  return q;
}

double MaxClientWeight(const v1::Federation& f) {
  return static_cast<double>(BaseQuantization(f).max_weight);
}

double StageTimeoutSeconds(const v1::Federation& f) {
  return f.round_deadline_seconds() > 0 ? f.round_deadline_seconds() : 30.0;
}

std::unique_ptr<ServerOptimizer> MakeServerOptimizer(const v1::Federation& f) {
  const double lr = f.server_lr() > 0 ? f.server_lr() : 1.0;
  if (f.server_optimizer() == "fedavgm") return NewFedAvgMOptimizer({lr, 0.9});
  AdaptiveOptions a;
  a.server_lr = lr;
  if (f.server_optimizer() == "fedadam") return NewFedAdamOptimizer(a);
  if (f.server_optimizer() == "fedyogi") return NewFedYogiOptimizer(a);
  if (f.server_optimizer() == "fedadagrad") return NewFedAdagradOptimizer(a);
  return NewFedAvgOptimizer({lr});
}

absl::StatusOr<TierOptions> GlobalTierOptions(const v1::Federation& f,
                                              const std::string& experiment_id, size_t model_size,
                                              const std::string& staging_dir) {
  if (f.reproducible() && model_size >= RoundCoordinatorOptions{}.file_staging_from) {
    return absl::InvalidArgumentError(absl::StrCat(
        "federation.reproducible keeps every update of a round in memory until it closes, and "
        "this model's ",
        model_size, " parameters are staged in files instead; set federation.reproducible: false"));
  }
  TierOptions o;
  o.coordinator.experiment_id = experiment_id;
  o.coordinator.model_size = model_size;
  o.coordinator.staging_dir = staging_dir;  // a large model's region update is staged there
  o.coordinator.ordered = f.reproducible();
  o.coordinator.min_updates = std::max(1, f.min_clients());
  o.coordinator.deadline_seconds = f.round_deadline_seconds();
  if (Buffered(f)) {
    o.coordinator.min_updates = f.buffer_size();
    o.coordinator.deadline_seconds = 0;
    o.coordinator.buffer = StalenessPolicy(f);
    // Reproducible: a region's second push waits for the next step, whatever its timing.
    o.coordinator.buffer.distinct_senders = f.reproducible();
  }
  // Only a region's own aggregator speaks for it, for at most its clients.
  for (const auto& r : f.regions()) o.policy.region_clients[r.name()] = r.clients();
  o.policy.max_client_weight = MaxClientWeight(f);
  o.secure = f.hide_region_sums();
  o.secagg.stage_timeout_seconds = StageTimeoutSeconds(f);
  o.secagg.quantization = BaseQuantization(f);
  o.secagg.staging_dir = staging_dir;  // the regions' masked sums are assembled there
  return o;
}

absl::Status ApplyExperiment(const v1::ExperimentSpec& spec, RegionalAggregatorOptions* o) {
  if (!spec.has_federation()) {
    return absl::InvalidArgumentError("the experiment has no federation block");
  }
  const v1::Federation& f = spec.federation();
  const auto region =
      std::find_if(f.regions().begin(), f.regions().end(),
                   [&](const v1::FederatedRegion& r) { return r.name() == o->region; });
  if (region == f.regions().end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the experiment has no region ", QuotedId(o->region)));
  }
  // The most clients one aggregator serves: as many as its sender gate keeps weights for.
  if (region->clients() < 0 || static_cast<size_t>(region->clients()) > TierPolicy{}.max_senders) {
    return absl::InvalidArgumentError(absl::StrCat("region ", o->region, " has ", region->clients(),
                                                   " clients; at most ", TierPolicy{}.max_senders,
                                                   " per aggregator"));
  }
  o->clients.clear();
  for (int i = 0; i < region->clients(); ++i) o->clients.push_back(ClientId(o->region, i));
  o->max_client_weight = MaxClientWeight(f);
  // Robust rules run where client updates are in the clear: at the regional aggregators.
  const bool robust = !f.aggregation().empty() && f.aggregation() != "fedavg";
  SEXTANT_ASSIGN_OR_RETURN(
      o->rule, MakeAggregationRule(robust ? f.aggregation() : "fedavg", f.trim_fraction(),
                                   f.byzantine_clients(), f.krum_selected()));
  o->ordered = f.reproducible();
  o->secure_aggregation = f.secure_aggregation();
  o->hide_region_sum = f.secure_aggregation() && f.hide_region_sums();
  if (o->secure_aggregation) {
    o->quantization = BaseQuantization(f);
    o->stage_timeout_seconds = StageTimeoutSeconds(f);
    o->ring_clients = o->hide_region_sum ? TotalClients(f) : 0;
    const SecAggQuantization& q = o->quantization;
    SEXTANT_RETURN_IF_ERROR(SecureQuantizer::Create({q.clip, q.bits, q.max_weight, 2, 0}).status());
  }
  // Central DP over plaintext updates: the aggregator enforces each client's bound itself.
  o->dp_clip_norm = o->secure_aggregation ? 0 : DpClipNorm(f);
  o->buffer = Buffered(f) ? StalenessPolicy(f) : BufferPolicy{};
  if (o->buffer.enabled) o->buffer.starts_per_version = RegionVersionStarts(f, region->clients());
  if (o->buffer.enabled && (o->rule.robust() || o->hide_region_sum)) {
    return absl::InvalidArgumentError(
        "buffered rounds fold a weighted mean of plaintext or secure updates: not with a robust "
        "federation.aggregation or hide_region_sums");
  }
  return absl::OkStatus();
}

}  // namespace sextant
