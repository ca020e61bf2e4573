#include "federation/round_coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

RoundCoordinator Make(FakeClock* clock, size_t d, int64_t min_updates = 1, double deadline = 0) {
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = d;
  o.min_updates = min_updates;
  o.deadline_seconds = deadline;
  return *RoundCoordinator::Create(o, clock);
}

// Sends `update` in chunks of `chunk` floats.
absl::Status Send(RoundCoordinator& c, const std::string& client, int64_t round,
                  const std::vector<float>& update, double weight, size_t chunk = 3,
                  const std::string& experiment = "exp") {
  absl::Status s = c.Begin({experiment, round, client, weight}, update.size(), 1);
  for (size_t off = 0; s.ok() && off < update.size(); off += chunk) {
    const size_t n = std::min(chunk, update.size() - off);
    s = c.AddChunk(client, off, absl::MakeConstSpan(update.data() + off, n));
  }
  return s.ok() ? c.Finish(client) : s;
}

TEST(RoundCoordinatorTest, ChunkedUpdatesFoldToTheExactWeightedMean) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 7);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b", "c"}).ok());
  std::vector<std::vector<float>> u = {
      {1, 2, 3, 4, 5, 6, 7}, {0.5, 0, -1, 2, 2, 2, 8}, {4, 4, 4, 4, 4, 4, 4}};
  std::vector<double> w = {1, 2, 4};
  const char* ids[] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Send(c, ids[i], 1, u[i], w[i]).ok());
  EXPECT_TRUE(c.ReadyToClose());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 3);
  EXPECT_DOUBLE_EQ(out->total_weight, 7);
  for (int j = 0; j < 7; ++j) {
    const double exact = (u[0][j] * 1 + u[1][j] * 2 + u[2][j] * 4) / 7.0;
    EXPECT_NEAR(out->mean[j], exact, 1e-6) << j;
  }
}

// Central DP: whatever a client declares and sends, its update counts with weight 1 and at most
// norm C, so one dishonest client cannot move the mean beyond C / n.
TEST(RoundCoordinatorTest, ClipNormBoundsEveryUpdateAndIgnoresTheDeclaredWeight) {
  FakeClock clock;
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = 4;
  o.clip_norm = 1.0;
  RoundCoordinator c = *RoundCoordinator::Create(o, &clock);
  ASSERT_TRUE(c.OpenRound(1, {"honest", "dishonest"}).ok());
  ASSERT_TRUE(Send(c, "honest", 1, {0.5, 0, 0, 0}, 1).ok());             // inside the ball
  ASSERT_TRUE(Send(c, "dishonest", 1, {0, 300, 0, 400}, 1e6).ok());  // norm 500, weight 1e6
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_DOUBLE_EQ(out->total_weight, 2);
  EXPECT_EQ(c.clipped_updates(), 1);
  EXPECT_NEAR(out->mean[0], 0.25, 1e-6);
  EXPECT_NEAR(out->mean[1], 0.3, 1e-6);  // (0, 0.6, 0, 0.8) after clipping, halved
  EXPECT_NEAR(out->mean[2], 0, 1e-6);
  EXPECT_NEAR(out->mean[3], 0.4, 1e-6);
  o.clip_norm = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(RoundCoordinator::Create(o, &clock).status()));
}

