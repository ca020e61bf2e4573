#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "strategies/sampler.h"

namespace sextant {
namespace {

class EnqueuedSampler final : public Sampler {
 public:
  EnqueuedSampler(std::vector<Params> first, std::unique_ptr<Sampler> then, bool renumber)
      : first_(std::move(first)), then_(std::move(then)), renumber_(renumber) {}

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    const auto queued = static_cast<int64_t>(first_.size());
    if (request.trial_number < queued) return first_[request.trial_number];
    if (!renumber_) return then_->Ask(request);
    SampleRequest inner = request;
    inner.trial_number -= queued;
    return then_->Ask(inner);
  }

 private:
  const std::vector<Params> first_;
  const std::unique_ptr<Sampler> then_;
  const bool renumber_;
};

}  // namespace

std::unique_ptr<Sampler> NewEnqueuedSampler(std::vector<Params> first,
                                            std::unique_ptr<Sampler> then, bool renumber) {
  if (first.empty()) return then;
  return std::make_unique<EnqueuedSampler>(std::move(first), std::move(then), renumber);
}

}  // namespace sextant
