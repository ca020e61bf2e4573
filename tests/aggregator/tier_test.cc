// A tier's round, publish to close, on a FakeClock whose Advance passes the round's deadline;
// and a regional tier's side of the tier above, against a real upstream hub on loopback: it
// pulls the round's model and pushes its aggregate as its own id, and a pull gives up on an
// unreachable upstream after unreachable_timeout on the tier's clock, or when interrupted.
#include "aggregator/tier.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/fakes/clock_ticker.h"

namespace sextant {
namespace {

constexpr int64_t kSize = 6;

// The round's model, `weights` as a tier reads them, in a file `name` of the test's folder.
std::string ModelFile(const std::string& name, const std::vector<float>& weights) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(weights.data()), weights.size() * sizeof(float));
  return path;
}

TierOptions RegionalTier(const std::string& target) {
  TierOptions o;
  o.coordinator.experiment_id = "exp";
  o.coordinator.model_size = kSize;
  o.policy.region = "eu";
  UpstreamOptions& up = o.upstream.emplace();
  up.stub = v1::FederationService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  up.target = target;
  up.sender_id = "eu";
  up.unreachable_timeout = absl::Seconds(60);
  return o;
}

TEST(TierTest, PullsTheRoundAndPushesItsAggregateAsItsOwnId) {
  FakeClock clock;
  TierOptions global;
  global.coordinator.experiment_id = "exp";
  global.coordinator.model_size = kSize;
  absl::StatusOr<std::unique_ptr<Tier>> upstream = Tier::Start(global, &clock);
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  const std::vector<float> weights = {1, 2, 3, 4, 5, 6};
  const std::string model = ModelFile("tier-test-model.f32", weights);
  std::map<std::string, RoundTask> tasks;
  tasks["eu"].model_size = kSize;
  ASSERT_TRUE((*upstream)->hub().Publish(1, model, std::move(tasks)).ok());

  absl::StatusOr<std::unique_ptr<Tier>> tier =
      Tier::Start(RegionalTier(absl::StrCat("127.0.0.1:", (*upstream)->port())), &clock);
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::vector<float> pulled(kSize);
  absl::StatusOr<RoundTask> task = (*tier)->PullRound(
      0, 5,
      [&](int64_t offset, absl::Span<const float> v) {
        std::copy(v.begin(), v.end(), pulled.begin() + offset);
        return absl::OkStatus();
      },
      [] { return absl::OkStatus(); });
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->round, 1);
  EXPECT_EQ(pulled, weights);
  PushHeader header;
  header.round = 1;
  header.client_id = "not-this";  // the tier sends as its own id whatever the header says
  header.weight = 3;
  header.count = 1;
  const std::vector<float> mean(kSize, 0.5f);
  ASSERT_TRUE((*tier)->PushAggregate(header, mean).ok());
  std::vector<SenderReport> senders;
  absl::StatusOr<RoundOutcome> out = (*upstream)->hub().Close(&senders);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(senders.size(), 1u);
  EXPECT_EQ(senders[0].client_id, "eu");
  EXPECT_FLOAT_EQ(out->mean[0], 0.5f);
  // The global tier has no tier above.
  EXPECT_TRUE(absl::IsFailedPrecondition((*upstream)->PushAggregate(header, mean).status()));
}

