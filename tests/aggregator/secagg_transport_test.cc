// Secure aggregation over FederationService on loopback: real SecAggHub behind the real gRPC
// service, real clients (RunSecAggParticipant, or SecAggClient driven by hand to drop out or
// misbehave). The stage deadlines run on a FakeClock that the aggregator loop moves.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/secagg_participant.h"
#include "aggregator/secagg_wire.h"
#include "common/clock.h"
#include "federation/secagg_client.h"
#include "federation/secagg_config.h"
#include "federation/secure_quantizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/certificates.h"
#include "rpc/key_signer.h"
#include "tests/fakes/clock_ticker.h"

namespace sextant {
namespace {

constexpr int kClients = 5;
constexpr size_t kModel = 37;  // 38 ring elements: five chunks of 8

std::string Id(int i) { return "r/" + std::to_string(i); }

std::vector<float> Update(int i) {
  std::vector<float> u(kModel);
  for (size_t j = 0; j < kModel; ++j) u[j] = 0.01f * static_cast<float>((i + 1) * (j % 7)) - 0.1f;
  return u;
}

class SecAggTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RoundCoordinatorOptions o;
    o.experiment_id = "exp";
    o.model_size = kModel;
    hub_ = std::make_unique<FederationHub>(*RoundCoordinator::Create(o, &clock_), &clock_);
    SecAggHubOptions so;
    so.experiment_id = "exp";
    so.stage_timeout_seconds = 5;
    so.quantization = {1.0, 16, 100};
    secagg_ = std::make_unique<SecAggHub>(so, &clock_);
    service_ = std::make_unique<FederationServiceImpl>(hub_.get(), 4, secagg_.get());
    int port = 0;
    server_ = *StartFederationServer("127.0.0.1:0", service_.get(), &port);
    stub_ = v1::FederationService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                               grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    secagg_->SetDone();
    server_->Shutdown(std::chrono::system_clock::now());
  }

  void Open(int64_t round) {
    std::vector<std::string> ids;
    for (int i = 0; i < kClients; ++i) ids.push_back(Id(i));
    // Stage 0 waits for every participant (no deadline), later stages time out after 5 s.
    ASSERT_TRUE(secagg_->Open(round, ids, model_size_, 42 + round, 0, 1).ok());
  }

  // Client i's options for `round`: short polls, chunks of 8.
  static SecAggParticipantOptions Options(int64_t round, int i) {
    SecAggParticipantOptions o;
    o.experiment_id = "exp";
    o.client_id = Id(i);
    o.round = round;
    o.poll_seconds = 1;
    o.stage_wait_seconds = 30;
    o.chunk_elements = 8;
    return o;
  }

  // The participants' own stage waits run on the real clock: the fake one races ahead.
  absl::StatusOr<int64_t> Participate(int64_t round, int i, int64_t weight) {
    return RunSecAggParticipant(stub_.get(), Options(round, i), RealClockInstance(), Update(i),
                                weight, SenderMetrics{1, 1, 0.5, 10});
  }

  // The aggregator loop: closes stages as they are ready, the fake clock moving 1 s per 50 ms
  // of real time so that a stage whose clients went silent times out quickly.
  void RunAggregator() {
    ClockTicker ticker(&clock_, absl::Milliseconds(20));
    while (!secagg_->WaitAndAdvance(absl::Seconds(1))) {
    }
  }

  // The first `k` clients' weighted mean of their clipped updates, decoded from the outcome.
  std::vector<float> Decode(const SecAggRoundOutcome& out, int64_t* weight) {
    SecureQuantizerOptions q{1.0, 16, 100, out.config.num_clients, out.config.ring_bits};
    SecureQuantizer quantizer = *SecureQuantizer::Create(q);
    std::vector<float> mean(kModel);
    *weight = *quantizer.DecodeMean(out.sum, absl::MakeSpan(mean));
    return mean;
  }

