#include "strategies/acquisition.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace sextant {
namespace {

constexpr double kLogSqrt2Pi = 0.91893853320467274178;     // log(2π)/2
constexpr double kLogSqrtHalfPi = 0.22579135264472743236;  // log(π/2)/2

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

// log(1 - exp(a)) for a < 0, choosing the form that does not cancel (Mächler 2012).
double Log1mExp(double a) {
  return a > -std::numbers::ln2 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}

// The sum Σ_{k>=1} (-1)^(k+1) (2k-1)!! / z^(2k), divided by its first term 1/z²: the
// asymptotic expansion of 1 - |z|·sqrt(π/2)·erfcx(|z|/√2), written so that it neither
// cancels nor underflows. For |z| >= 10 the terms shrink below 1e-17 well before they start
// to grow again.
double MillsTailRatio(double z) {
  const double inv_z2 = 1 / (z * z);
  double term = 1;
  double sum = 1;
  for (int k = 2; k < 60; ++k) {
    term *= -(2 * k - 1) * inv_z2;
    sum += term;
    if (std::abs(term) < 1e-17 * std::abs(sum)) break;
  }
  return sum;
}

// log(1 - |z|·sqrt(π/2)·erfcx(|z|/√2)) for z <= -1: the correction that log h adds to the
// Gaussian tail -z²/2 - log(2π)/2.
double LogTailCorrection(double z) {
  const double a = std::abs(z);
  if (a < 10) return Log1mExp(std::log(Erfcx(a / std::numbers::sqrt2) * a) + kLogSqrtHalfPi);
  return -2 * std::log(a) + std::log(MillsTailRatio(z));
}

}  // namespace

double Erfcx(double x) {
  if (x < 7) return std::exp(x * x) * std::erfc(x);
  // Asymptotic series (1/(x·sqrt(π)))·Σ (-1)^k (2k-1)!!/(2x²)^k; at x >= 7 its terms fall
  // below 1e-17 before diverging, where exp(x²)·erfc(x) would lose digits to exp's argument.
  const double inv_2x2 = 1 / (2 * x * x);
  double term = 1;
  double sum = 1;
  for (int k = 1; k < 60; ++k) {
    term *= -(2 * k - 1) * inv_2x2;
    sum += term;
    if (std::abs(term) < 1e-17 * std::abs(sum)) break;
  }
  return sum / (x * std::sqrt(std::numbers::pi));
}

double LogH(double z) {
  if (std::isnan(z)) return z;
  if (z > -1) return std::log(NormalPdf(z) + z * NormalCdf(z));
  if (std::isinf(z)) return -std::numeric_limits<double>::infinity();
  return -0.5 * z * z - kLogSqrt2Pi + LogTailCorrection(z);
}

double LogHDerivative(double z) {
  if (z > -1) return NormalCdf(z) / (NormalPdf(z) + z * NormalCdf(z));
  // log Φ(z) - log h(z), with the common exp(-z²/2) factor cancelled analytically.
  const double log_cdf_scaled = std::log(0.5 * Erfcx(-z / std::numbers::sqrt2));
  return std::exp(log_cdf_scaled + kLogSqrt2Pi - LogTailCorrection(z));
}

double LogNormalCdf(double z) {
  if (std::isnan(z)) return z;
  if (z > 0) return std::log1p(-0.5 * std::erfc(z / std::numbers::sqrt2));
  if (z > -1) return std::log(NormalCdf(z));
  if (std::isinf(z)) return -std::numeric_limits<double>::infinity();
  // Φ(z) = erfc(-z/√2)/2 = erfcx(-z/√2)·exp(-z²/2)/2, with the exponential kept in log space.
  return std::log(0.5 * Erfcx(-z / std::numbers::sqrt2)) - 0.5 * z * z;
}

double LogExpectedImprovement(double mean, double sd, double best) {
  const double z = (best - mean) / sd;
  if (!(sd > 0) || !std::isfinite(z)) {
    return mean < best ? std::log(best - mean) : -std::numeric_limits<double>::infinity();
  }
  return LogH(z) + std::log(sd);
}

LogEiWithGradient LogExpectedImprovementWithGradient(double mean, double sd, double best) {
  const double z = (best - mean) / sd;
  if (!(sd > 0) || !std::isfinite(z)) {
    if (mean < best) return {std::log(best - mean), -1 / (best - mean), 0};
    return {-std::numeric_limits<double>::infinity(), 0, 0};
  }
  const double dz = LogHDerivative(z);
  return {LogH(z) + std::log(sd), -dz / sd, (1 - z * dz) / sd};
}

}  // namespace sextant
