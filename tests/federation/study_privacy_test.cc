#include "federation/study_privacy.h"

#include <cmath>
#include <random>
#include <vector>

#include "federation/rdp_accountant.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(StudyPrivacyAccountTest, ThreeTrialsComposeAsTheirRoundsInOneAccountant) {
  for (double q : {1.0, 0.25}) {
    RdpAccountantOptions options;
    options.noise_multiplier = 1.3;
    options.sampling_rate = q;
    absl::StatusOr<RdpAccountant> one = RdpAccountant::Create(options);
    ASSERT_TRUE(one.ok());
    one->Compose(12);
    StudyPrivacyAccount study(DefaultRdpOrders(q < 1), options.delta);
    for (int i = 0; i < 3; ++i) study.Add({q, 1.3, 4});
    EXPECT_EQ(study.rounds(), 12);
    EXPECT_NEAR(study.Epsilon(), one->Epsilon(), 1e-12) << "q=" << q;
  }
}

TEST(StudyPrivacyAccountTest, ATrialWithoutNoiseOrRoundsSpendsNothing) {
  StudyPrivacyAccount study(DefaultRdpOrders(false), 1e-5);
  study.Add({1.0, 0.0, 30});
  study.Add({1.0, 2.0, 0});
  EXPECT_EQ(study.Epsilon(), 0.0);
  EXPECT_EQ(study.rounds(), 0);
}

TEST(StudyPrivacyAccountTest, TrialsThatFitStopBeforeTheCap) {
  StudyPrivacyAccount study(DefaultRdpOrders(false), 1e-5);
  const TrialPrivacy trial{1.0, 2.0, 5};
  study.Add(trial);
  const double cap = 15.0;
  const int64_t fit = study.TrialsThatFit(trial, cap, 1000);
  ASSERT_GT(fit, 0);
  StudyPrivacyAccount more = study;
  for (int64_t i = 0; i < fit; ++i) more.Add(trial);
  EXPECT_LE(more.Epsilon(), cap);
  EXPECT_GT(more.EpsilonWith(trial), cap);
  EXPECT_EQ(study.TrialsThatFit(trial, cap, 2), std::min<int64_t>(fit, 2));
  EXPECT_EQ(study.TrialsThatFit({1.0, 0.0, 5}, cap, 7), 7);  // spends nothing: the limit
}

// The distribution's own weights, summed far into the tail.
double NumericMean(double eta, double gamma) {
  double w = 1, total = 0, weighted = 0;
  for (int k = 1; k < 200000 && w > 1e-300; ++k) {
    total += w;
    weighted += k * w;
    w *= (1 - gamma) * (k + eta) / (k + 1);
  }
  return weighted / total;
}

TEST(RandomStoppingTest, ExpectedTrialsMatchesTheDistribution) {
  for (double eta : {-0.5, 0.0, 0.5, 1.0, 3.0}) {
    for (double gamma : {0.01, 0.1, 0.5}) {
      RandomStopping r;
      r.eta = eta;
      r.gamma = gamma;
      EXPECT_NEAR(ExpectedTrials(r), NumericMean(eta, gamma), 1e-9 * NumericMean(eta, gamma))
          << "eta=" << eta << " gamma=" << gamma;
    }
  }
  RandomStopping geometric;
  geometric.gamma = 0.1;
  EXPECT_NEAR(ExpectedTrials(geometric), 10, 1e-12);  // eta = 1: mean 1 / gamma
}

TEST(RandomStoppingTest, GammaForMeanTrialsInvertsTheMean) {
  for (double eta : {0.0, 0.5, 1.0, 2.0}) {
    for (double mean : {2.0, 10.0, 50.0}) {
      absl::StatusOr<double> gamma = GammaForMeanTrials(eta, mean);
      ASSERT_TRUE(gamma.ok());
      RandomStopping r;
      r.eta = eta;
      r.gamma = *gamma;
      EXPECT_NEAR(ExpectedTrials(r), mean, 1e-9 * mean);
    }
  }
  EXPECT_FALSE(GammaForMeanTrials(1.0, 1.0).ok());
  EXPECT_FALSE(GammaForMeanTrials(-1.0, 10).ok());
}

// Corollary 4 of Papernot and Steinke (and dp_accounting's test of it): a trial that is
// rho-zCDP (RDP rho * lambda) repeated K ~ D(eta, gamma) times and the best released is
// (lambda, eps')-RDP with eps' = rho (lambda - 1) + log(E[K]) / (lambda - 1)
// + 2 (1 + eta) sqrt(rho log(1/gamma)) - eta rho above lambda* = 1 + sqrt(log E[K] / rho), and
// its value at lambda* below.
TEST(RandomStoppingTest, GaussianTrialsMatchTheClosedFormOfCorollary4) {
  for (double rho : {0.01, 1.0, 10.0}) {
    for (double gamma : {0.01, 0.1, 0.99}) {
      for (double eta : {0.0, 0.5, 1.0, 5.0}) {
        RandomStopping r;
        r.eta = eta;
        r.gamma = gamma;
        const double mean = ExpectedTrials(r);
        const double p = std::min(rho, std::log(1 / gamma));
        const std::vector<double> orders = {1,
                                            1.1,
                                            2,
                                            std::sqrt(std::log(1 / gamma) / p),
                                            1 + std::sqrt(std::log(mean) / p),
                                            3,
                                            5,
                                            10,
                                            100,
                                            1000,
                                            10000};
        std::vector<double> trial;
        for (double a : orders) trial.push_back(p * a);
        const std::vector<double> rdp = RandomStoppingRdp(r, orders, trial);
        const double common = 2 * (1 + eta) * std::sqrt(p * std::log(1 / gamma)) - eta * p;
        for (size_t i = 0; i < orders.size(); ++i) {
          const double a = orders[i];
          const double want = a <= 1 + std::sqrt(std::log(mean) / p)
                                  ? 2 * std::sqrt(p * std::log(mean)) + common
                                  : p * (a - 1) + std::log(mean) / (a - 1) + common;
          EXPECT_NEAR(rdp[i], want, 1e-7 * std::max(1.0, want))
              << "rho=" << p << " gamma=" << gamma << " eta=" << eta << " order=" << a;
        }
      }
    }
  }
}