  // Plays client i through stages 0 and 1 by hand, then goes silent.
  void AdvertiseAndShareThenDie(int64_t round, int i) {
    absl::StatusOr<SecAggDownlink> start;
    do {
      start = AwaitSecAgg(stub_.get(), "exp", round, SecAggStage::kAdvertiseKeys, Id(i), 1);
    } while (start.ok() && start->pending);
    ASSERT_TRUE(start.ok() && start->start) << start.status();
    std::array<uint8_t, 32> entropy{};
    entropy[0] = static_cast<uint8_t>(i + 1);
    SecAggClient c =
        *SecAggClient::Create(start->start->config, start->start->client_index, entropy);
    ASSERT_TRUE(SubmitSecAgg(stub_.get(), KeysToProto(*c.AdvertiseKeys(), Id(i))).ok());
    absl::StatusOr<SecAggDownlink> dir;
    do {
      dir = AwaitSecAgg(stub_.get(), "exp", round, SecAggStage::kShareKeys, Id(i), 1);
    } while (dir.ok() && dir->pending);
    ASSERT_TRUE(dir.ok() && dir->directory) << dir.status();
    dir->directory->header.sender = kSecAggServer;
    dir->directory->header.recipient = start->start->client_index;
    absl::StatusOr<SecAggShareKeys> shares = c.HandleKeyDirectory(*dir->directory);
    ASSERT_TRUE(shares.ok()) << shares.status();
    ASSERT_TRUE(SubmitSecAgg(stub_.get(), SharesToProto(*shares, Id(i))).ok());
  }

  size_t model_size_ = kModel;
  FakeClock clock_;
  std::unique_ptr<FederationHub> hub_;
  std::unique_ptr<SecAggHub> secagg_;
  std::unique_ptr<FederationServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::FederationService::Stub> stub_;
};

TEST_F(SecAggTransportTest, FiveClientsOverLoopbackGiveTheirWeightedMeanAndNothingElse) {
  Open(1);
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(kClients, absl::UnknownError("not run"));
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] { sent[i] = Participate(1, i, 10 * (i + 1)); });
  }
  RunAggregator();
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) ASSERT_TRUE(sent[i].ok()) << i << ": " << sent[i].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->contributors.size(), static_cast<size_t>(kClients));
  int64_t weight = 0;
  std::vector<float> mean = Decode(*out, &weight);
  EXPECT_EQ(weight, 10 + 20 + 30 + 40 + 50);
  for (size_t j = 0; j < kModel; ++j) {
    double expected = 0;
    for (int i = 0; i < kClients; ++i) expected += 10.0 * (i + 1) * Update(i)[j];
    EXPECT_NEAR(mean[j], expected / 150.0, 1.0 / 32767) << j;
  }
  EXPECT_EQ(secagg_->rejections(), 0);
}

// Distributed DP: each client calibrates its noise to its round's threshold t (3 of 5 here), so
// that even a sum of only t survivors, the fewest that can be unmasked, carries the central
// noise sigma * C. (Noise calibrated to the 5 sampled clients would leave 3/5 of it.)
TEST_F(SecAggTransportTest, EveryDecodableSumCarriesAtLeastTheCentralNoise) {
  model_size_ = 6000;
  Open(1);
  const double sigma = 1.0, clip = 0.05;  // sigma * C = 0.05: far inside the quantiser's [-1, 1]
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(3, absl::UnknownError("not run"));
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      SecAggParticipantOptions o = Options(1, i);
      o.chunk_elements = kDefaultSecAggChunkElements;
      o.noise_multiplier = sigma;
      o.noise_sensitivity = clip;
      const std::vector<float> zero(model_size_, 0.0f);
      sent[i] = RunSecAggParticipant(stub_.get(), o, RealClockInstance(), zero, 1, SenderMetrics{});
    });
  }
  for (int i = 3; i < kClients; ++i)
    clients.emplace_back([&, i] { AdvertiseAndShareThenDie(1, i); });
  RunAggregator();
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sent[i].ok()) << sent[i].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->config.threshold, 3);
  ASSERT_EQ(out->contributors.size(), 3u);
  SecureQuantizerOptions q{1.0, 16, 100, out->config.num_clients, out->config.ring_bits};
  SecureQuantizer quantizer = *SecureQuantizer::Create(q);
  std::vector<float> mean(model_size_);
  ASSERT_EQ(*quantizer.DecodeMean(out->sum, absl::MakeSpan(mean)), 3);
  double sum_sq = 0;
  for (float m : mean) sum_sq += (3.0 * m) * (3.0 * m);  // the survivors' sum, coordinate-wise
  const double variance = sum_sq / static_cast<double>(model_size_);
  const double central = sigma * clip * sigma * clip;
  // 6000 coordinates estimate the variance within about 2% (one standard error).
  EXPECT_GT(variance, 0.9 * central);
  EXPECT_LT(variance, 1.1 * central);
}

