#include "federation/server_optimizer.h"

#include <algorithm>
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

  State state() const override { return {rounds_, {}, {}}; }
  absl::Status Restore(State state) override {
    if (!state.m.empty() || !state.v.empty()) {
      return absl::InvalidArgumentError("FedAvg keeps no moments");
    }
    rounds_ = state.rounds;
    return absl::OkStatus();
  }

 protected:
  size_t state_size() const override { return 0; }
  void Prepare(size_t) override {}
  void Apply(size_t, absl::Span<float> model, absl::Span<const float> delta) override {
    for (size_t i = 0; i < model.size(); ++i) {
      model[i] = static_cast<float>(model[i] + options_.server_lr * delta[i]);
    }
  }
  void Count() override { ++rounds_; }

 private:
  FedAvgOptions options_;
  int64_t rounds_ = 0;
};

class FedAvgMOptimizer final : public ServerOptimizer {
 public:
  explicit FedAvgMOptimizer(FedAvgMOptions options) : options_(options) {}

  State state() const override { return {rounds_, m_, {}}; }
  absl::Status Restore(State state) override {
    if (!state.v.empty()) return absl::InvalidArgumentError("FedAvgM keeps no second moment");
    rounds_ = state.rounds;
    m_ = std::move(state.m);
    return absl::OkStatus();
  }

 protected:
  size_t state_size() const override { return m_.size(); }
  void Prepare(size_t d) override {
    if (m_.empty()) m_.assign(d, 0.0f);
  }
  void Apply(size_t offset, absl::Span<float> model, absl::Span<const float> delta) override {
    float* mo = m_.data() + offset;
    for (size_t i = 0; i < model.size(); ++i) {
      const double m = options_.momentum * mo[i] + delta[i];
      mo[i] = static_cast<float>(m);
      model[i] = static_cast<float>(model[i] + options_.server_lr * m);
    }
  }
  void Count() override { ++rounds_; }

 private:
  FedAvgMOptions options_;
  int64_t rounds_ = 0;
  std::vector<float> m_;
};

enum class SecondMoment { kAdagrad, kAdam, kYogi };

class AdaptiveOptimizer final : public ServerOptimizer {
 public:
  AdaptiveOptimizer(AdaptiveOptions options, SecondMoment rule) : options_(options), rule_(rule) {}

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

 protected:
  size_t state_size() const override { return m_.size(); }
  void Prepare(size_t d) override {
    if (!m_.empty()) return;
    m_.assign(d, 0.0f);
    v_.assign(d, static_cast<float>(options_.initial_v));
  }
  void Apply(size_t offset, absl::Span<float> model, absl::Span<const float> delta) override {
    float* mo = m_.data() + offset;
    float* vo = v_.data() + offset;
    for (size_t i = 0; i < model.size(); ++i) {
      const double d = delta[i];
      const double m = options_.beta1 * mo[i] + (1 - options_.beta1) * d;
      const double v = NextV(vo[i], d * d);
      mo[i] = static_cast<float>(m);
      vo[i] = static_cast<float>(v);
      model[i] =
          static_cast<float>(model[i] + options_.server_lr * m / (std::sqrt(v) + options_.tau));
    }
  }
  void Count() override { ++rounds_; }

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

absl::Status ServerOptimizer::Step(absl::Span<float> model, absl::Span<const float> delta,
                                   size_t chunk,
                                   const std::function<void(size_t, size_t)>& after_range) {
  if (absl::Status s = CheckStep(model, delta, state_size()); !s.ok()) return s;
  Prepare(model.size());
  chunk = std::max<size_t>(chunk, 1);
  for (size_t at = 0; at < model.size(); at += chunk) {
    const size_t n = std::min(chunk, model.size() - at);
    Apply(at, model.subspan(at, n), delta.subspan(at, n));
    if (after_range) after_range(at, n);
  }
  Count();
  return absl::OkStatus();
}

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
