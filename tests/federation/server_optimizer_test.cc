#include "federation/server_optimizer.h"

#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

// Three rounds of fixed pseudo-gradients for a 3-parameter model, with a sign change and a zero.
const std::vector<float> kModel = {0.5f, -1.0f, 2.0f};
const std::vector<std::vector<float>> kDeltas = {
    {0.1f, -0.2f, 0.0f}, {0.3f, 0.1f, -0.05f}, {-0.2f, 0.4f, 0.01f}};

enum class Rule { kAdagrad, kAdam, kYogi };

// Reddi et al. 2021, Algorithm 2, written out per coordinate in double.
std::vector<double> ReferenceAdaptive(Rule rule, const AdaptiveOptions& o) {
  std::vector<double> x(kModel.begin(), kModel.end()), m(3, 0.0), v(3, o.initial_v);
  for (const auto& delta : kDeltas) {
    for (size_t i = 0; i < 3; ++i) {
      const double d = delta[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * d;
      if (rule == Rule::kAdagrad) v[i] = v[i] + d * d;
      if (rule == Rule::kAdam) v[i] = o.beta2 * v[i] + (1 - o.beta2) * d * d;
      if (rule == Rule::kYogi) {
        const double s = v[i] - d * d > 0 ? 1 : (v[i] - d * d < 0 ? -1 : 0);
        v[i] = v[i] - (1 - o.beta2) * d * d * s;
      }
      x[i] += o.server_lr * m[i] / (std::sqrt(v[i]) + o.tau);
    }
  }
  return x;
}

std::vector<float> RunRounds(ServerOptimizer& opt) {
  std::vector<float> x = kModel;
  for (const auto& delta : kDeltas) EXPECT_TRUE(opt.Step(absl::MakeSpan(x), delta).ok());
  return x;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-6 * std::max(1.0, std::fabs(want[i]))) << i;
  }
}

TEST(ServerOptimizerTest, FedAvgStepsByServerLearningRate) {
  auto opt = NewFedAvgOptimizer({.server_lr = 0.5});
  std::vector<float> x = {1, 2};
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{2, -4}).ok());
  EXPECT_EQ(x, (std::vector<float>{2, 0}));
  EXPECT_EQ(opt->state().rounds, 1);
}

TEST(ServerOptimizerTest, FedAvgWithUnitRateLandsOnTheClientMean) {
  auto opt = NewFedAvgOptimizer({});
  std::vector<float> x = {1, 1};
  const std::vector<float> client_mean = {3, -2};
  const std::vector<float> delta = {client_mean[0] - x[0], client_mean[1] - x[1]};
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), delta).ok());
  EXPECT_EQ(x, client_mean);
}

TEST(ServerOptimizerTest, FedAvgMAccumulatesMomentum) {
  auto opt = NewFedAvgMOptimizer({.server_lr = 1.0, .momentum = 0.5});
  std::vector<float> x = {0};
  // m = 1 -> x = 1; m = 0.5 + 1 = 1.5 -> x = 2.5; m = 0.75 + 0 = 0.75 -> x = 3.25.
  for (float d : {1.0f, 1.0f, 0.0f})
    ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{d}).ok());
  EXPECT_EQ(x[0], 3.25f);
  EXPECT_EQ(opt->state().m, (std::vector<float>{0.75f}));
}

TEST(ServerOptimizerTest, FedAdamMatchesReferenceFormula) {
  const AdaptiveOptions o{
      .server_lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .tau = 1e-3, .initial_v = 1e-6};
  auto opt = NewFedAdamOptimizer(o);
  ExpectNear(RunRounds(*opt), ReferenceAdaptive(Rule::kAdam, o));
}

TEST(ServerOptimizerTest, FedYogiMatchesReferenceFormula) {
  const AdaptiveOptions o{
      .server_lr = 0.1, .beta1 = 0.8, .beta2 = 0.9, .tau = 1e-2, .initial_v = 1e-4};
  auto opt = NewFedYogiOptimizer(o);
  ExpectNear(RunRounds(*opt), ReferenceAdaptive(Rule::kYogi, o));
}

TEST(ServerOptimizerTest, FedAdagradMatchesReferenceFormula) {
  const AdaptiveOptions o{
      .server_lr = 0.05, .beta1 = 0.5, .beta2 = 0.99, .tau = 1e-3, .initial_v = 1e-6};
  auto opt = NewFedAdagradOptimizer(o);
  ExpectNear(RunRounds(*opt), ReferenceAdaptive(Rule::kAdagrad, o));
}

TEST(ServerOptimizerTest, FedAdamFirstStepWorkedByHand) {
  // m = 0.1 * 0.1 = 0.01; v = 0.99 * 1e-6 + 0.01 * 0.01 = 1.0099e-4;
  // x = 0.01 / (sqrt(1.0099e-4) + 1e-3) = 0.905025...
  auto opt = NewFedAdamOptimizer({.server_lr = 1.0});
  std::vector<float> x = {0};
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{0.1f}).ok());
  EXPECT_NEAR(x[0], 0.01 / (std::sqrt(1.0099e-4) + 1e-3), 1e-6);
}