// A large model's update is staged in a file and folded from it a chunk at a time: the round's
// mean is bit for bit the in-memory one, a bad chunk still drops the whole update, the DP clip
// still bounds it, and no model-sized buffer is held.
TEST(RoundCoordinatorTest, AFileStagedUpdateFoldsLikeAnInMemoryOne) {
  const size_t d = (size_t{1} << 20) + 1000;  // past one fold chunk
  char tmpl[] = "/tmp/sextant-staging-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<float> u1(d), u2(d), nan(d, 1.0f);
  for (size_t i = 0; i < d; ++i) {
    u1[i] = static_cast<float>(i % 97) / 97.0f;
    u2[i] = -static_cast<float>(i % 13);
  }
  nan[d - 5] = std::nanf("");
  for (double clip : {0.0, 100.0}) {
    RoundOutcome outs[2];
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = d;
    o.clip_norm = clip;
    FakeClock clock;
    RoundCoordinator memory = *RoundCoordinator::Create(o, &clock);
    o.staging_dir = dir;
    o.file_staging_from = 0;
    RoundCoordinator file = *RoundCoordinator::Create(o, &clock);
    EXPECT_TRUE(file.accumulator().stages_in_file());
    EXPECT_FALSE(memory.accumulator().stages_in_file());
    std::vector<std::vector<float>> means;
    for (RoundCoordinator* c : {&memory, &file}) {
      ASSERT_TRUE(c->OpenRound(1, {"a", "b", "bad"}).ok());
      ASSERT_TRUE(Send(*c, "a", 1, u1, 3, 100000).ok());
      EXPECT_TRUE(absl::IsInvalidArgument(Send(*c, "bad", 1, nan, 1, 100000)));
      ASSERT_TRUE(Send(*c, "b", 1, u2, 1, 70000).ok());
      absl::StatusOr<RoundOutcome> out = c->Close();
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->senders, 2);
      means.emplace_back(out->mean.begin(), out->mean.end());
    }
    EXPECT_EQ(file.accumulator().staging_capacity(), 0u);
    EXPECT_EQ(file.clipped_updates(), memory.clipped_updates());
    if (clip > 0) EXPECT_EQ(file.clipped_updates(), 2);
    ASSERT_EQ(means[0].size(), means[1].size());
    size_t differ = 0;
    for (size_t i = 0; i < d; ++i) {
      // Clipped: the two scale in float and in double, a last-bit difference at most.
      if (clip == 0 ? means[0][i] != means[1][i]
                    : std::fabs(means[0][i] - means[1][i]) > 1e-6f * (1 + std::fabs(means[0][i])))
        ++differ;
    }
    EXPECT_EQ(differ, 0u) << "clip " << clip;
    // The staging file bears no name: nothing is left behind, whatever ends the process.
    EXPECT_TRUE(std::filesystem::is_empty(dir));
  }
  std::filesystem::remove_all(dir);
}

TEST(RoundCoordinatorTest, AStagingFolderThatCannotHoldAFileRefusesTheUpdateAndNamesIt) {
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = 4;
  o.staging_dir = "/nonexistent/staging";
  o.file_staging_from = 0;
  FakeClock clock;
  RoundCoordinator c = *RoundCoordinator::Create(o, &clock);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  const absl::Status s = Send(c, "a", 1, {1, 1, 1, 1}, 1, 4);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), testing::HasSubstr("/nonexistent/staging"));
  // The refused sender holds no slot: the next one is refused for the same reason, not
  // because "a" is still being received.
  const absl::Status next = Send(c, "b", 1, {2, 2, 2, 2}, 1, 4);
  EXPECT_TRUE(absl::IsUnavailable(next)) << next;
  EXPECT_THAT(std::string(next.message()), testing::HasSubstr("/nonexistent/staging"));
}

TEST(RoundCoordinatorTest, AnotherExperimentOrRoundIsAbortedCountedAndNeverAggregated) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 3);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1, 1, 1}, 1).ok());
  ASSERT_TRUE(c.Close().ok());
  ASSERT_TRUE(c.OpenRound(2, {"a", "b"}).ok());
  EXPECT_TRUE(absl::IsAborted(Send(c, "a", 2, {100, 100, 100}, 1, 3, "other-exp")));
  EXPECT_TRUE(absl::IsAborted(Send(c, "b", 1, {100, 100, 100}, 1)));  // stale
  EXPECT_TRUE(absl::IsAborted(Send(c, "b", 3, {100, 100, 100}, 1)));  // future
  ASSERT_TRUE(Send(c, "a", 2, {2, 2, 2}, 1).ok());
  EXPECT_TRUE(absl::IsAborted(Send(c, "a", 2, {100, 100, 100}, 1)));  // duplicate
  EXPECT_EQ(c.gate().rejections("a", RejectReason::kWrongExperiment), 1);
  EXPECT_EQ(c.gate().rejections("b", RejectReason::kStaleRound), 1);
  EXPECT_EQ(c.gate().rejections("b", RejectReason::kFutureRound), 1);
  EXPECT_EQ(c.gate().rejections("a", RejectReason::kDuplicate), 1);
  clock.Advance(absl::Hours(1));
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->rejected, 4);
  EXPECT_THAT(std::vector<float>(out->mean.begin(), out->mean.end()), testing::Each(2.0f));
}

