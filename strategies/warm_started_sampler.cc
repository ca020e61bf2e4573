#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "strategies/sampler.h"

namespace sextant {
namespace {

class WarmStartedSampler final : public Sampler {
 public:
  WarmStartedSampler(std::vector<Observation> priors, std::unique_ptr<Sampler> inner)
      : priors_(priors.size()), history_(std::move(priors)), inner_(std::move(inner)) {
    for (Observation& o : history_) o.prior = true;
  }

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    // The priors stay at the front of one buffer; only the run's own history is copied anew.
    history_.resize(priors_);
    history_.insert(history_.end(), request.history.begin(), request.history.end());
    SampleRequest inner = request;
    inner.history = history_;
    inner.trial_number += static_cast<int64_t>(priors_);
    return inner_->Ask(inner);
  }

 private:
  const size_t priors_;
  std::vector<Observation> history_;  // the priors, then the current request's history
  const std::unique_ptr<Sampler> inner_;
};

}  // namespace

std::unique_ptr<Sampler> NewWarmStartedSampler(std::vector<Observation> priors,
                                               std::unique_ptr<Sampler> inner) {
  if (priors.empty()) return inner;
  return std::make_unique<WarmStartedSampler>(std::move(priors), std::move(inner));
}

}  // namespace sextant
