#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strategies/internal/splitmix.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

class RandomSampler final : public Sampler {
 public:
  RandomSampler(SearchSpace space, uint64_t seed) : space_(std::move(space)), seed_(seed) {}

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    // A fresh engine per trial, seeded from (seed, trial), keeps trial i independent of how
    // many trials were asked for before it.
    std::mt19937_64 engine(
        internal::StreamSeed(seed_, static_cast<uint64_t>(request.trial_number)));
    std::vector<double> u(space_.params.size());
    for (double& x : u) x = internal::UnitFromBits(engine());
    return FromUnitCube(space_, u);
  }

 private:
  const SearchSpace space_;
  const uint64_t seed_;
};

}  // namespace

std::unique_ptr<Sampler> NewRandomSampler(SearchSpace space, uint64_t seed) {
  return std::make_unique<RandomSampler>(std::move(space), seed);
}

}  // namespace sextant
