// Both tiers' settings derived from the experiment alone (aggregator/tier_settings.h): what a
// regional aggregator runs with comes from the experiment it is given, as the global tier's does.
#include "aggregator/tier_settings.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ExperimentSpec TwoRegions() {
  v1::ExperimentSpec spec;
  v1::Federation* f = spec.mutable_federation();
  f->add_regions()->set_name("east");
  f->mutable_regions(0)->set_clients(3);
  f->add_regions()->set_name("west");
  f->mutable_regions(1)->set_clients(2);
  f->set_examples_per_client(500);
  return spec;
}

TEST(ApplyExperimentTest, APlainRegionTakesItsClientsAndTheirWeightBound) {
  RegionalAggregatorOptions o;
  o.region = "east";
  ASSERT_TRUE(ApplyExperiment(TwoRegions(), &o).ok());
  EXPECT_THAT(o.clients, ElementsAre("east/0", "east/1", "east/2"));
  EXPECT_EQ(o.max_client_weight, 500);
  EXPECT_FALSE(o.rule.robust());
  EXPECT_FALSE(o.secure_aggregation);
  EXPECT_FALSE(o.buffer.enabled);
  EXPECT_EQ(o.dp_clip_norm, 0);
}

TEST(ApplyExperimentTest, SecureHiddenSumsSizeTheRingForEveryClientOfTheRun) {
  v1::ExperimentSpec spec = TwoRegions();
  spec.mutable_federation()->set_secure_aggregation(true);
  spec.mutable_federation()->set_hide_region_sums(true);
  spec.mutable_federation()->set_round_deadline_seconds(45);
  RegionalAggregatorOptions o;
  o.region = "west";
  ASSERT_TRUE(ApplyExperiment(spec, &o).ok());
  EXPECT_TRUE(o.secure_aggregation);
  EXPECT_TRUE(o.hide_region_sum);
  EXPECT_EQ(o.ring_clients, 5);
  EXPECT_EQ(o.stage_timeout_seconds, 45);
  const SecAggQuantization q = BaseQuantization(spec.federation());
  EXPECT_EQ(o.quantization.bits, q.bits);
  EXPECT_EQ(o.quantization.clip, q.clip);
  EXPECT_EQ(o.quantization.max_weight, 500);
}

TEST(ApplyExperimentTest, RobustRulesReproducibilityAndBufferedRoundsComeFromTheExperiment) {
  v1::ExperimentSpec spec = TwoRegions();
  spec.mutable_federation()->set_aggregation("trimmed_mean");
  spec.mutable_federation()->set_trim_fraction(0.2);
  spec.mutable_federation()->set_reproducible(true);
  RegionalAggregatorOptions o;
  o.region = "east";
  ASSERT_TRUE(ApplyExperiment(spec, &o).ok());
  EXPECT_TRUE(o.rule.robust());
  EXPECT_EQ(o.rule.trim_fraction, 0.2);
  EXPECT_TRUE(o.ordered);
  // A buffered run folds a weighted mean: with a robust rule the experiment is refused.
  spec.mutable_federation()->set_mode("buffered");
  spec.mutable_federation()->set_max_staleness(2);
  absl::Status refused = ApplyExperiment(spec, &o);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  spec.mutable_federation()->set_aggregation("fedavg");
  ASSERT_TRUE(ApplyExperiment(spec, &o).ok());
  EXPECT_TRUE(o.buffer.enabled);
  EXPECT_EQ(o.buffer.max_staleness, 2);
}

// Buffered: clients_per_round is how many clients start on each model version, split over the
// regions by their clients; none by default, at least a region's share of a buffer, and 2 under
// secure aggregation.
TEST(ApplyExperimentTest, ABufferedRegionStartsItsShareOfClientsPerRoundOnEachVersion) {
  v1::ExperimentSpec spec = TwoRegions();  // east 3, west 2
  v1::Federation* f = spec.mutable_federation();
  f->set_mode("buffered");
  f->set_buffer_size(2);
  f->set_clients_per_round(1);  // every client: no limit
  RegionalAggregatorOptions o;
  o.region = "east";
  ASSERT_TRUE(ApplyExperiment(spec, &o).ok());
  EXPECT_EQ(o.buffer.starts_per_version, 0);
  f->set_clients_per_round(3);  // 3 of 5: east ceil(9 / 5) = 2, west ceil(6 / 5) = 2
  ASSERT_TRUE(ApplyExperiment(spec, &o).ok());
  EXPECT_EQ(o.buffer.starts_per_version, 2);
  EXPECT_EQ(RegionVersionStarts(*f, 3), 2);
  EXPECT_EQ(RegionVersionStarts(*f, 2), 2);
  f->set_clients_per_round(0.4);  // 2 of 5: east ceil(6 / 5) = 2, west ceil(4 / 5) = 1
  EXPECT_EQ(RegionVersionStarts(*f, 3), 2);
  EXPECT_EQ(RegionVersionStarts(*f, 2), 1);
  f->set_buffer_size(4);  // a region's share of the buffer, 2, is the least
  EXPECT_EQ(RegionVersionStarts(*f, 2), 2);
  f->set_buffer_size(2);
  f->set_secure_aggregation(true);  // each SecAgg instance needs 2
  EXPECT_EQ(RegionVersionStarts(*f, 2), 2);
  // The global tier gives its regions every version.
  absl::StatusOr<TierOptions> global = GlobalTierOptions(*f, "x", 10, "");
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(global->coordinator.buffer.starts_per_version, 0);
}

TEST(ApplyExperimentTest, AnUnknownRegionOrNoFederationIsRefusedByName) {
  RegionalAggregatorOptions o;
  o.region = "north";
  absl::Status unknown = ApplyExperiment(TwoRegions(), &o);
  EXPECT_TRUE(absl::IsInvalidArgument(unknown));
  EXPECT_THAT(unknown.message(), HasSubstr("north"));
  EXPECT_TRUE(absl::IsInvalidArgument(ApplyExperiment(v1::ExperimentSpec(), &o)));
}

TEST(GlobalTierOptionsTest, EachRegionSpeaksForItsClientsWithTheSameWeightBound) {
  const v1::ExperimentSpec spec = TwoRegions();
  absl::StatusOr<TierOptions> o = GlobalTierOptions(spec.federation(), "run-1", 10, "/tmp/x");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->coordinator.experiment_id, "run-1");
  EXPECT_EQ(o->coordinator.model_size, 10);
  EXPECT_EQ(o->policy.region_clients.at("east"), 3);
  EXPECT_EQ(o->policy.region_clients.at("west"), 2);
  RegionalAggregatorOptions regional;
  regional.region = "east";
  ASSERT_TRUE(ApplyExperiment(spec, &regional).ok());
  EXPECT_EQ(o->policy.max_client_weight, regional.max_client_weight);
  EXPECT_FALSE(o->secure);
}

TEST(GlobalTierOptionsTest, AReproducibleRunOfAModelStagedInFilesIsRefused) {
  v1::ExperimentSpec spec = TwoRegions();
  spec.mutable_federation()->set_reproducible(true);
  const size_t big = RoundCoordinatorOptions{}.file_staging_from;
  absl::StatusOr<TierOptions> o = GlobalTierOptions(spec.federation(), "run-1", big, "/tmp/x");
  EXPECT_TRUE(absl::IsInvalidArgument(o.status()));
  EXPECT_THAT(o.status().message(), HasSubstr("federation.reproducible"));
}

}  // namespace
}  // namespace sextant