// Under TLS each participant signs its keys and checks its neighbours' before using them: a
// round of signed keys goes through, and a key directory in which the aggregator swapped one
// client's key is refused, naming that client.
TEST_F(SecAggTransportTest, SignedKeysGoThroughAndASwappedKeyIsRefused) {
  const KeyPair ca = *CreateCertificateAuthority("run CA", 1);
  std::vector<std::unique_ptr<KeySigner>> signers;
  for (int i = 0; i < kClients; ++i) {
    const PeerIdentity id{Role::kClient, "r", std::to_string(i)};
    absl::StatusOr<KeyPair> cert = IssueCertificate(ca, id.name, {}, 1, &id);
    ASSERT_TRUE(cert.ok()) << cert.status();
    signers.push_back(*KeySigner::Create(ca.cert_pem, cert->cert_pem, cert->key_pem));
  }
  Open(1);
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(kClients - 1, absl::UnknownError("not run"));
  for (int i = 0; i < kClients - 1; ++i) {
    clients.emplace_back([&, i] {
      SecAggParticipantOptions o = Options(1, i);
      o.signer = signers[i].get();
      sent[i] = RunSecAggParticipant(stub_.get(), o, RealClockInstance(), Update(i), 10,
                                     SenderMetrics{1, 1, 0.5, 10});
    });
  }
  // The last client signs its keys by hand, checks the directory it gets, and then goes silent.
  absl::Status honest, swapped, reordered_status;
  clients.emplace_back([&] {
    const int i = kClients - 1;
    absl::StatusOr<SecAggDownlink> start;
    do {
      start = AwaitSecAgg(stub_.get(), "exp", 1, SecAggStage::kAdvertiseKeys, Id(i), 1);
    } while (start.ok() && start->pending);
    ASSERT_TRUE(start.ok() && start->start) << start.status();
    std::array<uint8_t, 32> entropy{};
    SecAggClient c =
        *SecAggClient::Create(start->start->config, start->start->client_index, entropy);
    SecAggAdvertiseKeys keys = *c.AdvertiseKeys();
    KeyAttestation mine =
        *signers[i]->Sign(KeyBinding("exp", 1, start->start->client_index, Id(i),
                                     KeyBytes(keys.encryption_key), KeyBytes(keys.masking_key)));
    v1::SecAggMessage advertised = KeysToProto(keys, Id(i));
    advertised.mutable_keys()->set_signature(mine.signature);
    advertised.mutable_keys()->set_certificate(mine.certificate_pem);
    ASSERT_TRUE(SubmitSecAgg(stub_.get(), advertised).ok());
    absl::StatusOr<SecAggDownlink> dir;
    do {
      dir = AwaitSecAgg(stub_.get(), "exp", 1, SecAggStage::kShareKeys, Id(i), 1);
    } while (dir.ok() && dir->pending);
    ASSERT_TRUE(dir.ok() && dir->directory) << dir.status();
    honest = VerifyKeyDirectory(*signers[i], "exp", 1, *dir->directory, dir->attestations);
    SecAggKeyDirectory tampered = *dir->directory;
    tampered.peers[0].masking_key = keys.masking_key;  // the aggregator's pick for peer 0
    swapped = VerifyKeyDirectory(*signers[i], "exp", 1, tampered, dir->attestations);
    // Two peers' entries exchanged whole (keys and attestations): each signature still matches,
    // but the ids no longer rise with the index.
    SecAggKeyDirectory reordered = *dir->directory;
    std::vector<PeerAttestation> reattested = dir->attestations;
    std::swap(reordered.peers[0].encryption_key, reordered.peers[1].encryption_key);
    std::swap(reordered.peers[0].masking_key, reordered.peers[1].masking_key);
    std::swap(reattested[0], reattested[1]);
    reordered_status = VerifyKeyDirectory(*signers[i], "exp", 1, reordered, reattested);
  });
  RunAggregator();
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(honest.ok()) << honest;
  EXPECT_EQ(swapped.code(), absl::StatusCode::kPermissionDenied) << swapped;
  EXPECT_THAT(std::string(swapped.message()), ::testing::HasSubstr("'r/0'"));
  EXPECT_EQ(reordered_status.code(), absl::StatusCode::kPermissionDenied) << reordered_status;
  // The signed round went through without the silent client.
  for (int i = 0; i < kClients - 1; ++i) ASSERT_TRUE(sent[i].ok()) << sent[i].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->contributors.size(), static_cast<size_t>(kClients - 1));
}

