#include "federation/study_privacy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "federation/rdp_accountant.h"

namespace sextant {

StudyPrivacyAccount::StudyPrivacyAccount(std::vector<double> orders, double delta)
    : orders_(std::move(orders)), delta_(delta), rdp_(orders_.size(), 0.0) {}

std::vector<double> StudyPrivacyAccount::TrialRdp(const TrialPrivacy& trial) const {
  std::vector<double> rdp(orders_.size(), 0.0);
  if (trial.noise_multiplier <= 0 || trial.rounds <= 0) return rdp;
  for (size_t i = 0; i < orders_.size(); ++i) {
    rdp[i] = static_cast<double>(trial.rounds) *
             RdpAccountant::GaussianRdp(trial.sampling_rate, trial.noise_multiplier, orders_[i]);
  }
  return rdp;
}

void StudyPrivacyAccount::Add(const TrialPrivacy& trial) {
  AddRdp(TrialRdp(trial), trial.noise_multiplier > 0 ? trial.rounds : 0);
}

void StudyPrivacyAccount::AddRdp(const std::vector<double>& rdp, int64_t rounds) {
  for (size_t i = 0; i < rdp_.size(); ++i) rdp_[i] += rdp[i];
  if (rounds > 0) rounds_ += rounds;
}

double StudyPrivacyAccount::Epsilon() const {
  return rounds_ > 0 ? RdpAccountant::EpsilonFromRdp(orders_, rdp_, delta_) : 0.0;
}

double StudyPrivacyAccount::EpsilonWith(const TrialPrivacy& trial) const {
  StudyPrivacyAccount with = *this;
  with.Add(trial);
  return with.Epsilon();
}

int64_t StudyPrivacyAccount::TrialsThatFit(const TrialPrivacy& trial, double max_epsilon,
                                           int64_t limit) const {
  StudyPrivacyAccount with = *this;
  const std::vector<double> rdp = TrialRdp(trial);
  const int64_t rounds = trial.noise_multiplier > 0 ? trial.rounds : 0;
  int64_t n = 0;
  while (n < limit) {
    with.AddRdp(rdp, rounds);
    if (with.Epsilon() > max_epsilon) break;
    ++n;
  }
  return n;
}

double ExpectedTrials(const RandomStopping& r) {
  if (r.distribution == RandomStopping::Distribution::kPoisson) return r.mean;
  if (r.eta == 0) return (1 / r.gamma - 1) / std::log(1 / r.gamma);
  return r.eta * (1 - r.gamma) / (r.gamma * (1 - std::pow(r.gamma, r.eta)));
}

absl::StatusOr<double> GammaForMeanTrials(double eta, double mean) {
  if (!(eta > -1) || !std::isfinite(eta)) {
    return absl::InvalidArgumentError("eta must be above -1");
  }
  if (!(mean > 1) || !std::isfinite(mean)) {
    return absl::InvalidArgumentError("the expected number of trials must be above 1");
  }
  // E[K] falls from +inf (gamma -> 0) to 1 (gamma -> 1): bisect on log(gamma).
  RandomStopping r;
  r.eta = eta;
  double lo = -50, hi = 0;  // log gamma
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    r.gamma = std::exp(mid);
    (ExpectedTrials(r) > mean ? lo : hi) = mid;
  }
  return std::exp((lo + hi) / 2);
}

double DeltaFromRdp(absl::Span<const double> orders, absl::Span<const double> rdp,
                    double epsilon) {
  double best = 1.0;
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double log_delta = (a - 1) * (rdp[i] - epsilon + std::log1p(-1 / a)) - std::log(a);
    best = std::min(best, std::exp(log_delta));
  }
  return best;
}

std::vector<double> RandomStoppingRdp(const RandomStopping& r, absl::Span<const double> orders,
                                      absl::Span<const double> trial_rdp) {
  const double inf = std::numeric_limits<double>::infinity();
  const double expected = ExpectedTrials(r);
  std::vector<double> out(orders.size(), inf);  // the theorems hold at orders above 1
  if (r.distribution == RandomStopping::Distribution::kPoisson) {
    for (size_t i = 0; i < orders.size(); ++i) {
      const double a = orders[i];
      if (a <= 1) continue;
      const double delta_hat = DeltaFromRdp(orders, trial_rdp, std::log1p(1 / (a - 1)));
      out[i] = trial_rdp[i] + r.mean * delta_hat + std::log(r.mean) / (a - 1);
    }
  } else {
    // The order lambda' of the theorem's second term is free (>= 1): the best of the orders.
    double second = inf;
    for (size_t j = 0; j < orders.size(); ++j) {
      const double a = orders[j];
      if (a < 1) continue;
      second = std::min(second, (1 + r.eta) * ((1 - 1 / a) * trial_rdp[j] +
                                               std::log(1 / r.gamma) / a));
    }
    for (size_t i = 0; i < orders.size(); ++i) {
      if (orders[i] > 1) out[i] = trial_rdp[i] + second + std::log(expected) / (orders[i] - 1);
    }
  }
  // RDP does not fall as the order rises: an order's bound holds at every order below it.
  std::vector<double> bounded(out);
  for (size_t i = 0; i < orders.size(); ++i) {
    for (size_t j = 0; j < orders.size(); ++j) {
      if (orders[j] >= orders[i]) bounded[i] = std::min(bounded[i], out[j]);
    }
  }
  return bounded;
}

double RandomStoppingEpsilon(const RandomStopping& r, absl::Span<const double> orders,
                             absl::Span<const double> trial_rdp, double delta) {
  const std::vector<double> rdp = RandomStoppingRdp(r, orders, trial_rdp);
  return RdpAccountant::EpsilonFromRdp(orders, rdp, delta);
}

int64_t DrawTrials(const RandomStopping& r, std::mt19937_64& random) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (r.distribution == RandomStopping::Distribution::kPoisson) {
    return std::poisson_distribution<int64_t>(r.mean)(random);
  }
  // Inverse CDF over the weights w_1 = 1, w_{k+1} = w_k (1 - gamma)(k + eta) / (k + 1), whose
  // sum is (gamma^-eta - 1) / (eta (1 - gamma)), or log(1/gamma) / (1 - gamma) for eta = 0.
  const double total = r.eta == 0 ? std::log(1 / r.gamma) / (1 - r.gamma)
                                  : (std::pow(r.gamma, -r.eta) - 1) / (r.eta * (1 - r.gamma));
  const double u = uniform(random) * total;
  double w = 1, cumulative = 0;
  for (int64_t k = 1;; ++k) {
    cumulative += w;
    if (u < cumulative || w < 1e-300) return k;
    w *= (1 - r.gamma) * (static_cast<double>(k) + r.eta) / static_cast<double>(k + 1);
  }
}

}  // namespace sextant
