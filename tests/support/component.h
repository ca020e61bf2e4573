#ifndef SEXTANT_TESTS_SUPPORT_COMPONENT_H_
#define SEXTANT_TESTS_SUPPORT_COMPONENT_H_

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace sextant::component {

// True under CI (the environment variable CI is "true"), where `scripts/install-deps --test`
// has installed every component the tests need.
inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace sextant::component

// For a test that needs a component scripts/install-deps installs (the Slurm daemons, network
// namespaces, Chromium, promtool, the Fashion-MNIST dataset, numpy, PyTorch): where it is
// missing the test skips, except under CI=true, where it fails, so that a green CI run means the
// component really ran. `why` streams like GTEST_SKIP's message. Use in a test body or SetUp.
// (GPU tests skip everywhere without a device: they use GTEST_SKIP directly.)
#define SEXTANT_REQUIRE_COMPONENT(present, why)                          \
  if (present) {                                                         \
  } else if (::sextant::component::UnderCi())                            \
    GTEST_FAIL() << "CI=true and a component the tests need is missing " \
                    "(scripts/install-deps --test installs it): "        \
                 << why;                                                 \
  else                                                                   \
    GTEST_SKIP() << why

#endif  // SEXTANT_TESTS_SUPPORT_COMPONENT_H_
