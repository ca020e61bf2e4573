// A federated search's trial values put into its federation block (federated_trial_params.h),
// and those that cannot run refused before any participant starts.
#include "orchestrator/core/federated_trial_params.h"

#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

v1::ExperimentSpec Buffered(bool secure) {
  v1::ExperimentSpec spec;
  v1::Federation* f = spec.mutable_federation();
  for (const char* name : {"east", "west"}) {
    v1::FederatedRegion* r = f->add_regions();
    r->set_name(name);
    r->set_clients(4);
  }
  f->set_secure_aggregation(secure);
  f->set_mode("buffered");
  f->set_buffer_size(4);
  f->set_clients_per_round(1);
  spec.add_parameters()->set_name("clients_per_round");
  return spec;
}

absl::Status Apply(v1::ExperimentSpec& spec, const std::map<std::string, std::string>& values) {
  return ApplyFederatedTrialParams(spec, [&](const std::string& n) -> std::optional<std::string> {
    auto it = values.find(n);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

// Buffered rounds: clients_per_round is how many start on each model version; a trial's value
// below buffer_size could never fill a buffer from one version and is refused by name.
TEST(FederatedTrialParamsTest, ABufferedTrialsClientsPerRoundMustFillABuffer) {
  v1::ExperimentSpec spec = Buffered(/*secure=*/false);
  ASSERT_TRUE(Apply(spec, {{"clients_per_round", "6"}}).ok());
  EXPECT_DOUBLE_EQ(spec.federation().clients_per_round(), 6);
  EXPECT_EQ(spec.parameters_size(), 0);
  spec = Buffered(false);
  absl::Status s = Apply(spec, {{"clients_per_round", "3"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("clients_per_round=3 starts 3 clients on each model version, "
                                     "too few to fill a buffer of buffer_size 4"));
  // A fraction: 0.5 of 8 is 4, enough.
  spec = Buffered(true);
  EXPECT_TRUE(Apply(spec, {{"clients_per_round", "0.5"}}).ok());
}

}  // namespace
}  // namespace sextant