TEST(RoundCoordinatorTest, ClosesAtTheDeadlineOnceMinUpdatesArrivedAndRejectsLateOnes) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 2, /*min_updates=*/2, /*deadline=*/30);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b", "c"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1, 1}, 1).ok());
  clock.Advance(absl::Seconds(31));
  EXPECT_FALSE(c.ReadyToClose());  // deadline passed but only one of min 2
  ASSERT_TRUE(Send(c, "b", 1, {3, 3}, 1).ok());
  EXPECT_TRUE(c.ReadyToClose());
  // "c" started sending before the close: its remaining chunks are stale.
  ASSERT_TRUE(c.Begin({"exp", 1, "c", 1}, 2, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->count, 2);
  EXPECT_FLOAT_EQ(out->mean[0], 2);
  EXPECT_TRUE(absl::IsAborted(Send(c, "c", 1, {9, 9}, 1)));
  EXPECT_GE(c.gate().rejections("c", RejectReason::kStaleRound), 1);
}

// A round opened while its participants were still starting: its deadline counts from the
// restart, not from OpenRound.
TEST(RoundCoordinatorTest, RestartedDeadlineCountsFromTheRestart) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 1, /*min_updates=*/1, /*deadline=*/30);
  c.RestartDeadline();  // no round open: nothing to restart
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1}, 1).ok());
  clock.Advance(absl::Seconds(25));
  c.RestartDeadline();
  clock.Advance(absl::Seconds(25));  // 50 s after OpenRound, 25 s after the restart
  EXPECT_FALSE(c.DeadlinePassed());
  EXPECT_FALSE(c.ReadyToClose());
  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(c.DeadlinePassed());
  EXPECT_TRUE(c.ReadyToClose());
  // The next round's deadline counts from its own OpenRound again.
  ASSERT_TRUE(c.Close().ok());
  ASSERT_TRUE(c.OpenRound(2, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 2, {1}, 1).ok());
  clock.Advance(absl::Seconds(29));
  EXPECT_FALSE(c.ReadyToClose());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(c.ReadyToClose());
}

TEST(RoundCoordinatorTest, WaitsForEveryParticipantWithoutADeadline) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 1);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1}, 1).ok());
  clock.Advance(absl::Hours(10));
  EXPECT_FALSE(c.ReadyToClose());
}

TEST(RoundCoordinatorTest, NonFiniteChunkDropsTheUpdateButTheRoundGoesOn) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(Send(c, "a", 1, {1, 1, NAN, 1}, 1, 2)));
  EXPECT_EQ(c.gate().rejections("a", RejectReason::kNonFinite), 1);
  ASSERT_TRUE(Send(c, "b", 1, {5, 5, 5, 5}, 3).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->senders, 1);
  EXPECT_THAT(std::vector<float>(out->mean.begin(), out->mean.end()), testing::Each(5.0f));
}

TEST(RoundCoordinatorTest, OneUpdateIsStagedAtATimeAndAnAbandonedOneFreesTheBuffer) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(c.Begin({"exp", 1, "a", 1}, 4, 1).ok());
  EXPECT_TRUE(absl::IsUnavailable(c.Begin({"exp", 1, "b", 1}, 4, 1)));
  c.Abandon("a");  // its stream broke off: not a rejection, and it may retry
  EXPECT_EQ(c.gate().rejections("a"), 0);
  ASSERT_TRUE(Send(c, "b", 1, {1, 2, 3, 4}, 1).ok());
  ASSERT_TRUE(Send(c, "a", 1, {3, 2, 1, 0}, 1).ok());
  EXPECT_EQ(c.accumulator().staging_capacity(), 4u);
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(std::vector<float>(out->mean.begin(), out->mean.end()), testing::Each(2.0f));
}

TEST(RoundCoordinatorTest, ChunkGapsAndShortUpdatesAreInvalid) {
  FakeClock clock;
  RoundCoordinator c = Make(&clock, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a"}).ok());
  ASSERT_TRUE(c.Begin({"exp", 1, "a", 1}, 4, 1).ok());
  std::vector<float> v = {1, 2};
  EXPECT_TRUE(absl::IsInvalidArgument(c.AddChunk("a", 2, v)));  // gap: expected offset 0
  ASSERT_TRUE(c.Begin({"exp", 1, "a", 1}, 4, 1).ok());
  ASSERT_TRUE(c.AddChunk("a", 0, v).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.Finish("a")));  // 2 of 4 values
  EXPECT_FALSE(c.Close().ok());                         // nothing accepted
}

