#ifndef SEXTANT_STRATEGIES_ACQUISITION_H_
#define SEXTANT_STRATEGIES_ACQUISITION_H_

namespace sextant {

// log h(z), where h(z) = φ(z) + z·Φ(z) is expected improvement in units of the predictive
// standard deviation (φ, Φ: standard normal density and distribution). Uses the log_h
// formulation of Ament et al. 2023 ("Unexpected Improvements to Expected Improvement"), so the
// result is accurate to a few ulps relative where h is representable and keeps going (as
// -z²/2 - log(2π)/2 - 2·log|z| asymptotically) where h underflows. Finite for every finite z
// with |z| < 1e154; -inf beyond that and for z = -inf; NaN for NaN.
double LogH(double z);

// d/dz log h(z) = Φ(z) / h(z): positive, about |z| for very negative z and 1/z for large z.
double LogHDerivative(double z);

// Log expected improvement below `best` for a minimised objective whose prediction is
// N(mean, sd²): log E[max(best - f, 0)]. Finite far from the incumbent, unlike log(EI)
// computed naively. With sd <= 0 (no uncertainty) returns log(best - mean) when mean < best
// and -inf otherwise.
double LogExpectedImprovement(double mean, double sd, double best);

// LogExpectedImprovement and its partial derivatives with respect to mean and sd (sd > 0).
struct LogEiWithGradient {
  double value;
  double d_mean;
  double d_sd;
};
LogEiWithGradient LogExpectedImprovementWithGradient(double mean, double sd, double best);

// log Φ(z), Φ the standard normal distribution function: accurate where Φ(z) underflows
// (about -z²/2 - log(-z·sqrt(2π)) for very negative z) and where it rounds to 1. -inf for
// z = -inf, 0 for +inf, NaN for NaN.
double LogNormalCdf(double z);

// The scaled complementary error function exp(x²)·erfc(x), for x >= 0 (accurate to about
// 1e-14 relative); for x < 0 it is computed directly and overflows past x ≈ -26.
double Erfcx(double x);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_ACQUISITION_H_
