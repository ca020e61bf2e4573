// The privacy a whole tuning study spends on the same clients, when every trial is a federated
// run with client-level DP: RDP composition across trials (always valid), and the private
// selection of Papernot and Steinke, "Hyperparameter Tuning with Renyi Differential Privacy"
// (ICLR 2022), where the number of trials is drawn at random and only the best is released.
#ifndef SEXTANT_FEDERATION_STUDY_PRIVACY_H_
#define SEXTANT_FEDERATION_STUDY_PRIVACY_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// What one trial spends: `rounds` rounds of the Gaussian mechanism with noise multiplier sigma,
// each client taking part with probability sampling_rate.
struct TrialPrivacy {
  double sampling_rate = 1.0;
  double noise_multiplier = 0.0;  // 0: the trial spent nothing (no DP round ran)
  int64_t rounds = 0;
};

// One privacy account over the trials of a study: their RDP summed order by order, then
// converted to (epsilon, delta) as RdpAccountant does. Not thread-safe.
class StudyPrivacyAccount {
 public:
  // orders: DefaultRdpOrders(some trial samples its clients), or any orders above 1.
  StudyPrivacyAccount(std::vector<double> orders, double delta);

  void Add(const TrialPrivacy& trial);
  // Adds a trial of `rounds` rounds whose RDP at each of orders() is rdp (TrialRdp's).
  void AddRdp(const std::vector<double>& rdp, int64_t rounds);
  // The study's epsilon at delta so far (0 before any round).
  double Epsilon() const;
  // Its epsilon if `trial` were added too.
  double EpsilonWith(const TrialPrivacy& trial) const;
  // How many more trials like `trial` fit before epsilon would pass max_epsilon (at most
  // `limit`, which bounds the search when a trial spends nothing).
  int64_t TrialsThatFit(const TrialPrivacy& trial, double max_epsilon, int64_t limit) const;

  int64_t rounds() const { return rounds_; }
  const std::vector<double>& orders() const { return orders_; }
  double delta() const { return delta_; }
  // RDP of one trial at each of orders().
  std::vector<double> TrialRdp(const TrialPrivacy& trial) const;

 private:
  std::vector<double> orders_;
  double delta_;
  std::vector<double> rdp_;
  int64_t rounds_ = 0;
};

// Random stopping: the study runs K trials, K drawn from `distribution`, and releases only the
// best. Its privacy does not grow with K as composition does.
struct RandomStopping {
  enum class Distribution { kTruncatedNegativeBinomial, kPoisson };
  Distribution distribution = Distribution::kTruncatedNegativeBinomial;
  // Truncated negative binomial D(eta, gamma): P[K = k] proportional to
  // (1 - gamma)^k * prod_{l < k} (l + eta) / (l + 1), k >= 1; eta in (-1, inf), gamma in (0, 1).
  // eta = 1 is the geometric distribution, eta = 0 the logarithmic one.
  double eta = 1.0;
  double gamma = 0.1;
  // Poisson: K ~ Poisson(mean), K = 0 meaning no trial (nothing is released).
  double mean = 10.0;
};

// E[K] of the distribution: eta (1 - gamma) / (gamma (1 - gamma^eta)), or
// (1/gamma - 1) / log(1/gamma) for eta = 0; the mean for Poisson.
double ExpectedTrials(const RandomStopping& r);

// The gamma that gives the truncated negative binomial of shape eta the expected number of
// trials `mean` (> 1). InvalidArgument for eta <= -1 or mean <= 1.
absl::StatusOr<double> GammaForMeanTrials(double eta, double mean);

// RDP at each order of releasing the best of K ~ r trials, each of which has RDP trial_rdp[i]
// at orders[i]:
//  - truncated negative binomial (the paper's Theorem 2): at order lambda,
//      eps(lambda) + min over orders lambda' of [(1 + eta)(1 - 1/lambda') eps(lambda')
//                                                + (1 + eta) log(1/gamma) / lambda']
//      + log(E[K]) / (lambda - 1);
//  - Poisson (its Theorem 6): eps(lambda) + mean * delta'(lambda) + log(mean) / (lambda - 1),
//    delta'(lambda) the trial's delta at epsilon log(1 + 1/(lambda - 1)).
std::vector<double> RandomStoppingRdp(const RandomStopping& r, absl::Span<const double> orders,
                                      absl::Span<const double> trial_rdp);

// The study's epsilon at delta under random stopping, from one trial's RDP per order.
double RandomStoppingEpsilon(const RandomStopping& r, absl::Span<const double> orders,
                             absl::Span<const double> trial_rdp, double delta);

// The delta of a mechanism with RDP rdp[i] at orders[i] at a given epsilon: the smallest over
// orders of exp((a - 1)(rdp - epsilon + log(1 - 1/a))) / a (the inverse of the conversion
// RdpAccountant uses), at most 1.
double DeltaFromRdp(absl::Span<const double> orders, absl::Span<const double> rdp,
                    double epsilon);

// Draws K from r's distribution with `random`.
int64_t DrawTrials(const RandomStopping& r, std::mt19937_64& random);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_STUDY_PRIVACY_H_