RoundCoordinator MakeRobust(FakeClock* clock, size_t d, absl::string_view rule, int64_t f = 1,
                            int64_t m = 0) {
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = d;
  o.rule = *MakeAggregationRule(rule, 0.25, f, m);
  return *RoundCoordinator::Create(o, clock);
}

// Five honest-ish updates and one attacker far away.
std::vector<std::vector<float>> WithOneAttacker() {
  return {{1, 2}, {1.5, 2.5}, {0.5, 1.5}, {1.2, 2.2}, {0.8, 1.8}, {1000, -1000}};
}

TEST(RoundCoordinatorTest, MedianRuleKeepsUpdatesAndIgnoresTheOutlierAndWeights) {
  FakeClock clock;
  RoundCoordinator c = MakeRobust(&clock, 2, "median");
  const auto u = WithOneAttacker();
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "x"};
  ASSERT_TRUE(c.OpenRound(1, ids).ok());
  for (size_t i = 0; i < u.size(); ++i) ASSERT_TRUE(Send(c, ids[i], 1, u[i], 1.0 + i, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  // numpy.median over {0.5, 0.8, 1, 1.2, 1.5, 1000} and {-1000, 1.5, 1.8, 2, 2.2, 2.5}.
  EXPECT_NEAR(out->mean[0], 1.1, 1e-6);
  EXPECT_NEAR(out->mean[1], 1.9, 1e-6);
  EXPECT_DOUBLE_EQ(out->total_weight, 21);  // upstream still weights the region by examples
  EXPECT_EQ(out->count, 6);
}

TEST(RoundCoordinatorTest, TrimmedMeanRuleCutsAQuarterAtEachEnd) {
  FakeClock clock;
  RoundCoordinator c = MakeRobust(&clock, 2, "trimmed_mean");
  const auto u = WithOneAttacker();
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "x"};
  ASSERT_TRUE(c.OpenRound(1, ids).ok());
  for (size_t i = 0; i < u.size(); ++i) ASSERT_TRUE(Send(c, ids[i], 1, u[i], 1, 2).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  // floor(0.25 * 6) = 1 value cut at each end: mean of {0.8, 1, 1.2, 1.5} and {1.5, 1.8, 2, 2.2}.
  EXPECT_NEAR(out->mean[0], (0.8 + 1 + 1.2 + 1.5) / 4, 1e-6);
  EXPECT_NEAR(out->mean[1], (1.5 + 1.8 + 2 + 2.2) / 4, 1e-6);
}

TEST(RoundCoordinatorTest, MultiKrumRuleLeavesTheAttackerOutAndSaysHowMany) {
  FakeClock clock;
  RoundCoordinator c = MakeRobust(&clock, 2, "multi_krum", /*f=*/1);
  const auto u = WithOneAttacker();
  std::vector<std::string> ids = {"a", "b", "c", "d", "e", "x"};
  ASSERT_TRUE(c.OpenRound(1, ids).ok());
  for (size_t i = 0; i < u.size(); ++i) ASSERT_TRUE(Send(c, ids[i], 1, u[i], 1, 2).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->excluded, 1);  // m = n - f = 5 selected
  EXPECT_NEAR(out->mean[0], 1.0, 1e-6);
  EXPECT_NEAR(out->mean[1], 2.0, 1e-6);
}

TEST(RoundCoordinatorTest, KrumWithTooFewUpdatesShrinksFAndStillProducesAModel) {
  FakeClock clock;
  RoundCoordinator c = MakeRobust(&clock, 2, "krum", /*f=*/3);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b", "c", "d"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1, 1}, 1).ok());
  ASSERT_TRUE(Send(c, "b", 1, {1.1f, 1.1f}, 1).ok());
  ASSERT_TRUE(Send(c, "c", 1, {50, 50}, 1).ok());
  ASSERT_TRUE(Send(c, "d", 1, {0.9f, 0.9f}, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  // n = 4 allows f = 0: the update closest to the others is chosen, alone.
  EXPECT_EQ(out->excluded, 3);
  EXPECT_NEAR(out->mean[0], 1.0, 1e-6);
}

TEST(RoundCoordinatorTest, RobustRuleStartsEachRoundWithoutTheLastRoundsUpdates) {
  FakeClock clock;
  RoundCoordinator c = MakeRobust(&clock, 1, "median");
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {100}, 1).ok());
  ASSERT_TRUE(Send(c, "b", 1, {100}, 1).ok());
  ASSERT_TRUE(c.Close().ok());
  ASSERT_TRUE(c.OpenRound(2, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 2, {1}, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(out->mean[0], 1);
}

// The outcome of every order in which five updates can arrive, folded as they arrive or, with
// options.ordered, at Close in sender order. Values span six orders of magnitude, so that the
// float sums depend on their order.
std::vector<std::pair<std::vector<float>, double>> OutcomesOverArrivalOrders(bool ordered,
                                                                            bool buffered) {
  const int kSenders = 5;
  const size_t d = 64;
  std::vector<std::vector<float>> u(kSenders, std::vector<float>(d));
  uint64_t x = 88172645463325252ULL;
  for (auto& v : u) {
    for (float& f : v) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      f = static_cast<float>(static_cast<double>(x % 2000001) / 1e6 - 1.0) *
          std::pow(10.0f, static_cast<float>(x % 7) - 3);
    }
  }
  std::vector<int> order = {0, 1, 2, 3, 4};
  std::vector<std::pair<std::vector<float>, double>> outcomes;
  do {
    FakeClock clock;
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = d;
    o.ordered = ordered;
    o.min_updates = kSenders;
    o.buffer.enabled = buffered;
    RoundCoordinator c = *RoundCoordinator::Create(o, &clock);
    const std::vector<std::string> ids = {"a", "b", "c", "d", "e"};
    EXPECT_TRUE(c.OpenRound(1, ids).ok());
    if (buffered) {
      EXPECT_TRUE(c.OpenRound(3, ids).ok());
    }
    for (int i : order) {
      const int64_t round = buffered ? 1 + i % 3 : 1;  // buffered: staleness 0 to 2
      absl::Status s = c.Begin({"exp", round, ids[i], 1.0 + i}, d, 1);
      if (s.ok()) s = c.AddChunk(ids[i], 0, u[i]);
      if (s.ok()) s = c.Finish(ids[i], SenderMetrics{0.1f * (i + 1) + 1e-7 * i, 0, 0, 0});
      EXPECT_TRUE(s.ok()) << s;
    }
    absl::StatusOr<RoundOutcome> out = c.Close();
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    outcomes.emplace_back(std::vector<float>(out->mean.begin(), out->mean.end()),
                          out->metrics.train_loss);
  } while (std::next_permutation(order.begin(), order.end()));
  return outcomes;
}

// options.ordered: the mean and the metrics are the same bit for bit whatever the order in
// which the updates arrived (synchronous and buffered, with staleness damping); folded as they
// arrive, some orders give other bits.
TEST(RoundCoordinatorTest, AnOrderedFoldGivesTheSameBitsForEveryArrivalOrder) {
  for (bool buffered : {false, true}) {
    const auto ordered = OutcomesOverArrivalOrders(true, buffered);
    ASSERT_EQ(ordered.size(), 120u);
    for (const auto& o : ordered) {
      EXPECT_EQ(o.first, ordered[0].first) << "buffered " << buffered;
      EXPECT_EQ(o.second, ordered[0].second);
    }
    const auto arriving = OutcomesOverArrivalOrders(false, buffered);
    bool some_differ = false;
    for (const auto& o : arriving) some_differ |= o.first != arriving[0].first;
    EXPECT_TRUE(some_differ) << "the test's values do not show the order";
    // Both are the weighted mean: they differ only in rounding.
    for (size_t j = 0; j < ordered[0].first.size(); ++j) {
      EXPECT_NEAR(ordered[0].first[j], arriving[0].first[j],
                  1e-6 * (1 + std::abs(arriving[0].first[j])));
    }
  }
}

TEST(RoundCoordinatorTest, AnOrderedFoldKeepsUpdatesInMemorySoItRefusesFileStaging) {
  FakeClock clock;
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = 16;
  o.ordered = true;
  o.staging_dir = ::testing::TempDir();
  o.file_staging_from = 8;
  EXPECT_TRUE(absl::IsInvalidArgument(RoundCoordinator::Create(o, &clock).status()));
  o.file_staging_from = 32;  // the model is held in memory: fine
  EXPECT_TRUE(RoundCoordinator::Create(o, &clock).ok());
}

TEST(RoundCoordinatorTest, UnknownRuleOrParameterOutOfRangeIsInvalidArgument) {
  EXPECT_TRUE(absl::IsInvalidArgument(MakeAggregationRule("mode", 0.1, 1, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeAggregationRule("trimmed_mean", 0.5, 1, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeAggregationRule("krum", 0.1, -1, 0).status()));
  EXPECT_TRUE(MakeAggregationRule("multi_krum", 0.1, 2, 3).ok());
}

}  // namespace

RoundCoordinator MakeBuffered(FakeClock* clock, size_t d, int64_t buffer_size,
                              int64_t max_staleness, bool distinct = false,
                              BufferPolicy::Weighting weighting =
                                  BufferPolicy::Weighting::kPolynomial) {
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = d;
  o.min_updates = buffer_size;
  o.buffer.enabled = true;
  o.buffer.max_staleness = max_staleness;
  o.buffer.weighting = weighting;
  o.buffer.distinct_senders = distinct;
  return *RoundCoordinator::Create(o, clock);
}

TEST(BufferedRoundTest, StaleUpdatesAreDampedPolynomiallyAndTheMeanIsOverTheirFullWeights) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 2, 3, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b", "c"}).ok());
  ASSERT_TRUE(c.OpenRound(2, {"a", "b", "c"}).ok());
  ASSERT_TRUE(c.OpenRound(4, {"a", "b", "c"}).ok());
  // Computed on versions 4 (fresh), 2 (2 stale) and 1 (3 stale).
  ASSERT_TRUE(Send(c, "a", 4, {1, 2}, 1).ok());
  ASSERT_TRUE(Send(c, "b", 2, {1, 2}, 2).ok());
  EXPECT_FALSE(c.ReadyToClose());
  ASSERT_TRUE(Send(c, "c", 1, {1, 2}, 1).ok());
  EXPECT_TRUE(c.ReadyToClose());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 3);
  EXPECT_DOUBLE_EQ(out->total_weight, 4);
  const double f = (1 * 1.0 + 2 / std::sqrt(3.0) + 1 * 0.5) / 4;  // (1 + s)^-0.5
  EXPECT_NEAR(out->mean[0], f, 1e-6);
  EXPECT_NEAR(out->mean[1], 2 * f, 1e-6);
}

TEST(BufferedRoundTest, ConstantWeightingIsThePlainMean) {
  FakeClock clock;
  RoundCoordinator c =
      MakeBuffered(&clock, 1, 2, 4, false, BufferPolicy::Weighting::kConstant);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(c.OpenRound(3, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {3}, 1).ok());
  ASSERT_TRUE(Send(c, "b", 3, {1}, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(out->mean[0], 2, 1e-6);
}

TEST(BufferedRoundTest, AnUpdateStalerThanMaxStalenessIsRejectedAndCounted) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 1, 3, 2);
  for (int64_t v = 1; v <= 5; ++v) ASSERT_TRUE(c.OpenRound(v, {"a"}).ok());
  absl::Status s = Send(c, "a", 2, {1}, 1);
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_THAT(std::string(s.message()), testing::HasSubstr("3 rounds stale; max_staleness is 2"));
  EXPECT_EQ(c.gate().rejections("a", RejectReason::kStaleRound), 1);
  EXPECT_TRUE(Send(c, "a", 3, {1}, 1).ok());  // 2 stale: still in
  EXPECT_TRUE(absl::IsAborted(Send(c, "a", 6, {1}, 1)));  // not published yet
  EXPECT_EQ(c.gate().rejections("a", RejectReason::kFutureRound), 1);
}

TEST(BufferedRoundTest, ANewVersionKeepsTheBufferAndTheUpdateInFlight) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 4, 2, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1, 1, 1, 1}, 1).ok());
  ASSERT_TRUE(c.Begin({"exp", 1, "b", 1}, 4, 1).ok());
  ASSERT_TRUE(c.AddChunk("b", 0, std::vector<float>{3, 3}).ok());
  ASSERT_TRUE(c.OpenRound(2, {"a", "b"}).ok());  // the model moves on mid-update
  ASSERT_TRUE(c.AddChunk("b", 2, std::vector<float>{3, 3}).ok());
  ASSERT_TRUE(c.Finish("b").ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->count, 2);
  EXPECT_NEAR(out->mean[0], (1 + 3) / 2.0, 1e-6);  // b's staleness was taken at its Begin: 0
}

