#include "aggregator/federation_plan.h"

#include "federation/dp_noise.h"

namespace sextant {

int64_t TotalClients(const v1::Federation& federation) {
  int64_t n = 0;
  for (const auto& r : federation.regions()) n += r.clients();
  return n;
}

int64_t SecAggMaxWeight(const v1::Federation& federation) {
  if (federation.has_dp()) return 1;
  return federation.examples_per_client() > 0 ? federation.examples_per_client() : 60000;
}

double DpClipNorm(const v1::Federation& federation) {
  return federation.has_dp() && federation.dp().clip_norm() > 0 ? federation.dp().clip_norm() : 0;
}

double DistributedNoiseMultiplier(const v1::Federation& federation) {
  if (DpClipNorm(federation) == 0 || federation.dp().noise() != "distributed") return 0;
  return federation.dp().noise_multiplier();
}

double MaxClientNoiseStddev(const v1::Federation& federation) {
  return DistributedNoiseStddev(DistributedNoiseMultiplier(federation), DpClipNorm(federation), 2);
}

}  // namespace sextant