// dp_accounting's pure-DP Poisson case: a Laplace trial of epsilon eps at
// lambda = 1 + 1 / (e^eps - 1) gives its own RDP + log(mean) (e^eps - 1).
TEST(RandomStoppingTest, PurePoissonCaseMatchesTheClosedForm) {
  const double cases[][2] = {{1, 1.5}, {0.1, 2}, {10, 10}, {0.001, 100}, {2, 1000}, {1, 1e10}};
  for (const auto& c : cases) {
    const double eps = c[0], mean = c[1];
    auto laplace = [&](double a) {  // Mironov 2017, Prop. 6
      return eps + std::log1p((a - 1) * std::expm1(eps * (1 - 2 * a)) / (2 * a - 1)) / (a - 1);
    };
    const double alpha = 1 + 1 / std::expm1(eps);
    const std::vector<double> orders = {alpha, 1e10, 1e100};
    std::vector<double> trial;
    for (double a : orders) trial.push_back(laplace(a));
    RandomStopping r;
    r.distribution = RandomStopping::Distribution::kPoisson;
    r.mean = mean;
    const double want = laplace(alpha) + std::log(mean) * std::expm1(eps);
    const double got = RandomStoppingRdp(r, orders, trial)[0];
    if (eps <= 2) {
      EXPECT_NEAR(got / want, 1, 1e-3) << "eps=" << eps << " mean=" << mean;
    } else {
      // The closed form grows with e^eps; the bound at the order 1e10 (eps + mean * delta'),
      // which holds at alpha too because RDP does not fall as the order rises, is tighter.
      EXPECT_LT(got, want);
      EXPECT_GE(got, laplace(alpha)) << "eps=" << eps << " mean=" << mean;
    }
  }
}

TEST(RandomStoppingTest, PureDpLimitIsThreeTimesForGeometricAndTwiceForLogarithmic) {
  // Liu and Talwar's 3 eps for the geometric distribution, and the paper's 2 eps for the
  // logarithmic one, as the orders grow.
  const double eps = 0.5;
  const std::vector<double> orders = {10, 1e3, 1e6, 1e9};
  const std::vector<double> trial(orders.size(), eps);
  for (auto [eta, times] : {std::pair{1.0, 3.0}, std::pair{0.0, 2.0}}) {
    RandomStopping r;
    r.eta = eta;
    r.gamma = 0.05;
    EXPECT_NEAR(RandomStoppingRdp(r, orders, trial).back(), times * eps, 1e-4) << "eta=" << eta;
  }
}

TEST(RandomStoppingTest, StudyEpsilonIsASmallMultipleOfOneTrialsWhateverTheTrials) {
  // A DP federated trial of 30 rounds at sigma 2.2, every client each round: epsilon about 2.
  const std::vector<double> orders = DefaultRdpOrders(false);
  StudyPrivacyAccount one(orders, 1e-5);
  const TrialPrivacy trial{1.0, 2.2, 30};
  one.Add(trial);
  const double trial_epsilon = one.Epsilon();
  RandomStopping r;
  r.eta = 1;
  r.gamma = *GammaForMeanTrials(1, 10);
  const double stopped = RandomStoppingEpsilon(r, orders, one.TrialRdp(trial), 1e-5);
  StudyPrivacyAccount ten(orders, 1e-5);
  for (int i = 0; i < 10; ++i) ten.Add(trial);
  EXPECT_GT(stopped, trial_epsilon);
  EXPECT_LE(stopped, 3 * trial_epsilon);
  EXPECT_LT(stopped, ten.Epsilon());
}

TEST(RandomStoppingTest, DrawsFollowTheDistribution) {
  std::mt19937_64 random(7);
  for (double eta : {0.0, 1.0, 2.0}) {
    RandomStopping r;
    r.eta = eta;
    r.gamma = *GammaForMeanTrials(eta, 8);
    double sum = 0;
    int64_t smallest = 1 << 30;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const int64_t k = DrawTrials(r, random);
      smallest = std::min(smallest, k);
      sum += static_cast<double>(k);
    }
    EXPECT_EQ(smallest, 1) << "eta=" << eta;
    EXPECT_NEAR(sum / n, 8, 0.3) << "eta=" << eta;
  }
  RandomStopping p;
  p.distribution = RandomStopping::Distribution::kPoisson;
  p.mean = 6;
  double sum = 0;
  for (int i = 0; i < 40000; ++i) sum += static_cast<double>(DrawTrials(p, random));
  EXPECT_NEAR(sum / 40000, 6, 0.1);
}

TEST(DeltaFromRdpTest, InvertsTheEpsilonConversion) {
  const std::vector<double> orders = {2, 8, 32};
  const std::vector<double> rdp = {0.1, 0.4, 1.6};
  const double eps = RdpAccountant::EpsilonFromRdp(orders, rdp, 1e-6);
  EXPECT_NEAR(DeltaFromRdp(orders, rdp, eps), 1e-6, 1e-12);
  EXPECT_LE(DeltaFromRdp(orders, rdp, 0.0), 1.0);
  EXPECT_GT(DeltaFromRdp(orders, rdp, eps / 2), 1e-6);
}

}  // namespace
}  // namespace sextant