TEST(BufferedRoundTest, AFullOrDrainingBufferMakesSendersWaitAndTheNextBufferStartsEmpty) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 1, 1, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {2}, 1).ok());
  EXPECT_TRUE(absl::IsUnavailable(Send(c, "b", 1, {8}, 1)));  // full: wait, not a rejection
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(c.ReadyToClose());
  EXPECT_TRUE(absl::IsUnavailable(Send(c, "b", 1, {8}, 1)));  // draining: the mean is in use
  EXPECT_NEAR(out->mean[0], 2, 1e-6);
  c.ResumeBuffering();
  ASSERT_TRUE(Send(c, "b", 1, {8}, 1).ok());
  out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->count, 1);
  EXPECT_NEAR(out->mean[0], 8, 1e-6);
  EXPECT_EQ(c.total_rejections(), 0);
}

TEST(BufferedRoundTest, AnUpdateFinishedDuringTheDrainGoesIntoTheNextBuffer) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 2, 2, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "b", 1, {9, 9}, 1).ok());
  ASSERT_TRUE(c.Begin({"exp", 1, "a", 1}, 2, 1).ok());
  ASSERT_TRUE(c.AddChunk("a", 0, std::vector<float>{1}).ok());
  absl::StatusOr<RoundOutcome> first = c.Close();  // before it is full: b's update alone
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(c.AddChunk("a", 1, std::vector<float>{1}).ok());
  ASSERT_TRUE(c.Finish("a").ok());  // waits, staged, for the drain to end
  EXPECT_EQ(first->count, 1);
  EXPECT_NEAR(first->mean[0], 9, 1e-6);  // untouched while in use
  c.ResumeBuffering();
  EXPECT_EQ(c.accepted_count(), 1);
  absl::StatusOr<RoundOutcome> second = c.Close();
  ASSERT_TRUE(second.ok());
  EXPECT_NEAR(second->mean[0], 1, 1e-6);
}