TEST(ServerOptimizerTest, YogiSecondMomentMovesTowardsDeltaSquaredBySign) {
  // v = 1 > d^2 = 0.25: v = 1 - 0.5 * 0.25 = 0.875. Then v = 0.875 < d^2 = 4: v = 0.875 + 2
  // = 2.875.
  auto opt =
      NewFedYogiOptimizer({.server_lr = 1.0, .beta1 = 0.0, .beta2 = 0.5, .tau = 0, .initial_v = 1});
  std::vector<float> x = {0};
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{0.5f}).ok());
  EXPECT_EQ(opt->state().v, (std::vector<float>{0.875f}));
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{2.0f}).ok());
  EXPECT_EQ(opt->state().v, (std::vector<float>{2.875f}));
}

TEST(ServerOptimizerTest, RestoredStateContinuesIdentically) {
  const AdaptiveOptions o{.server_lr = 0.1};
  auto a = NewFedAdamOptimizer(o);
  std::vector<float> x = kModel;
  ASSERT_TRUE(a->Step(absl::MakeSpan(x), kDeltas[0]).ok());
  auto b = NewFedAdamOptimizer(o);
  ASSERT_TRUE(b->Restore(a->state()).ok());
  std::vector<float> xa = x, xb = x;
  ASSERT_TRUE(a->Step(absl::MakeSpan(xa), kDeltas[1]).ok());
  ASSERT_TRUE(b->Step(absl::MakeSpan(xb), kDeltas[1]).ok());
  EXPECT_EQ(xa, xb);
  EXPECT_EQ(b->state().rounds, 2);
}

// A model stepped a range at a time (a file-backed model, its pages given back after each range)
// lands exactly where the whole step lands, for every optimiser, and each range is reported once.
TEST(ServerOptimizerTest, SteppingInRangesEqualsTheWholeStep) {
  std::vector<std::unique_ptr<ServerOptimizer>> whole, ranged;
  const AdaptiveOptions a{.server_lr = 0.1};
  for (auto* list : {&whole, &ranged}) {
    list->push_back(NewFedAvgOptimizer({.server_lr = 0.7}));
    list->push_back(NewFedAvgMOptimizer({}));
    list->push_back(NewFedAdamOptimizer(a));
    list->push_back(NewFedYogiOptimizer(a));
  }
  std::vector<float> model(10), delta(10);
  for (size_t i = 0; i < 10; ++i) {
    model[i] = 0.1f * static_cast<float>(i);
    delta[i] = 0.05f * static_cast<float>(i % 3) - 0.04f;
  }
  for (size_t k = 0; k < whole.size(); ++k) {
    std::vector<float> x = model, y = model;
    for (int round = 0; round < 3; ++round) {
      ASSERT_TRUE(whole[k]->Step(absl::MakeSpan(x), delta).ok());
      std::vector<std::pair<size_t, size_t>> ranges;
      ASSERT_TRUE(ranged[k]
                      ->Step(absl::MakeSpan(y), delta, 4,
                             [&](size_t at, size_t n) { ranges.emplace_back(at, n); })
                      .ok());
      EXPECT_EQ(ranges, (std::vector<std::pair<size_t, size_t>>{{0, 4}, {4, 4}, {8, 2}}));
    }
    EXPECT_EQ(x, y) << k;
    EXPECT_EQ(ranged[k]->state().rounds, 3);
  }
  // A bad delta is found before any range moves.
  std::vector<float> x = model;
  std::vector<float> bad = delta;
  bad[9] = std::nanf("");
  int ranges = 0;
  EXPECT_EQ(whole[0]->Step(absl::MakeSpan(x), bad, 4, [&](size_t, size_t) { ++ranges; }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ranges, 0);
  EXPECT_EQ(x, model);
}

TEST(ServerOptimizerTest, RejectsBadShapesAndNonFiniteDeltaWithoutMoving) {
  auto opt = NewFedAdamOptimizer({});
  std::vector<float> x = {1, 2};
  EXPECT_EQ(opt->Step(absl::MakeSpan(x), std::vector<float>{1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt->Step(absl::MakeSpan(x), std::vector<float>{1, std::nanf("")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x, (std::vector<float>{1, 2}));
  ASSERT_TRUE(opt->Step(absl::MakeSpan(x), std::vector<float>{0, 0}).ok());
  std::vector<float> bigger = {1, 2, 3};
  EXPECT_EQ(opt->Step(absl::MakeSpan(bigger), std::vector<float>{0, 0, 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(opt->Restore({1, {0.0f}, {}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewFedAvgOptimizer({})->Restore({1, {0.0f}, {}}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