TEST_F(SecAggTransportTest, ClientThatDiesAfterSharingKeysIsUnmaskedOutOfTheSum) {
  Open(1);
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(kClients - 1, absl::UnknownError("not run"));
  for (int i = 0; i < kClients - 1; ++i) {
    clients.emplace_back([&, i] { sent[i] = Participate(1, i, 10); });
  }
  clients.emplace_back([&] { AdvertiseAndShareThenDie(1, kClients - 1); });
  RunAggregator();
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients - 1; ++i) ASSERT_TRUE(sent[i].ok()) << sent[i].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->contributors, (std::vector<std::string>{"r/0", "r/1", "r/2", "r/3"}));
  int64_t weight = 0;
  std::vector<float> mean = Decode(*out, &weight);
  EXPECT_EQ(weight, 40);
  for (size_t j = 0; j < kModel; ++j) {
    double expected = 0;
    for (int i = 0; i < kClients - 1; ++i) expected += Update(i)[j] / 4.0;
    EXPECT_NEAR(mean[j], expected, 1.0 / 32767) << j;
  }
}

TEST_F(SecAggTransportTest, RoundAbortsBelowThresholdAndTheNextRoundProceeds) {
  Open(1);
  // n = 5 gives t = 3: two clients share keys and the other three go silent after advertising.
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(2, absl::UnknownError("not run"));
  for (int i = 0; i < 2; ++i) clients.emplace_back([&, i] { sent[i] = Participate(1, i, 10); });
  for (int i = 2; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      absl::StatusOr<SecAggDownlink> start;
      do {
        start = AwaitSecAgg(stub_.get(), "exp", 1, SecAggStage::kAdvertiseKeys, Id(i), 1);
      } while (start.ok() && start->pending);
      std::array<uint8_t, 32> entropy{};
      entropy[1] = static_cast<uint8_t>(i);
      SecAggClient c =
          *SecAggClient::Create(start->start->config, start->start->client_index, entropy);
      (void)SubmitSecAgg(stub_.get(), KeysToProto(*c.AdvertiseKeys(), Id(i)));
    });
  }
  RunAggregator();
  for (std::thread& t : clients) t.join();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  EXPECT_TRUE(absl::IsAborted(out.status())) << out.status();
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(absl::IsAborted(sent[i].status())) << sent[i].status();

  Open(2);
  clients.clear();
  std::vector<absl::StatusOr<int64_t>> again(kClients, absl::UnknownError("not run"));
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] { again[i] = Participate(2, i, 1); });
  RunAggregator();
  for (std::thread& t : clients) t.join();
  out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->contributors.size(), static_cast<size_t>(kClients));
}

