// A regional tier's side of the tier above, against a real upstream hub on loopback: it pulls
// the round's model and pushes its aggregate as its own id, and a pull gives up on an
// unreachable upstream after unreachable_timeout on the tier's clock, or when interrupted.
#include "aggregator/tier.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/federation_hub.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

constexpr int64_t kSize = 6;

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
  const std::string model = ::testing::TempDir() + "/tier-test-model.f32";
  const std::vector<float> weights = {1, 2, 3, 4, 5, 6};
  std::ofstream(model, std::ios::binary)
      .write(reinterpret_cast<const char*>(weights.data()), kSize * sizeof(float));
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
