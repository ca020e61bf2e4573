#include "orchestrator/federated/federation_settings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_plan.h"

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

std::vector<std::string> AggregatorFlags(const v1::Federation& f, const v1::FederatedRegion& r,
                                         const std::string& experiment_id, size_t model_size) {
  std::vector<std::string> argv = {"--region",
                                   r.name(),
                                   "--experiment-id",
                                   experiment_id,
                                   "--model-size",
                                   absl::StrCat(model_size),
                                   "--clients",
                                   absl::StrCat(r.clients()),
                                   "--max-client-weight",
                                   absl::StrCat(MaxClientWeight(f))};
  // Robust rules run where client updates are in the clear: at the regional aggregators.
  if (!f.aggregation().empty() && f.aggregation() != "fedavg") {
    argv.insert(argv.end(), {"--aggregation", f.aggregation(), "--trim-fraction",
                             absl::StrCat(f.trim_fraction()), "--byzantine",
                             absl::StrCat(f.byzantine_clients()), "--krum-selected",
                             absl::StrCat(f.krum_selected())});
  }
  if (f.secure_aggregation()) {
    const SecAggQuantization q = BaseQuantization(f);
    argv.insert(argv.end(), {"--secure-aggregation", "1", "--secagg-clip", absl::StrCat(q.clip),
                             "--secagg-bits", absl::StrCat(q.bits), "--secagg-max-weight",
                             absl::StrCat(q.max_weight), "--secagg-stage-timeout",
                             absl::StrCat(StageTimeoutSeconds(f))});
    if (f.hide_region_sums()) {
      argv.insert(argv.end(), {"--hide-region-sum", "1", "--secagg-ring-clients",
                               absl::StrCat(TotalClients(f))});
    }
  }
  // Central DP over plaintext updates: the aggregator enforces each client's bound itself.
  if (DpClipNorm(f) > 0 && !f.secure_aggregation()) {
    argv.insert(argv.end(), {"--dp-clip-norm", absl::StrCat(DpClipNorm(f))});
  }
  if (f.reproducible()) argv.insert(argv.end(), {"--reproducible", "1"});
  if (Buffered(f)) {
    argv.insert(argv.end(), {"--max-staleness", absl::StrCat(f.max_staleness()),
                             "--staleness-weighting", f.staleness_weighting()});
  }
  return argv;
}

}  // namespace sextant