// Every rejection of the protocol's hygiene, through the real service, with the gRPC code the
// client sees; none of them changes the round, which then completes normally.
TEST_F(SecAggTransportTest, RejectsWrongExperimentStaleRoundOutOfOrderDuplicateAndWrongLength) {
  Open(3);
  absl::StatusOr<SecAggDownlink> start =
      AwaitSecAgg(stub_.get(), "exp", 3, SecAggStage::kAdvertiseKeys, Id(0), 1);
  ASSERT_TRUE(start.ok() && start->start) << start.status();
  std::array<uint8_t, 32> entropy{};
  SecAggClient c = *SecAggClient::Create(start->start->config, start->start->client_index, entropy);
  SecAggAdvertiseKeys keys = *c.AdvertiseKeys();

  SecAggAdvertiseKeys other = keys;
  other.header.experiment_id = "someone-else";
  EXPECT_TRUE(absl::IsAborted(SubmitSecAgg(stub_.get(), KeysToProto(other, Id(0))).status()));
  EXPECT_TRUE(absl::IsAborted(
      AwaitSecAgg(stub_.get(), "someone-else", 3, SecAggStage::kAdvertiseKeys, Id(0), 0).status()));
  SecAggAdvertiseKeys stale = keys;
  stale.header.round = 2;
  EXPECT_TRUE(absl::IsAborted(SubmitSecAgg(stub_.get(), KeysToProto(stale, Id(0))).status()));
  SecAggAdvertiseKeys early = keys;
  early.header.stage = SecAggStage::kMaskedInput;
  EXPECT_TRUE(absl::IsAborted(SubmitSecAgg(stub_.get(), KeysToProto(early, Id(0))).status()));
  SecAggShareKeys shares;
  shares.header = keys.header;
  shares.header.stage = SecAggStage::kShareKeys;
  EXPECT_TRUE(absl::IsAborted(SubmitSecAgg(stub_.get(), SharesToProto(shares, Id(0))).status()));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(SubmitSecAgg(stub_.get(), KeysToProto(keys, "r/99")).status()));
  SecAggMaskedInput short_input;
  short_input.header = keys.header;
  short_input.values.assign(kModel, 0);  // one element short of model + weight
  EXPECT_TRUE(absl::IsInvalidArgument(
      SubmitMaskedInput(stub_.get(), short_input, Id(0), 32, {}, 8).status()));

  ASSERT_TRUE(SubmitSecAgg(stub_.get(), KeysToProto(keys, Id(0))).ok());
  EXPECT_TRUE(absl::IsAborted(SubmitSecAgg(stub_.get(), KeysToProto(keys, Id(0))).status()));
  // Client 1 replays client 0's public keys.
  EXPECT_TRUE(
      absl::IsInvalidArgument(SubmitSecAgg(stub_.get(), KeysToProto(keys, Id(1))).status()));
  EXPECT_EQ(secagg_->rejections(), 8);

  // Client 0's keys stand; it drops out after advertising, the others complete the round.
  std::vector<std::thread> clients;
  std::vector<absl::StatusOr<int64_t>> sent(kClients, absl::UnknownError("not run"));
  for (int i = 1; i < kClients; ++i)
    clients.emplace_back([&, i] { sent[i] = Participate(3, i, 1); });
  RunAggregator();
  for (std::thread& t : clients) t.join();
  for (int i = 1; i < kClients; ++i) EXPECT_TRUE(sent[i].ok()) << sent[i].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->contributors, (std::vector<std::string>{"r/1", "r/2", "r/3", "r/4"}));
}

}  // namespace
// The second level over the transport: three "regions" hand in encoded sums in the regions'
// round (RegionalLayerConfig); the hub's outcome is their total mod 2^k, with the clients and
// rejections each said in the clear, and a region whose sum is in another ring is refused.
TEST_F(SecAggTransportTest, RegionsRoundOverLoopbackYieldsOnlyTheTotalOfTheRegionsSums) {
  constexpr int kRing = 30;
  const std::vector<std::string> regions = {"east", "north", "west"};
  absl::StatusOr<SecAggConfig> config = RegionalLayerConfig("exp", 7, 3, kRing, kModel + 1, 99);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(secagg_->OpenWithConfig(regions, *config, 0, 1).ok());
  std::vector<RegionSum> sums(3);
  std::vector<uint64_t> total(kModel + 1, 0);
  for (int r = 0; r < 3; ++r) {
    sums[r].clients = r == 0 ? 0 : r + 2;  // east: none of its clients took part
    sums[r].rejected = r;
    std::vector<uint64_t> words;
    for (size_t j = 0; j <= kModel; ++j) {
      words.push_back((uint64_t{0x2badf00d} * (j + 1) * (r + 3)) & ((uint64_t{1} << kRing) - 1));
      total[j] = (total[j] + words.back()) & ((uint64_t{1} << kRing) - 1);
    }
    sums[r].sum = RingVector::FromWords(kRing, words);
  }
  // Every region takes part in `round` at once while the aggregator loop runs.
  auto run_regions = [&](int64_t round) {
    std::vector<absl::StatusOr<int64_t>> sent(3, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        SecAggParticipantOptions o;
        o.experiment_id = "exp";
        o.client_id = regions[r];
        o.round = round;
        o.poll_seconds = 1;
        o.stage_wait_seconds = 30;
        o.chunk_elements = 8;
        sent[r] = RunSecAggRegionParticipant(stub_.get(), o, RealClockInstance(), sums[r]);
      });
    }
    RunAggregator();
    for (std::thread& t : threads) t.join();
    return sent;
  };
  std::vector<absl::StatusOr<int64_t>> sent = run_regions(7);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(sent[r].ok()) << regions[r] << ": " << sent[r].status();
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sum.ring_bits(), kRing);
  EXPECT_EQ(out->sum.ToWords(), total);
  EXPECT_EQ(out->count, 0 + 3 + 4);
  EXPECT_EQ(out->rejected, 0 + 1 + 2);

  // A region whose sum is in another ring refuses it itself when the masked input is due, and
  // drops out; the other two (t = 2) still give their total.
  config = RegionalLayerConfig("exp", 8, 3, kRing, kModel + 1, 100);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(secagg_->OpenWithConfig(regions, *config, 0, 1).ok());
  sums[0].sum = RingVector::FromWords(kRing + 2, sums[0].sum.ToWords());
  sent = run_regions(8);
  EXPECT_EQ(sent[0].status().code(), absl::StatusCode::kInvalidArgument) << sent[0].status();
  EXPECT_NE(sent[0].status().message().find("32-bit ring"), std::string::npos) << sent[0].status();
  ASSERT_TRUE(sent[1].ok() && sent[2].ok()) << sent[1].status() << " " << sent[2].status();
  out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t j = 0; j <= kModel; ++j) {
    ASSERT_EQ(out->sum[j], (sums[1].sum[j] + sums[2].sum[j]) & ((uint64_t{1} << kRing) - 1)) << j;
  }
  EXPECT_EQ(out->count, 3 + 4);
}

