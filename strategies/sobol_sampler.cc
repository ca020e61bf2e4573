#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "strategies/internal/sobol_sequence.h"
#include "strategies/internal/splitmix.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

class SobolSampler final : public Sampler {
 public:
  SobolSampler(SearchSpace space, uint64_t seed) : space_(std::move(space)) {
    const size_t dims = space_.params.size();
    if (dims == 0) return;
    auto sequence = internal::SobolSequence::Create(dims);
    if (!sequence.ok()) {
      error_ = sequence.status();
      return;
    }
    sequence_.emplace(*std::move(sequence));
    // One independent scramble per dimension; otherwise dimensions with equal direction
    // numbers in their leading bits would stay correlated.
    for (size_t d = 0; d < dims; ++d) keys_.push_back(internal::StreamSeed(seed, d));
  }

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    if (!error_.ok()) return error_;
    if (!sequence_.has_value()) return Params();  // an empty space has one point, {}
    SEXTANT_ASSIGN_OR_RETURN(std::vector<uint32_t> raw,
                             sequence_->Point(static_cast<uint64_t>(request.trial_number)));
    std::vector<double> u(raw.size());
    for (size_t d = 0; d < raw.size(); ++d) {
      u[d] = static_cast<double>(internal::OwenScramble(raw[d], keys_[d])) * 0x1.0p-32;
    }
    return FromUnitCube(space_, u);
  }

 private:
  const SearchSpace space_;
  std::optional<internal::SobolSequence> sequence_;
  std::vector<uint64_t> keys_;
  absl::Status error_;
};

}  // namespace

std::unique_ptr<Sampler> NewStartupSampler(const SearchSpace& space, uint64_t seed) {
  return space.params.size() <= internal::SobolSequence::kMaxDimension
             ? NewSobolSampler(space, seed)
             : NewRandomSampler(space, seed);
}

std::unique_ptr<Sampler> NewSobolSampler(SearchSpace space, uint64_t seed) {
  return std::make_unique<SobolSampler>(std::move(space), seed);
}

}  // namespace sextant
