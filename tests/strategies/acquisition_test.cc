#include "strategies/acquisition.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "gtest/gtest.h"

namespace sextant {
namespace {

// EI computed straight from its definition, in long double so that the reference carries a
// few more digits than the double-precision code under test.
long double NaiveEi(double mean, double sd, double best) {
  const long double z = (static_cast<long double>(best) - mean) / sd;
  const long double pdf = std::exp(-0.5L * z * z) / std::sqrt(2 * std::numbers::pi_v<long double>);
  const long double cdf = 0.5L * std::erfc(-z / std::numbers::sqrt2_v<long double>);
  return (static_cast<long double>(best) - mean) * cdf + sd * pdf;
}

TEST(AcquisitionTest, LogEiAgreesWithNaiveEiWhereverNaiveIsRepresentable) {
  int compared = 0;
  for (double sd : {1e-3, 0.1, 1.0, 7.5}) {
    for (double z = -40; z <= 40; z += 0.125) {
      const double best = 0.3;
      const double mean = best - z * sd;
      // The double-precision naive EI is what "finite and above 1e-300" refers to.
      const double z_d = (best - mean) / sd;
      const double naive_double = (best - mean) * 0.5 * std::erfc(-z_d / std::numbers::sqrt2) +
                                  sd * std::exp(-0.5 * z_d * z_d) / std::sqrt(2 * std::numbers::pi);
      if (!(naive_double > 1e-300) || !std::isfinite(naive_double)) continue;
      const double expected = static_cast<double>(std::log(NaiveEi(mean, sd, best)));
      EXPECT_NEAR(LogExpectedImprovement(mean, sd, best), expected,
                  1e-9 * std::max(1.0, std::abs(expected)))
          << "z=" << z << " sd=" << sd;
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(AcquisitionTest, LogEiStaysFiniteAndDecreasingFarBelowTheIncumbent) {
  double previous = std::numeric_limits<double>::infinity();
  for (double z : {-30.0, -40.0, -100.0, -1e3, -1e5, -1e7, -1e9, -1e12, -1e100}) {
    const double value = LogExpectedImprovement(/*mean=*/-z, /*sd=*/1, /*best=*/0);
    EXPECT_TRUE(std::isfinite(value)) << z;
    EXPECT_LT(value, previous) << z;
    previous = value;
    // The asymptote -z²/2 - log(2π)/2 - 2 log|z|.
    const double asymptote =
        -0.5 * z * z - 0.5 * std::log(2 * std::numbers::pi) - 2 * std::log(std::abs(z));
    EXPECT_NEAR(value, asymptote, std::max(1e-12 * std::abs(asymptote), 4 / (z * z))) << z;
  }
}

TEST(AcquisitionTest, LogHIsContinuousAcrossItsBranches) {
  for (double z : {-1.0, -10.0}) {
    const double below = LogH(std::nextafter(z, -100.0));
    const double above = LogH(std::nextafter(z, 100.0));
    EXPECT_NEAR(below, above, 1e-12 * std::max(1.0, std::abs(above))) << z;
  }
}

TEST(AcquisitionTest, LogHDerivativeMatchesFiniteDifferences) {
  for (double z : {-1e4, -300.0, -30.0, -10.5, -9.5, -3.0, -1.01, -0.99, 0.0, 2.0, 25.0}) {
    const double h = 1e-6 * std::max(1.0, std::abs(z));
    const double numeric = (LogH(z + h) - LogH(z - h)) / (2 * h);
    EXPECT_NEAR(LogHDerivative(z), numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << z;
  }
}

TEST(AcquisitionTest, GradientWithRespectToMeanAndSdMatchesFiniteDifferences) {
  for (double mean : {-2.0, 0.1, 0.9, 5.0, 40.0}) {
    for (double sd : {0.05, 0.7, 3.0}) {
      const double best = 1.0;
      const LogEiWithGradient g = LogExpectedImprovementWithGradient(mean, sd, best);
      EXPECT_DOUBLE_EQ(g.value, LogExpectedImprovement(mean, sd, best));
      const double hm = 1e-6;
      const double dm = (LogExpectedImprovement(mean + hm, sd, best) -
                         LogExpectedImprovement(mean - hm, sd, best)) /
                        (2 * hm);
      const double hs = 1e-6 * sd;
      const double ds = (LogExpectedImprovement(mean, sd + hs, best) -
                         LogExpectedImprovement(mean, sd - hs, best)) /
                        (2 * hs);
      EXPECT_NEAR(g.d_mean, dm, 1e-4 * std::max(1.0, std::abs(dm))) << mean << " " << sd;
      EXPECT_NEAR(g.d_sd, ds, 1e-4 * std::max(1.0, std::abs(ds))) << mean << " " << sd;
    }
  }
}

TEST(AcquisitionTest, ZeroSdGivesTheCertainImprovementOrMinusInfinity) {
  EXPECT_DOUBLE_EQ(LogExpectedImprovement(0.25, 0, 1.25), 0.0);
  EXPECT_EQ(LogExpectedImprovement(2, 0, 1), -std::numeric_limits<double>::infinity());
}

TEST(AcquisitionTest, ErfcxMatchesItsDefinitionAndItsAsymptote) {
  for (double x : {-2.0, 0.0, 0.5, 3.0, 6.9, 7.1, 20.0}) {
    const long double reference =
        std::exp(static_cast<long double>(x) * x) * std::erfc(static_cast<long double>(x));
    EXPECT_NEAR(Erfcx(x), static_cast<double>(reference), 1e-13 * static_cast<double>(reference))
        << x;
  }
  const double big = 1e8;
  EXPECT_NEAR(Erfcx(big), 1 / (big * std::sqrt(std::numbers::pi)), 1e-16 / big);
}

}  // namespace
}  // namespace sextant