// Buffered rounds: each buffer is one SecAgg instance among the clients in line. Clients ask
// in with the version their update was trained on; the aggregator turns the stale one away,
// takes the others into instance 1, and each damps its own update by the scale it is given, so
// that the decoded mean is sum(f_i w_i u_i) / sum(w_i), as the plaintext buffer folds it.
TEST_F(SecAggTransportTest, ABufferIsOneInstanceAmongTheClientsInLineEachDampedByItsStaleness) {
  auto join = [&](int i, int64_t version, int64_t weight) {
    SecAggParticipantOptions o = Options(0, i);
    o.join_version = version;
    return RunSecAggParticipant(stub_.get(), o, RealClockInstance(), Update(i), weight,
                                SenderMetrics{1, 1, 0.5, 10});
  };
  std::vector<absl::StatusOr<int64_t>> sent(4, absl::UnknownError("not run"));
  std::vector<std::thread> clients;
  const int64_t versions[] = {7, 6, 7, 2};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] { sent[i] = join(i, versions[i], 10 * (i + 1)); });
  }
  std::vector<SecAggJoiner> line;
  while (line.size() < 4) line = secagg_->AwaitJoiners(4, absl::Seconds(60), absl::Seconds(5));
  for (const SecAggJoiner& j : line) {
    EXPECT_EQ(j.base_version, versions[j.client_id.back() - '0']) << j.client_id;
  }
  // Nobody is taken who is not in line.
  EXPECT_EQ(secagg_->OpenBuffer(1, {{Id(0), 1.0}, {Id(4), 1.0}}, kModel, 9, 1).code(),
            absl::StatusCode::kInvalidArgument);
  secagg_->Refuse(Id(3), "r/3's update of version 2 is too stale at version 7");
  ASSERT_TRUE(secagg_->OpenBuffer(1, {{Id(0), 1.0}, {Id(1), 0.5}, {Id(2), 1.0}}, kModel, 9, 1).ok());
  RunAggregator();
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sent[i].ok()) << i << ": " << sent[i].status();
  EXPECT_EQ(sent[3].status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(sent[3].status().message().find("too stale"), std::string::npos) << sent[3].status();
  EXPECT_EQ(secagg_->rejections(), 1);
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->round, 1);
  EXPECT_THAT(out->contributors, ::testing::ElementsAre(Id(0), Id(1), Id(2)));
  int64_t weight = 0;
  std::vector<float> mean = Decode(*out, &weight);
  EXPECT_EQ(weight, 10 + 20 + 30);
  for (size_t j = 0; j < kModel; ++j) {
    const double expected = (10.0 * Update(0)[j] + 0.5 * 20.0 * Update(1)[j] + 30.0 * Update(2)[j]) / 60;
    EXPECT_NEAR(mean[j], expected, 1.0 / 32767) << j;
  }
  // The line is empty now; a client that stops asking leaves it.
  EXPECT_TRUE(secagg_->AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration()).empty());
  EXPECT_TRUE(secagg_->Join("exp", Id(4), 8, absl::ZeroDuration())->pending);
  EXPECT_EQ(secagg_->AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration()).size(), 1u);
  clock_.Advance(absl::Seconds(61));
  EXPECT_TRUE(secagg_->AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration()).empty());
  EXPECT_EQ(secagg_->Join("other", Id(4), 8, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kAborted);
}

