#include "aggregator/federation_plan.h"

#include <algorithm>
#include <cmath>

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

int64_t ClientsPerRound(const v1::Federation& f) {
  const int64_t total = TotalClients(f);
  const double per = f.clients_per_round();
  int64_t k = per <= 1 ? static_cast<int64_t>(std::ceil(per * static_cast<double>(total)))
                       : static_cast<int64_t>(per);
  return std::clamp<int64_t>(std::max<int64_t>(k, f.min_clients()), 1, std::max<int64_t>(total, 1));
}

std::vector<int64_t> RegionQuotas(const v1::Federation& f) {
  std::vector<int64_t> quota;
  const int regions = f.regions_size();
  const int64_t total = TotalClients(f);
  const int64_t k = ClientsPerRound(f);
  if (!f.secure_aggregation() || regions == 0 || total <= 0 || k < 2 * int64_t{regions}) return {};
  // Each region's proportional share, rounded down but at least 2; then the clients left over go
  // one each to the regions with the largest remainders that still have clients to give.
  std::vector<double> remainder(regions);
  int64_t given = 0;
  for (int i = 0; i < regions; ++i) {
    const int64_t n = f.regions(i).clients();
    const double share =
        static_cast<double>(k) * static_cast<double>(n) / static_cast<double>(total);
    quota.push_back(std::min<int64_t>(n, std::max<int64_t>(2, static_cast<int64_t>(share))));
    remainder[i] = share - static_cast<double>(quota.back());
    given += quota.back();
  }
  while (given != k) {
    int best = -1;
    for (int i = 0; i < regions; ++i) {
      const bool can = given < k ? quota[i] < f.regions(i).clients() : quota[i] > 2;
      if (!can) continue;
      if (best < 0 ||
          (given < k ? remainder[i] > remainder[best] : remainder[i] < remainder[best])) {
        best = i;
      }
    }
    if (best < 0) break;
    const int64_t step = given < k ? 1 : -1;
    quota[best] += step;
    remainder[best] -= static_cast<double>(step);
    given += step;
  }
  return quota;
}

RdpAccountantOptions DpAccountantOptions(const v1::Federation& f) {
  const v1::DifferentialPrivacy& dp = f.dp();
  RdpAccountantOptions a;
  a.noise_multiplier = dp.noise_multiplier();
  a.sampling_rate = static_cast<double>(ClientsPerRound(f)) /
                    static_cast<double>(std::max<int64_t>(1, TotalClients(f)));
  a.delta = dp.delta() > 0 ? dp.delta() : 1e-5;
  if (dp.target_epsilon() > 0) a.target_epsilon = dp.target_epsilon();
  if (a.sampling_rate < 1) a.orders = DefaultRdpOrders(/*sampled=*/true);
  return a;
}

}  // namespace sextant
