#ifndef SEXTANT_TESTS_STRATEGIES_SAMPLER_TEST_UTIL_H_
#define SEXTANT_TESTS_STRATEGIES_SAMPLER_TEST_UTIL_H_

#include <cstdint>

#include "absl/types/span.h"
#include "strategies/sampler.h"

namespace sextant::testing {

// A request for trial n, with history left empty unless given.
inline SampleRequest At(int64_t n, absl::Span<const Observation> history = {}) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  return request;
}

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_STRATEGIES_SAMPLER_TEST_UTIL_H_