TEST(SecAggHubJoinTest, TheLineIsBoundedAndAClientTakenGetsItsStartAgainUntilItSendsKeys) {
  FakeClock clock;
  SecAggHubOptions so;
  so.experiment_id = "exp";
  so.max_joiners = 3;
  SecAggHub hub(so, &clock);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(hub.Join("exp", Id(i), 1, absl::ZeroDuration())->pending) << i;
  }
  EXPECT_EQ(hub.Join("exp", Id(3), 1, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(hub.rejections(), 1);
  EXPECT_EQ(hub.OpenBuffer(1, {{Id(0), 1.0}, {Id(1), 1.5}}, 10, 1, 1).code(),
            absl::StatusCode::kInvalidArgument);  // a scale above 1
  ASSERT_TRUE(hub.OpenBuffer(1, {{Id(0), 1.0}, {Id(1), 0.25}}, 10, 1, 1).ok());
  // A taken client's answer may have been lost: it asks again and gets the same start.
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<SecAggDownlink> d = hub.Join("exp", Id(1), 1, absl::ZeroDuration());
    ASSERT_TRUE(d.ok() && d->start) << d.status();
    EXPECT_EQ(d->start->config.round, 1);
    EXPECT_EQ(d->start->client_index, 1);
    EXPECT_DOUBLE_EQ(d->start->update_scale, 0.25);
  }
  // The one not taken still waits, and the freed places take new clients.
  EXPECT_EQ(hub.AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration()).size(), 1u);
  EXPECT_TRUE(hub.Join("exp", Id(3), 1, absl::ZeroDuration())->pending);
  hub.SetDone();
  EXPECT_EQ(hub.Join("exp", Id(2), 1, absl::Seconds(10))->stage, SecAggStage::kAborted);
}

