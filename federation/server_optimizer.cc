#include "federation/server_optimizer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

absl::Status CheckStep(absl::Span<const float> model, absl::Span<const float> delta,
                       size_t state_size) {
  if (model.size() != delta.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", model.size(), " values but delta has ", delta.size()));
  }
  if (state_size != 0 && state_size != model.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", model.size(), " values but the state has ", state_size));
  }
  for (size_t i = 0; i < delta.size(); ++i) {
    if (!std::isfinite(delta[i])) {
      return absl::InvalidArgumentError(absl::StrCat("delta is not finite at ", i));
    }
  }
  return absl::OkStatus();
}

class FedAvgOptimizer final : public ServerOptimizer {
 public:
  explicit FedAvgOptimizer(FedAvgOptions options) : options_(options) {}

  absl::Status Step(absl::Span<float> model, absl::Span<const float> delta) override {
    if (absl::Status s = CheckStep(model, delta, 0); !s.ok()) return s;
    for (size_t i = 0; i < model.size(); ++i) {
      model[i] = static_cast<float>(model[i] + options_.server_lr * delta[i]);
    }
    ++rounds_;
    return absl::OkStatus();
  }
  State state() const override { return {rounds_, {}, {}}; }
  absl::Status Restore(State state) override {
    if (!state.m.empty() || !state.v.empty()) {
      return absl::InvalidArgumentError("FedAvg keeps no moments");
    }
    rounds_ = state.rounds;
    return absl::OkStatus();
  }

 private:
  FedAvgOptions options_;
  int64_t rounds_ = 0;
};

class FedAvgMOptimizer final : public ServerOptimizer {
 public:
  explicit FedAvgMOptimizer(FedAvgMOptions options) : options_(options) {}

  absl::Status Step(absl::Span<float> model, absl::Span<const float> delta) override {
    if (absl::Status s = CheckStep(model, delta, m_.size()); !s.ok()) return s;
    if (m_.empty()) m_.assign(model.size(), 0.0f);
    for (size_t i = 0; i < model.size(); ++i) {
      const double m = options_.momentum * m_[i] + delta[i];
      m_[i] = static_cast<float>(m);
      model[i] = static_cast<float>(model[i] + options_.server_lr * m);
    }
    ++rounds_;
    return absl::OkStatus();
  }
  State state() const override { return {rounds_, m_, {}}; }
  absl::Status Restore(State state) override {
    if (!state.v.empty()) return absl::InvalidArgumentError("FedAvgM keeps no second moment");
    rounds_ = state.rounds;
    m_ = std::move(state.m);
    return absl::OkStatus();
  }

 private:
  FedAvgMOptions options_;
  int64_t rounds_ = 0;
  std::vector<float> m_;
};

enum class SecondMoment { kAdagrad, kAdam, kYogi };

class AdaptiveOptimizer final : public ServerOptimizer {
 public:
  AdaptiveOptimizer(AdaptiveOptions options, SecondMoment rule) : options_(options), rule_(rule) {}

  absl::Status Step(absl::Span<float> model, absl::Span<const float> delta) override {
    if (absl::Status s = CheckStep(model, delta, m_.size()); !s.ok()) return s;
    if (m_.empty()) {
      m_.assign(model.size(), 0.0f);
      v_.assign(model.size(), static_cast<float>(options_.initial_v));
    }
    for (size_t i = 0; i < model.size(); ++i) {
      const double d = delta[i];
      const double m = options_.beta1 * m_[i] + (1 - options_.beta1) * d;
      const double v = NextV(v_[i], d * d);
      m_[i] = static_cast<float>(m);
      v_[i] = static_cast<float>(v);
      model[i] =
          static_cast<float>(model[i] + options_.server_lr * m / (std::sqrt(v) + options_.tau));
    }
    ++rounds_;
    return absl::OkStatus();
  }
  State state() const override { return {rounds_, m_, v_}; }
  absl::Status Restore(State state) override {
    if (state.m.size() != state.v.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("m has ", state.m.size(), " values but v has ", state.v.size()));
    }
    rounds_ = state.rounds;
    m_ = std::move(state.m);
    v_ = std::move(state.v);
    return absl::OkStatus();
  }

 private:
  double NextV(double v, double d2) const {
    switch (rule_) {
      case SecondMoment::kAdagrad:
        return v + d2;
      case SecondMoment::kAdam:
        return options_.beta2 * v + (1 - options_.beta2) * d2;
      case SecondMoment::kYogi: {
        const double sign = v > d2 ? 1.0 : (v < d2 ? -1.0 : 0.0);
        return v - (1 - options_.beta2) * d2 * sign;
      }
    }
    return v;
  }

  AdaptiveOptions options_;
  SecondMoment rule_;
  int64_t rounds_ = 0;
  std::vector<float> m_, v_;
};

}  // namespace

std::unique_ptr<ServerOptimizer> NewFedAvgOptimizer(const FedAvgOptions& options) {
  return std::make_unique<FedAvgOptimizer>(options);
}
std::unique_ptr<ServerOptimizer> NewFedAvgMOptimizer(const FedAvgMOptions& options) {
  return std::make_unique<FedAvgMOptimizer>(options);
}
std::unique_ptr<ServerOptimizer> NewFedAdagradOptimizer(const AdaptiveOptions& options) {
  return std::make_unique<AdaptiveOptimizer>(options, SecondMoment::kAdagrad);
}
std::unique_ptr<ServerOptimizer> NewFedAdamOptimizer(const AdaptiveOptions& options) {
  return std::make_unique<AdaptiveOptimizer>(options, SecondMoment::kAdam);
}
std::unique_ptr<ServerOptimizer> NewFedYogiOptimizer(const AdaptiveOptions& options) {
  return std::make_unique<AdaptiveOptimizer>(options, SecondMoment::kYogi);
}

}  // namespace sextant