// The tier runs the round whole: it publishes the model to the round's two participants, one
// sends, the other never does, and the round closes at its deadline on the tier's clock with
// the one update; the silent one counts the round's length. An interrupt ends the wait.
TEST(TierTest, RunsARoundFromPublishToCloseAndClosesAtTheDeadlineOnItsClock) {
  FakeClock clock;
  TierOptions o;
  o.coordinator.experiment_id = "exp";
  o.coordinator.model_size = kSize;
  absl::StatusOr<std::unique_ptr<Tier>> tier = Tier::Start(o, &clock);
  ASSERT_TRUE(tier.ok()) << tier.status();
  const std::vector<float> weights(kSize, 1.0f);
  const std::string model = ModelFile("tier-run-round.f32", weights);
  RoundPlan plan;
  plan.round = 1;
  plan.model_path = model;
  plan.tasks["a"].model_size = kSize;
  plan.tasks["b"].model_size = kSize;
  plan.deadline_seconds = 30;
  plan.min_updates = 1;
  auto stub = v1::FederationService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*tier)->port()), grpc::InsecureChannelCredentials()));
  std::atomic<bool> closed_flag{false};
  std::thread a([&] {
    std::vector<float> pulled(kSize);
    absl::StatusOr<RoundTask> task =
        PullRound(stub.get(), "exp", "a", 0, 10, [&](int64_t at, absl::Span<const float> v) {
          std::copy(v.begin(), v.end(), pulled.begin() + at);
          return absl::OkStatus();
        });
    ASSERT_TRUE(task.ok()) << task.status();
    ASSERT_EQ(task->round, 1);
    EXPECT_EQ(pulled, weights);
    clock.Advance(absl::Seconds(4));  // a trains for 4 s
    const std::vector<float> update(kSize, 0.25f);
    ASSERT_TRUE(PushUpdate(stub.get(), PushHeader{"exp", 1, "a", 2, 1}, update).ok());
    ClockTicker ticker(&clock, absl::Seconds(1));  // then time runs on: b stays silent
    while (!closed_flag.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  const absl::Time start = clock.Now();
  absl::StatusOr<ClosedRound> closed =
      (*tier)->RunRound(std::move(plan), [] { return absl::OkStatus(); });
  closed_flag = true;
  a.join();
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_GE(clock.Now() - start, absl::Seconds(30));
  EXPECT_EQ(closed->outcome.round, 1);
  EXPECT_EQ(closed->outcome.count, 1);
  EXPECT_FLOAT_EQ(closed->outcome.mean[0], 0.25f);
  ASSERT_EQ(closed->senders.size(), 1u);
  EXPECT_EQ(closed->senders[0].client_id, "a");
  ASSERT_EQ(closed->client_seconds.size(), 2u);
  EXPECT_EQ(closed->client_seconds[0].first, "a");
  EXPECT_NEAR(closed->client_seconds[0].second, 4, 1e-9);
  EXPECT_EQ(closed->client_seconds[1].first, "b");
  EXPECT_GE(closed->client_seconds[1].second, 30);

  RoundPlan next;
  next.round = 2;
  next.model_path = model;
  next.tasks["a"].model_size = kSize;
  next.deadline_seconds = 30;
  int asked = 0;
  ClockTicker ticker(&clock, absl::Milliseconds(50));  // the tier asks every 200 ms of its clock
  closed = (*tier)->RunRound(std::move(next), [&] {
    return ++asked == 2 ? absl::CancelledError("stopped") : absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsCancelled(closed.status())) << closed.status();
}

// Nothing listens on the port: each pull is refused at once, and the tier retries on its
// clock until unreachable_timeout, then names upstream. An interrupt ends the retries first.
TEST(TierTest, APullGivesUpOnAnUnreachableUpstreamAfterTheTimeoutOrAnInterrupt) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string target = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));  // bound, closed
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<Tier>> tier = Tier::Start(RegionalTier(target), &clock);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto sink = [](int64_t, absl::Span<const float>) { return absl::OkStatus(); };
  const absl::Time start = clock.Now();
  const auto real_start = std::chrono::steady_clock::now();
  absl::StatusOr<RoundTask> task = (*tier)->PullRound(0, 0, sink, [] { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsUnavailable(task.status())) << task.status();
  EXPECT_NE(task.status().message().find("upstream " + target + " unreachable"), std::string::npos)
      << task.status();
  EXPECT_GE(clock.Now() - start, absl::Seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, std::chrono::seconds(30));
  int asked = 0;
  task = (*tier)->PullRound(0, 0, sink, [&] {
    return ++asked == 3 ? absl::CancelledError("stopped") : absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsCancelled(task.status())) << task.status();
  EXPECT_EQ(asked, 3);
  close(s);
}

}  // namespace
}  // namespace sextant