// A Join call parked between tries (the service's zero-wait tries) holds its client's place:
// however long the clock runs while it is parked, the client stays in line; once the call ends,
// silence counts again.
TEST(SecAggHubJoinTest, AParkedJoinKeepsItsPlaceInLine) {
  FakeClock clock;
  SecAggHubOptions so;
  so.experiment_id = "exp";
  SecAggHub hub(so, &clock);
  EXPECT_TRUE(hub.Join("exp", Id(0), 1, absl::ZeroDuration())->pending);
  EXPECT_TRUE(hub.Join("exp", Id(1), 1, absl::ZeroDuration())->pending);
  hub.HoldJoin(Id(0), +1);
  clock.Advance(absl::Seconds(61));
  std::vector<SecAggJoiner> line = hub.AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration());
  ASSERT_EQ(line.size(), 1u);  // Id(1) went silent; Id(0) is held
  EXPECT_EQ(line[0].client_id, Id(0));
  hub.HoldJoin(Id(0), -1);
  clock.Advance(absl::Seconds(61));
  EXPECT_TRUE(hub.AwaitJoiners(1, absl::Seconds(60), absl::ZeroDuration()).empty());
}

TEST(SecAggHubStagingTest, HandsOutAtMostMaxStagedBuffersAndReusesTheReturnedOnes) {
  FakeClock clock;
  SecAggHubOptions so;
  so.experiment_id = "exp";
  so.max_staged_inputs = 2;
  SecAggHub hub(so, &clock);
  absl::StatusOr<StagingBuffer> a = hub.TakeStaging(1000, absl::ZeroDuration());
  absl::StatusOr<StagingBuffer> b = hub.TakeStaging(1000, absl::ZeroDuration());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 1000u);
  EXPECT_FALSE(a->in_file());
  // A third sender waits; with both still out it is told to retry.
  {
    ClockTicker ticker(&clock, absl::Milliseconds(5));
    EXPECT_EQ(hub.TakeStaging(1000, absl::Milliseconds(30)).status().code(),
              absl::StatusCode::kUnavailable);
  }
  const std::string mark = "staged by a";
  ASSERT_TRUE(a->Write(500, mark).ok());
  // A waiting sender gets the buffer as soon as it is given back, contents and all.
  std::thread giver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hub.ReturnStaging(*std::move(a));
  });
  absl::StatusOr<StagingBuffer> c = hub.TakeStaging(1000, absl::Seconds(10));
  giver.join();
  ASSERT_TRUE(c.ok()) << c.status();
  std::string seen(mark.size(), '\0');
  ASSERT_TRUE(c->Read(500, absl::MakeSpan(seen)).ok());
  EXPECT_EQ(seen, mark);
  hub.SetDone();
  EXPECT_EQ(hub.TakeStaging(1000, absl::Seconds(10)).status().code(), absl::StatusCode::kAborted);
}

TEST(SecAggHubStagingTest, StagesInAFileOutOfSightWhenGivenAFolder) {
  FakeClock clock;
  SecAggHubOptions so;
  so.experiment_id = "exp";
  so.staging_dir = ::testing::TempDir() + "/secagg-staging";
  std::filesystem::remove_all(so.staging_dir);
  std::filesystem::create_directories(so.staging_dir);
  SecAggHub hub(so, &clock);
  absl::StatusOr<StagingBuffer> a = hub.TakeStaging(size_t{1} << 20, absl::ZeroDuration());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->in_file());
  // The file has no name: nothing in the folder, whatever is staged.
  ASSERT_TRUE(a->Write((size_t{1} << 20) - 4, std::string("tail")).ok());
  EXPECT_TRUE(std::filesystem::is_empty(so.staging_dir));
  std::string tail(4, '\0');
  ASSERT_TRUE(a->Read((size_t{1} << 20) - 4, absl::MakeSpan(tail)).ok());
  EXPECT_EQ(tail, "tail");
  EXPECT_EQ(a->Write((size_t{1} << 20) - 3, std::string("tail")).code(),
            absl::StatusCode::kOutOfRange);
  // A folder that cannot hold one: the sender is told why.
  so.staging_dir += "/missing";
  so.max_staged_inputs = 1;
  SecAggHub broken(so, &clock);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The place in the pool is free again after each failure: the same reason every time.
    absl::StatusOr<StagingBuffer> b = broken.TakeStaging(64, absl::ZeroDuration());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
    EXPECT_NE(b.status().message().find("cannot make a staging file in"), std::string::npos)
        << b.status();
  }
}

}  // namespace sextant
