#include "worker/train/optimizer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sextant::train {

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  if (o.kind != "adam" && o.kind != "sgd") {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: unknown '", o.kind, "' (expected adam or sgd)"));
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr)) {
    return absl::InvalidArgumentError(absl::StrCat("lr: ", o.lr, " must be a finite value > 0"));
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("momentum: ", o.momentum, " is not in [0, 1)"));
  }
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight_decay: ", o.weight_decay, " must be a finite value >= 0"));
  }
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) || !(o.eps > 0)) {
    return absl::InvalidArgumentError("adam: beta1 and beta2 must be in [0, 1) and eps > 0");
  }
  return absl::OkStatus();
}

namespace {

// Both optimisers keep `slots` state buffers per parameter.
class SlottedOptimizer : public Optimizer {
 public:
  SlottedOptimizer(const OptimizerOptions& o, Backend* backend) : o_(o), backend_(backend) {}

  absl::Status Init(const std::vector<Tensor>& params, int slots) {
    state_.resize(slots);
    for (const Tensor& p : params) {
      for (int s = 0; s < slots; ++s) {
        SEXTANT_ASSIGN_OR_RETURN(Buffer b, backend_->Allocate(p.rows, p.cols));
        state_[s].push_back(std::move(b));
      }
    }
    return absl::OkStatus();
  }

  void Step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) override {
    ++steps_;
    for (size_t i = 0; i < params.size(); ++i) {
      if (o_.kind == "sgd") {
        backend_->SgdStep(params[i], grads[i], state_[0][i].view(),
                          {o_.lr, o_.momentum, o_.weight_decay});
      } else {
        backend_->AdamStep(params[i], grads[i], state_[0][i].view(), state_[1][i].view(),
                           {o_.lr, o_.beta1, o_.beta2, o_.eps, o_.weight_decay, steps_});
      }
    }
  }

  int64_t steps() const override { return steps_; }

  void Save(ByteWriter& out) override {
    out.I64(steps_);
    std::vector<float> host;
    for (auto& slot : state_) {
      for (Buffer& b : slot) {
        host.resize(b.view().size());
        backend_->Download(b.view(), host.data());
        out.Floats(host.data(), static_cast<int64_t>(host.size()));
      }
    }
  }

  absl::Status Load(ByteReader& in) override {
    SEXTANT_ASSIGN_OR_RETURN(steps_, in.I64());
    std::vector<float> host;
    for (auto& slot : state_) {
      for (Buffer& b : slot) {
        host.resize(b.view().size());
        SEXTANT_RETURN_IF_ERROR(in.Floats(host.data(), static_cast<int64_t>(host.size())));
        backend_->Upload(host.data(), b.view());
      }
    }
    return absl::OkStatus();
  }

 private:
  OptimizerOptions o_;
  Backend* backend_;
  std::vector<std::vector<Buffer>> state_;  // [slot][parameter]
  int64_t steps_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> NewOptimizer(const OptimizerOptions& options,
                                                        const std::vector<Tensor>& params,
                                                        Backend* backend) {
  SEXTANT_RETURN_IF_ERROR(ValidateOptimizerOptions(options));
  auto opt = std::make_unique<SlottedOptimizer>(options, backend);
  SEXTANT_RETURN_IF_ERROR(opt->Init(params, options.kind == "sgd" ? 1 : 2));
  return std::unique_ptr<Optimizer>(std::move(opt));
}

}  // namespace sextant::train