TEST(BufferedRoundTest, DistinctSendersWaitForTheNextBufferInsteadOfDeliveringTwice) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 1, 2, 4, /*distinct=*/true);
  ASSERT_TRUE(c.OpenRound(1, {"a", "b"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1}, 1).ok());
  EXPECT_TRUE(absl::IsUnavailable(Send(c, "a", 1, {1}, 1)));
  ASSERT_TRUE(c.OpenRound(2, {"a", "b"}).ok());  // a new version does not start a new buffer
  EXPECT_TRUE(absl::IsUnavailable(Send(c, "a", 2, {1}, 1)));
  ASSERT_TRUE(Send(c, "b", 2, {3}, 1).ok());
  ASSERT_TRUE(c.Close().ok());
  c.ResumeBuffering();
  EXPECT_TRUE(Send(c, "a", 2, {1}, 1).ok());
  EXPECT_EQ(c.total_rejections(), 0);
}

TEST(BufferedRoundTest, WithoutDistinctSendersOneClientMayFillTheBuffer) {
  FakeClock clock;
  RoundCoordinator c = MakeBuffered(&clock, 1, 2, 4);
  ASSERT_TRUE(c.OpenRound(1, {"a"}).ok());
  ASSERT_TRUE(Send(c, "a", 1, {1}, 1).ok());
  ASSERT_TRUE(Send(c, "a", 1, {3}, 1).ok());
  absl::StatusOr<RoundOutcome> out = c.Close();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->count, 2);
  EXPECT_NEAR(out->mean[0], 2, 1e-6);
}

TEST(BufferedRoundTest, ARobustRuleCannotBuffer) {
  FakeClock clock;
  RoundCoordinatorOptions o;
  o.experiment_id = "exp";
  o.model_size = 1;
  o.buffer.enabled = true;
  o.rule.kind = AggregationRule::Kind::kMedian;
  EXPECT_TRUE(absl::IsInvalidArgument(RoundCoordinator::Create(o, &clock).status()));
}

}  // namespace sextant
