#include "federation/rdp_accountant.h"

#include <cmath>
#include <vector>

#include "federation/dp_noise.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(RdpAccountantTest, GaussianRdpIsAlphaOverTwoSigmaSquared) {
  // Mironov 2017, Prop. 7.
  for (double alpha : {1.5, 2.0, 3.14159, 32.0}) {
    for (double sigma : {0.7, 2.71828, 10.0}) {
      EXPECT_DOUBLE_EQ(RdpAccountant::GaussianRdp(1.0, sigma, alpha), alpha / (2 * sigma * sigma));
    }
  }
}

TEST(RdpAccountantTest, SubsampledGaussianAtOrderTwoHasClosedForm) {
  // A_2 = (1-q)^2 + 2q(1-q) + q^2 e^{1/sigma^2} = 1 + q^2 (e^{1/sigma^2} - 1).
  for (double q : {0.001, 0.01, 0.3}) {
    for (double sigma : {0.5, 1.0, 4.0}) {
      EXPECT_NEAR(RdpAccountant::GaussianRdp(q, sigma, 2),
                  std::log1p(q * q * std::expm1(1 / (sigma * sigma))), 1e-15);
    }
  }
}

TEST(RdpAccountantTest, SubsampledGaussianMatchesGoogleDpAccountingReference) {
  // google/differential-privacy, dp_accounting/rdp/rdp_privacy_accountant_test.py,
  // test_compute_rdp_poisson_sampled_gaussian: q = 0.01, sigma = 2.5, 50 steps.
  const double q = 0.01, sigma = 2.5;
  EXPECT_NEAR(50 * RdpAccountant::GaussianRdp(q, sigma, 5), 2.18075656e-03, 2.18075656e-03 * 1e-4);
  EXPECT_NEAR(50 * RdpAccountant::GaussianRdp(q, sigma, 50), 2.38460375e-02, 2.38460375e-02 * 1e-4);
  EXPECT_NEAR(50 * RdpAccountant::GaussianRdp(q, sigma, 100), 1.67416308e02, 1.67416308e02 * 1e-4);
}

TEST(RdpAccountantTest, ConversionMatchesPublishedPureDpCase) {
  // Same source, test_compute_epsilon_delta_pure_dp: constant RDP 1.1 at orders 2..32,
  // delta 1e-5 -> epsilon 1.32783806176 (at order 32).
  std::vector<double> orders, rdp;
  for (int a = 2; a <= 32; ++a) {
    orders.push_back(a);
    rdp.push_back(1.1);
  }
  EXPECT_NEAR(RdpAccountant::EpsilonFromRdp(orders, rdp, 1e-5), 1.32783806176, 1e-9);
}

TEST(RdpAccountantTest, GaussianCalibratedForEpsilonOneAtDeltaOneInAMillion) {
  // Same source, test_compute_epsilon_delta_gaussian: sigma = 4.530877117 gives (1, 1e-6)-DP
  // over orders 1.000..99.999.
  std::vector<double> orders;
  for (int i = 1001; i < 100000; ++i) orders.push_back(0.001 * i);
  RdpAccountantOptions o;
  o.noise_multiplier = 4.530877117;
  o.delta = 1e-6;
  o.orders = orders;
  auto acc = RdpAccountant::Create(o);
  ASSERT_TRUE(acc.ok());
  acc->Compose();
  EXPECT_NEAR(acc->Epsilon(), 1.0, 1e-6);
}

TEST(RdpAccountantTest, EpsilonGrowsWithRoundsAndTheRunStopsAtTheTarget) {
  RdpAccountantOptions o;
  o.noise_multiplier = 1.1;
  o.sampling_rate = 0.01;
  o.delta = 1e-5;
  o.target_epsilon = 2.0;
  auto acc = RdpAccountant::Create(o);
  ASSERT_TRUE(acc.ok());
  EXPECT_EQ(acc->Epsilon(), 0);
  double last = 0;
  int rounds = 0;
  while (acc->CheckNextRound().ok()) {
    acc->Compose();
    ++rounds;
    EXPECT_GT(acc->Epsilon(), last);
    last = acc->Epsilon();
    ASSERT_LT(rounds, 100000);
  }
  EXPECT_LE(acc->Epsilon(), 2.0);
  EXPECT_GT(acc->EpsilonAfter(1), 2.0);
  EXPECT_EQ(acc->CheckNextRound().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GT(rounds, 10);
}

TEST(RdpAccountantTest, InvalidOptionsAreRefused) {
  RdpAccountantOptions o;
  o.noise_multiplier = 0;
  EXPECT_FALSE(RdpAccountant::Create(o).ok());
  o.noise_multiplier = 1;
  o.sampling_rate = 0.5;
  o.orders = {1.5};
  EXPECT_FALSE(RdpAccountant::Create(o).ok());
  o.orders = {2, 3};
  EXPECT_TRUE(RdpAccountant::Create(o).ok());
}

TEST(DpNoiseTest, ClipScalesLongUpdatesOnly) {
  std::vector<float> x = {3, 4};
  double norm = 0;
  ASSERT_TRUE(ClipToL2Norm(absl::MakeSpan(x), 1.0, &norm).ok());
  EXPECT_DOUBLE_EQ(norm, 5);
  EXPECT_NEAR(x[0], 0.6, 1e-7);
  EXPECT_NEAR(x[1], 0.8, 1e-7);
  std::vector<float> y = {0.3f, 0.4f};
  ASSERT_TRUE(ClipToL2Norm(absl::MakeSpan(y), 1.0).ok());
  EXPECT_FLOAT_EQ(y[0], 0.3f);
}

TEST(DpNoiseTest, GaussianNoiseHasTheRequestedMoments) {
  std::vector<float> x(200001, 0.0f);
  std::array<uint8_t, 32> seed{};
  seed[0] = 9;
  ASSERT_TRUE(AddGaussianNoise(absl::MakeSpan(x), 2.0, seed).ok());
  double m = 0, v = 0;
  for (float e : x) m += e;
  m /= x.size();
  for (float e : x) v += (e - m) * (e - m);
  v /= x.size();
  EXPECT_NEAR(m, 0, 0.02);    // 4.5 standard errors
  EXPECT_NEAR(v, 4.0, 0.06);  // sd of the variance estimate ~ 4 * sqrt(2/n) = 0.0126
  EXPECT_DOUBLE_EQ(DistributedNoiseStddev(1.0, 2.0, 4), 1.0);
}

}  // namespace
}  // namespace sextant
