#include "orchestrator/federated/privacy_budget.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sextant {
namespace {

v1::Federation WithDp(const char* noise) {
  v1::Federation f;
  f.add_regions()->set_clients(4);
  f.set_clients_per_round(1.0);
  f.mutable_dp()->set_noise_multiplier(1.5);
  f.mutable_dp()->set_clip_norm(2.0);
  f.mutable_dp()->set_noise(noise);
  return f;
}

TEST(PrivacyBudgetTest, NoDpNoBudget) {
  absl::StatusOr<std::optional<PrivacyBudget>> b = PrivacyBudget::Create(v1::Federation(), 0);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
}

TEST(PrivacyBudgetTest, ComposesLikeTheAccountantAndWritesWhatResultsRead) {
  absl::StatusOr<std::optional<PrivacyBudget>> b = PrivacyBudget::Create(WithDp("central"), 2);
  ASSERT_TRUE(b.ok() && b->has_value());
  PrivacyBudget& budget = **b;
  RdpAccountantOptions o;
  o.noise_multiplier = 1.5;
  absl::StatusOr<RdpAccountant> a = RdpAccountant::Create(o);
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(budget.epsilon(), a->EpsilonAfter(2), 1e-12);  // a resume composes what was done
  EXPECT_NEAR(budget.ComposeThrough(5), a->EpsilonAfter(5), 1e-12);
  EXPECT_NEAR(budget.ComposeThrough(5), a->EpsilonAfter(5), 1e-12);  // nothing twice
  const nlohmann::json j = nlohmann::json::parse(budget.ToJson(5));
  EXPECT_NEAR(j["epsilon"].get<double>(), a->EpsilonAfter(5), 1e-12);
  EXPECT_EQ(j["rounds"], 5);
  EXPECT_EQ(j["noise_multiplier"], 1.5);
  EXPECT_EQ(j["clip_norm"], 2.0);
  EXPECT_EQ(j["delta"], 1e-5);
  EXPECT_EQ(j["sampling_rate"], 1.0);
  EXPECT_EQ(j["noise"], "central");
  EXPECT_FALSE(j.contains("target_epsilon"));
}

TEST(PrivacyBudgetTest, CentralNoiseHasItsScaleAndDistributedAddsNone) {
  absl::StatusOr<std::optional<PrivacyBudget>> central =
      PrivacyBudget::Create(WithDp("central"), 0);
  ASSERT_TRUE(central.ok() && central->has_value());
  EXPECT_TRUE((*central)->central_noise());
  std::vector<float> mean(200000, 0.0f);
  ASSERT_TRUE((*central)->AddCentralNoise(absl::MakeSpan(mean), 4.0).ok());
  double sum = 0, squares = 0;
  for (float v : mean) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(mean.size());
  const double stddev = std::sqrt(squares / n - (sum / n) * (sum / n));
  EXPECT_NEAR(stddev, 1.5 * 2.0 / 4.0, 0.01);  // sigma C / total weight
  absl::StatusOr<std::optional<PrivacyBudget>> distributed =
      PrivacyBudget::Create(WithDp("distributed"), 0);
  ASSERT_TRUE(distributed.ok() && distributed->has_value());
  EXPECT_FALSE((*distributed)->central_noise());
  std::vector<float> untouched(10, 0.5f);
  ASSERT_TRUE((*distributed)->AddCentralNoise(absl::MakeSpan(untouched), 4.0).ok());
  for (float v : untouched) EXPECT_EQ(v, 0.5f);
}

}  // namespace
}  // namespace sextant
