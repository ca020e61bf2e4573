#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "federation/dp_noise.h"
#include "federation/secagg_client.h"
#include "federation/secagg_config.h"
#include "federation/secagg_messages.h"
#include "federation/secagg_server.h"
#include "federation/secure_quantizer.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

std::array<uint8_t, 32> Entropy(int64_t round, int32_t client) {
  std::array<uint8_t, 32> e{};
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = static_cast<uint8_t>(round * 131 + client * 17 + i * 7 + 1);
  }
  return e;
}

SecAggConfig Config(int32_t n, int32_t k, int32_t t, size_t d, int64_t round = 1,
                    int32_t ring_bits = 20) {
  SecAggConfig c;
  c.experiment_id = "exp";
  c.round = round;
  c.num_clients = n;
  c.degree = k;
  c.threshold = t;
  c.ring_bits = ring_bits;
  c.vector_length = d;
  c.graph_seed = 99;
  return c;
}

std::vector<std::vector<uint64_t>> RandomInputs(int32_t n, size_t d, int ring_bits, uint64_t s) {
  std::vector<std::vector<uint64_t>> in(n, std::vector<uint64_t>(d));
  const uint64_t mask = (uint64_t{1} << ring_bits) - 1;
  for (auto& v : in) {
    for (auto& x : v) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = (s >> 17) & mask;
    }
  }
  return in;
}

// A whole round in memory. drop[stage] lists the clients that go silent from that stage on
// (0: never advertise, 1: never share keys, 2: never send masked input, 3: never answer unmask).
struct Round {
  Round(SecAggConfig c, std::vector<std::vector<uint64_t>> in)
      : config(std::move(c)), inputs(std::move(in)) {}
  SecAggConfig config;
  std::vector<std::vector<uint64_t>> inputs;
  std::array<std::set<int32_t>, 4> drop;
  // Everything the server saw (for the view-invariance test).
  std::vector<SecAggAdvertiseKeys> adverts;
  std::vector<SecAggShareKeys> share_keys;
  std::vector<SecAggMaskedInput> masked;
  std::vector<SecAggUnmaskResponse> responses;
  // How a masked input reaches the server; by default HandleMaskedInput(message).
  // Clients mask their inputs held in RingVectors (as the participants do) instead of vectors.
  bool ring_inputs = false;
  std::function<absl::Status(SecAggServer&, const SecAggMaskedInput&)> submit =
      [](SecAggServer& server, const SecAggMaskedInput& m) { return server.HandleMaskedInput(m); };

  absl::StatusOr<SecAggResult> Run() {
    auto server = SecAggServer::Create(config);
    if (!server.ok()) return server.status();
    std::vector<std::optional<SecAggClient>> clients;
    for (int32_t i = 0; i < config.num_clients; ++i) {
      auto c = SecAggClient::Create(config, i, Entropy(config.round, i));
      if (!c.ok()) return c.status();
      clients.emplace_back(std::move(*c));
    }
    auto silent = [&](int stage, int32_t i) {
      for (int s = 0; s <= stage; ++s) {
        if (drop[s].contains(i)) return true;
      }
      return false;
    };
    for (int32_t i = 0; i < config.num_clients; ++i) {
      if (silent(0, i)) continue;
      auto m = clients[i]->AdvertiseKeys();
      if (!m.ok()) return m.status();
      adverts.push_back(*m);
      if (auto s = server->HandleAdvertiseKeys(*m); !s.ok()) return s;
    }
    auto dirs = server->FinishAdvertiseKeys();
    if (!dirs.ok()) return dirs.status();
    for (const auto& dir : *dirs) {
      const int32_t i = dir.header.recipient;
      if (silent(1, i)) continue;
      auto m = clients[i]->HandleKeyDirectory(dir);
      if (!m.ok()) return m.status();
      share_keys.push_back(*m);
      if (auto s = server->HandleShareKeys(*m); !s.ok()) return s;
    }
    auto deliveries = server->FinishShareKeys();
    if (!deliveries.ok()) return deliveries.status();
    for (const auto& d : *deliveries) {
      const int32_t i = d.header.recipient;
      if (silent(2, i)) continue;
      if (auto s = clients[i]->HandleShareDelivery(d); !s.ok()) return s;
      absl::StatusOr<SecAggMaskedInput> m;
      if (ring_inputs) {
        RingVector ring = RingVector::FromWords(config.ring_bits, inputs[i]);
        absl::StatusOr<SecAggHeader> header = clients[i]->MaskInput(&ring);
        if (!header.ok()) return header.status();
        m = SecAggMaskedInput{*header, ring.ToWords()};
      } else {
        m = clients[i]->MaskInput(inputs[i]);
      }
      if (!m.ok()) return m.status();
      masked.push_back(*m);
      if (auto s = submit(*server, *m); !s.ok()) return s;
    }
    auto requests = server->FinishMaskedInput();
    if (!requests.ok()) return requests.status();
    for (const auto& r : *requests) {
      const int32_t i = r.header.recipient;
      if (silent(3, i)) continue;
      auto m = clients[i]->HandleUnmaskRequest(r);
      if (!m.ok()) return m.status();
      responses.push_back(*m);
      if (auto s = server->HandleUnmaskResponse(*m); !s.ok()) return s;
    }
    return server->FinishUnmask();
  }

  // The sum mod 2^k of the inputs of clients that sent a masked input.
  std::vector<uint64_t> ExpectedSum() const {
    std::vector<uint64_t> sum(config.vector_length, 0);
    for (int32_t i = 0; i < config.num_clients; ++i) {
      if (drop[0].contains(i) || drop[1].contains(i) || drop[2].contains(i)) continue;
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += inputs[i][j];
    }
    for (auto& v : sum) v &= (uint64_t{1} << config.ring_bits) - 1;
    return sum;
  }
};

// A masked input read a chunk at a time (as the aggregator reads one staged in a file).
SecAggServer::MaskedInputReader ReaderOf(const SecAggMaskedInput& m) {
  return [&m](size_t offset, absl::Span<uint64_t> out) {
    std::copy_n(m.values.begin() + offset, out.size(), out.begin());
    return absl::OkStatus();
  };
}

class SecAggChunkedInputTest : public ::testing::TestWithParam<int> {};

TEST_P(SecAggChunkedInputTest, InputsReadInChunksGiveTheExactSum) {
  const int ring = GetParam();
  const size_t d = (size_t{1} << 17) + 7;  // three chunks, the last one short
  Round r(Config(4, 3, 3, d, 1, ring), RandomInputs(4, d, std::min(ring, 63), 5));
  r.submit = [](SecAggServer& server, const SecAggMaskedInput& m) {
    return server.HandleMaskedInput(m.header, ReaderOf(m));
  };
  auto result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ring_bits(), ring);
  EXPECT_EQ(result->sum.ToWords(), r.ExpectedSum());
}

INSTANTIATE_TEST_SUITE_P(Rings, SecAggChunkedInputTest, ::testing::Values(20, 32, 40));

TEST(SecAggTest, InputsMaskedInRingVectorsGiveTheExactSumDespiteADropout) {
  const size_t d = (size_t{1} << 16) * 3 + 5;  // several mask blocks, the last one short
  Round r(Config(5, 4, 3, d, 1, 33), RandomInputs(5, d, 33, 8));
  r.ring_inputs = true;
  r.drop[2] = {1};  // silent after sharing keys: its pairwise masks are rebuilt and removed
  auto result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ToWords(), r.ExpectedSum());
}

TEST(SecAggTest, AnInputRefusedPartWayLeavesTheSumAsItWas) {
  const size_t d = (size_t{1} << 17) + 3;
  Round r(Config(3, 2, 2, d), RandomInputs(3, d, 20, 6));
  r.submit = [](SecAggServer& server, const SecAggMaskedInput& m) -> absl::Status {
    // The second chunk cannot be read: that error, and nothing added.
    absl::Status broke = server.HandleMaskedInput(
        m.header, [&m](size_t offset, absl::Span<uint64_t> out) -> absl::Status {
          if (offset > 0) return absl::DataLossError("the staging file went away");
          return ReaderOf(m)(offset, out);
        });
    if (broke.code() != absl::StatusCode::kDataLoss) return absl::InternalError(broke.ToString());
    // An element outside the ring in the last chunk: refused, and the first two taken back.
    SecAggMaskedInput bad = m;
    bad.values.back() = uint64_t{1} << 40;
    absl::Status outside = server.HandleMaskedInput(m.header, ReaderOf(bad));
    if (outside.code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(outside.ToString());
    }
    return server.HandleMaskedInput(m.header, ReaderOf(m));
  };
  auto result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ToWords(), r.ExpectedSum());
}

TEST(SecAggTest, APartlyAddedInputThatCannotBeReadAgainAbortsTheRound) {
  const size_t d = (size_t{1} << 16) + 1;
  Round r(Config(3, 2, 2, d), RandomInputs(3, d, 20, 7));
  SecAggStage after = SecAggStage::kMaskedInput;
  r.submit = [&after](SecAggServer& server, const SecAggMaskedInput& m) {
    SecAggMaskedInput bad = m;
    bad.values.back() = uint64_t{1} << 40;  // refused in the second chunk
    int reads = 0;
    absl::Status s = server.HandleMaskedInput(
        m.header, [&](size_t offset, absl::Span<uint64_t> out) -> absl::Status {
          if (++reads > 2) return absl::DataLossError("the staging file went away");
          return ReaderOf(bad)(offset, out);
        });
    after = server.stage();
    return s;
  };
  absl::StatusOr<SecAggResult> result = r.Run();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss) << result.status();
  EXPECT_NE(result.status().message().find("cannot be read again"), std::string::npos)
      << result.status();
  EXPECT_EQ(after, SecAggStage::kAborted);
}

class SecAggDropoutTest : public ::testing::TestWithParam<int> {};

TEST_P(SecAggDropoutTest, SurvivorsAtThresholdGiveTheExactSumOfTheirInputs) {
  const int stage = GetParam();
  Round r(Config(10, 9, 6, 257), RandomInputs(10, 257, 20, 5));
  r.drop[stage] = {1, 4, 7, 9};  // 6 survivors = t
  absl::StatusOr<SecAggResult> result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ToWords(), r.ExpectedSum());
  const std::vector<int32_t> expected_contributors =
      stage == 3 ? std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
                 : std::vector<int32_t>{0, 2, 3, 5, 6, 8};
  EXPECT_EQ(result->contributors, expected_contributors);
}

TEST_P(SecAggDropoutTest, FewerSurvivorsThanThresholdAbortAndTheNextRoundProceeds) {
  const int stage = GetParam();
  Round r(Config(10, 9, 6, 64), RandomInputs(10, 64, 20, 6));
  r.drop[stage] = {0, 2, 4, 6, 8};  // 5 survivors < t
  absl::StatusOr<SecAggResult> result = r.Run();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted) << result.status();
  if (stage == 3) {
    // Responses went out, but only from 5 holders: nothing can be reconstructed (t = 6).
    EXPECT_EQ(r.responses.size(), 5u);
  }
  Round next(Config(10, 9, 6, 64, /*round=*/2), RandomInputs(10, 64, 20, 7));
  next.drop[stage] = {3};
  absl::StatusOr<SecAggResult> ok = next.Run();
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->sum.ToWords(), next.ExpectedSum());
}

INSTANTIATE_TEST_SUITE_P(EveryStage, SecAggDropoutTest, ::testing::Values(0, 1, 2, 3));

TEST(SecAggTest, SparseGraphRecoversDroppedClientsAcrossStages) {
  auto choice = ChooseSecAggGraph(60, 0.1, 20);
  ASSERT_TRUE(choice.ok());
  ASSERT_LT(choice->degree, 59);  // a real sparse graph
  Round r(Config(60, choice->degree, choice->threshold, 100), RandomInputs(60, 100, 24, 8));
  r.config.ring_bits = 24;
  r.drop[0] = {3};
  r.drop[1] = {10, 11};
  r.drop[2] = {20, 40};
  r.drop[3] = {50};
  absl::StatusOr<SecAggResult> result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ToWords(), r.ExpectedSum());
  EXPECT_EQ(result->contributors.size(), 55u);
}

TEST(SecAggTest, MaskedVectorIsUniformByChiSquare) {
  // A constant input, masked in Z_2^8: 256 bins, 255 degrees of freedom; the 0.1% critical value
  // of chi-square(255) is 330.5.
  constexpr size_t d = 100000;
  SecAggConfig config = Config(5, 4, 3, d, 1, /*ring_bits=*/8);
  Round r(config, std::vector<std::vector<uint64_t>>(5, std::vector<uint64_t>(d, 7)));
  ASSERT_TRUE(r.Run().ok());
  for (const SecAggMaskedInput& m : r.masked) {
    std::array<double, 256> counts{};
    for (uint64_t v : m.values) counts[v] += 1;
    double chi2 = 0;
    const double expected = static_cast<double>(d) / 256;
    for (double c : counts) chi2 += (c - expected) * (c - expected) / expected;
    EXPECT_LT(chi2, 330.5) << "client " << m.header.sender;
    // The raw input would give chi2 = 255 * d.
  }
}

TEST(SecAggTest, ServerViewIsTheSameWhenMasksAbsorbAnInputChange) {
  // Inputs X and X' with client 0 moved by +delta and client 1 by -delta (same sum). With the
  // same client randomness, the server's view under X' is its view under X with the pairwise
  // mask p_01 shifted by delta: every message is identical except y_0 and y_1, which move by
  // exactly +delta and -delta; and the key s_01 behind p_01 stays hidden (no masking-key share of
  // 0 or 1 is revealed), so a shifted p_01 is as likely as the original.
  constexpr size_t d = 50;
  Round a(Config(6, 5, 4, d), RandomInputs(6, d, 20, 9));
  Round b = a;
  const uint64_t mask = (uint64_t{1} << 20) - 1;
  std::vector<uint64_t> delta(d);
  for (size_t j = 0; j < d; ++j) {
    delta[j] = (j * 7919 + 13) & mask;
    b.inputs[0][j] = (b.inputs[0][j] + delta[j]) & mask;
    b.inputs[1][j] = (b.inputs[1][j] - delta[j]) & mask;
  }
  auto ra = a.Run();
  auto rb = b.Run();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->sum, rb->sum);
  ASSERT_EQ(a.adverts.size(), b.adverts.size());
  for (size_t i = 0; i < a.adverts.size(); ++i) {
    EXPECT_EQ(a.adverts[i].masking_key, b.adverts[i].masking_key);
    EXPECT_EQ(a.adverts[i].encryption_key, b.adverts[i].encryption_key);
  }
  for (size_t i = 0; i < a.share_keys.size(); ++i) {
    for (size_t s = 0; s < a.share_keys[i].shares.size(); ++s) {
      EXPECT_EQ(a.share_keys[i].shares[s].ciphertext, b.share_keys[i].shares[s].ciphertext);
    }
  }
  for (size_t i = 0; i < a.masked.size(); ++i) {
    const int32_t c = a.masked[i].header.sender;
    for (size_t j = 0; j < d; ++j) {
      const uint64_t shift = (b.masked[i].values[j] - a.masked[i].values[j]) & mask;
      const uint64_t want = c == 0 ? delta[j] : c == 1 ? (0 - delta[j]) & mask : 0;
      ASSERT_EQ(shift, want) << "client " << c << " coordinate " << j;
    }
  }
  for (size_t i = 0; i < a.responses.size(); ++i) {
    for (size_t s = 0; s < a.responses[i].shares.size(); ++s) {
      const SecAggRevealedShare& x = a.responses[i].shares[s];
      EXPECT_EQ(x.share, b.responses[i].shares[s].share);
      EXPECT_NE(x.kind, SecAggShareKind::kMaskingKey);
    }
  }
  // The masked inputs are also far from the inputs themselves.
  EXPECT_NE(a.masked[0].values, a.inputs[0]);
}

TEST(SecAggTest, WeightedAverageUnderMasksMatchesPlaintextWithinQuantisationBound) {
  constexpr int32_t n = 10;
  constexpr size_t d = 1000;
  SecureQuantizerOptions qo;
  qo.clip = 0.5;
  qo.bits = 12;
  qo.max_weight = 100;
  qo.max_clients = n;
  auto q = SecureQuantizer::Create(qo);
  ASSERT_TRUE(q.ok()) << q.status();
  std::vector<std::vector<float>> x(n, std::vector<float>(d));
  std::vector<int64_t> w(n);
  std::vector<std::vector<uint64_t>> enc(n, std::vector<uint64_t>(d + 1));
  uint64_t s = 1;
  for (int32_t i = 0; i < n; ++i) {
    w[i] = 1 + i * 11;
    for (size_t j = 0; j < d; ++j) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x[i][j] = static_cast<float>((static_cast<double>(s >> 11) * 0x1.0p-53 - 0.5) * 1.4);
    }
    ASSERT_TRUE(q->Encode(x[i], w[i], 1000 + i, absl::MakeSpan(enc[i])).ok());
  }
  Round r(Config(n, 9, 6, d + 1, 1, q->ring_bits()), enc);
  r.drop[2] = {4};  // client 4 drops before sending its masked input
  auto result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<float> mean(d);
  auto total = q->DecodeMean(result->sum, absl::MakeSpan(mean));
  ASSERT_TRUE(total.ok());
  int64_t wsum = 0;
  for (int32_t i = 0; i < n; ++i) wsum += i == 4 ? 0 : w[i];
  EXPECT_EQ(*total, wsum);
  double max_err = 0;
  for (size_t j = 0; j < d; ++j) {
    double plain = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (i != 4) plain += w[i] * std::clamp<double>(x[i][j], -qo.clip, qo.clip);
    }
    plain /= static_cast<double>(wsum);
    max_err = std::max(max_err, std::abs(mean[j] - plain));
  }
  EXPECT_LT(max_err, q->max_error());
  EXPECT_GT(max_err, 0);  // it is quantised
}

TEST(SecAggTest, DistributedGaussianNoiseSurvivesMaskingWithTheRequestedVariance) {
  // Each client clips to L2 norm C, adds N(0, (sigma C)^2 / t), quantises and masks; with n >= t
  // survivors the unmasked sum carries noise of variance n (sigma C)^2 / t >= (sigma C)^2.
  constexpr int32_t n = 8;
  constexpr size_t d = 20000;
  constexpr double clip_norm = 1.0, sigma = 1.0;
  auto config = PlanSecAggRound("exp", 1, n, 0.0, 1, d + 1, 3);
  ASSERT_TRUE(config.ok()) << config.status();
  SecureQuantizerOptions qo;
  qo.clip = 8.0;  // the coordinate range leaves room for about 8 noise standard deviations
  qo.bits = 20;
  qo.max_clients = n;
  auto q = SecureQuantizer::Create(qo);
  ASSERT_TRUE(q.ok());
  config->ring_bits = q->ring_bits();
  const double stddev = DistributedNoiseStddev(sigma, clip_norm, config->threshold);
  std::vector<std::vector<uint64_t>> enc(n, std::vector<uint64_t>(d + 1));
  std::vector<double> plain(d, 0);
  for (int32_t i = 0; i < n; ++i) {
    std::vector<float> x(d, 0.0f);
    x[i] = 3.0f;  // norm 3, clipped to 1
    ASSERT_TRUE(ClipToL2Norm(absl::MakeSpan(x), clip_norm).ok());
    for (size_t j = 0; j < d; ++j) plain[j] += x[j];
    std::array<uint8_t, 32> seed{};
    seed[0] = static_cast<uint8_t>(i + 1);
    ASSERT_TRUE(AddGaussianNoise(absl::MakeSpan(x), stddev, seed).ok());
    ASSERT_TRUE(q->Encode(x, 1, 50 + i, absl::MakeSpan(enc[i])).ok());
  }
  Round r(*config, enc);
  auto result = r.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<float> mean(d);
  ASSERT_TRUE(q->DecodeMean(result->sum, absl::MakeSpan(mean)).ok());
  double var = 0;
  for (size_t j = 0; j < d; ++j) {
    const double noise = mean[j] * n - plain[j];
    var += noise * noise;
  }
  var /= d;
  const double want = n * stddev * stddev;  // plus quantisation noise, negligible at 20 bits
  EXPECT_NEAR(var, want, 0.05 * want);      // 5% = 5 standard errors of the estimate
  EXPECT_GE(want, sigma * sigma * clip_norm * clip_norm);
}

TEST(SecAggTest, TwoLevelsRevealOnlyTheTotalToTheGlobalServer) {
  // 2 regions x 5 clients; client 2 of region 1 dies after sharing keys. Each regional aggregator
  // unmasks its region's sum and then masks it again as a client of the regional layer.
  constexpr size_t d = 40;
  constexpr int ring = 24;
  std::vector<std::vector<uint64_t>> region_sums;
  std::vector<uint64_t> total(d, 0);
  for (int region = 0; region < 2; ++region) {
    Round r(Config(5, 4, 3, d, 1, ring), RandomInputs(5, d, 16, 20 + region));
    r.config.experiment_id = "exp/region" + std::to_string(region);
    if (region == 1) r.drop[2] = {2};
    auto result = r.Run();
    ASSERT_TRUE(result.ok()) << result.status();
    region_sums.push_back(result->sum.ToWords());
    for (size_t j = 0; j < d; ++j) total[j] = (total[j] + result->sum[j]) & ((1u << ring) - 1);
  }
  auto global_config = RegionalLayerConfig("exp", 1, 2, ring, d, 5);
  ASSERT_TRUE(global_config.ok()) << global_config.status();
  Round g(*global_config, region_sums);
  auto result = g.Run();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sum.ToWords(), total);
  // What the global server received from each region is not that region's sum.
  for (const SecAggMaskedInput& m : g.masked) {
    EXPECT_NE(m.values, region_sums[m.header.sender]);
  }
}

// ---- Protocol hygiene -------------------------------------------------------------------

SecAggHeader H(SecAggStage stage, int32_t from, int32_t to) {
  SecAggHeader h;
  h.experiment_id = "exp";
  h.round = 1;
  h.stage = stage;
  h.sender = from;
  h.recipient = to;
  return h;
}

SecAggUnmaskRequest RequestTo0(std::vector<int32_t> survivors, std::vector<int32_t> dropped) {
  SecAggUnmaskRequest r;
  r.header = H(SecAggStage::kUnmask, kSecAggServer, 0);
  r.survivors = std::move(survivors);
  r.dropped = std::move(dropped);
  return r;
}

struct Stage1 {
  SecAggConfig config = Config(4, 3, 3, 8);
  std::optional<SecAggServer> server;
  std::vector<std::optional<SecAggClient>> clients;
  std::vector<SecAggAdvertiseKeys> adverts;
  Stage1() {
    server.emplace(*SecAggServer::Create(config));
    for (int32_t i = 0; i < 4; ++i) {
      clients.emplace_back(*SecAggClient::Create(config, i, Entropy(1, i)));
      adverts.push_back(*clients[i]->AdvertiseKeys());
    }
  }
};

TEST(SecAggHygieneTest, StageOrderIsStrict) {
  Stage1 s;
  SecAggMaskedInput early;
  early.header = H(SecAggStage::kMaskedInput, 0, kSecAggServer);
  early.values.assign(8, 0);
  EXPECT_EQ(s.server->HandleMaskedInput(early).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.server->FinishShareKeys().status().code(), absl::StatusCode::kFailedPrecondition);
  for (const auto& a : s.adverts) ASSERT_TRUE(s.server->HandleAdvertiseKeys(a).ok());
  auto dirs = s.server->FinishAdvertiseKeys();
  ASSERT_TRUE(dirs.ok());
  // A late advertisement after its stage closed.
  EXPECT_EQ(s.server->HandleAdvertiseKeys(s.adverts[0]).code(), absl::StatusCode::kAborted);
  // The client refuses an unmask request before it has even shared keys.
  SecAggUnmaskRequest req = RequestTo0({0, 1, 2}, {});
  EXPECT_EQ(s.clients[0]->HandleUnmaskRequest(req).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.clients[0]->MaskInput(std::vector<uint64_t>(8, 0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SecAggHygieneTest, DuplicateReplayedAndForeignMessagesAreAborted) {
  Stage1 s;
  ASSERT_TRUE(s.server->HandleAdvertiseKeys(s.adverts[0]).ok());
  EXPECT_EQ(s.server->HandleAdvertiseKeys(s.adverts[0]).code(), absl::StatusCode::kAborted);
  SecAggAdvertiseKeys old_round = s.adverts[1];
  old_round.header.round = 0;
  EXPECT_EQ(s.server->HandleAdvertiseKeys(old_round).code(), absl::StatusCode::kAborted);
  SecAggAdvertiseKeys other = s.adverts[1];
  other.header.experiment_id = "other";
  EXPECT_EQ(s.server->HandleAdvertiseKeys(other).code(), absl::StatusCode::kAborted);
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(s.server->HandleAdvertiseKeys(s.adverts[i]).ok());
  auto dirs = s.server->FinishAdvertiseKeys();
  ASSERT_TRUE(dirs.ok());
  auto sk = s.clients[0]->HandleKeyDirectory((*dirs)[0]);
  ASSERT_TRUE(sk.ok());
  // The client does not process the same directory twice.
  EXPECT_EQ(s.clients[0]->HandleKeyDirectory((*dirs)[0]).status().code(),
            absl::StatusCode::kAborted);
  ASSERT_TRUE(s.server->HandleShareKeys(*sk).ok());
  EXPECT_EQ(s.server->HandleShareKeys(*sk).code(), absl::StatusCode::kAborted);
}

TEST(SecAggHygieneTest, DuplicatedPublicKeysAreRejected) {
  Stage1 s;
  ASSERT_TRUE(s.server->HandleAdvertiseKeys(s.adverts[0]).ok());
  SecAggAdvertiseKeys copy = s.adverts[1];
  copy.masking_key = s.adverts[0].masking_key;
  EXPECT_EQ(s.server->HandleAdvertiseKeys(copy).code(), absl::StatusCode::kInvalidArgument);
  SecAggAdvertiseKeys same = s.adverts[1];
  same.encryption_key = same.masking_key;
  EXPECT_EQ(s.server->HandleAdvertiseKeys(same).code(), absl::StatusCode::kInvalidArgument);
  // A client refuses a directory in which two peers share a key.
  SecAggKeyDirectory dir;
  dir.header = H(SecAggStage::kShareKeys, kSecAggServer, 0);
  for (int i = 0; i < 4; ++i) {
    dir.peers.push_back({i, s.adverts[i].encryption_key, s.adverts[i].masking_key});
  }
  dir.peers[3].masking_key = dir.peers[2].masking_key;
  EXPECT_EQ(s.clients[0]->HandleKeyDirectory(dir).status().code(),
            absl::StatusCode::kInvalidArgument);
  // ... and still accepts the honest one afterwards.
  dir.peers[3].masking_key = s.adverts[3].masking_key;
  EXPECT_TRUE(s.clients[0]->HandleKeyDirectory(dir).ok());
}

// Runs the four clients of Stage1 up to their share deliveries.
std::vector<SecAggShareDelivery> ToDeliveries(Stage1& s) {
  for (const auto& a : s.adverts) EXPECT_TRUE(s.server->HandleAdvertiseKeys(a).ok());
  auto dirs = *s.server->FinishAdvertiseKeys();
  for (const auto& dir : dirs) {
    EXPECT_TRUE(
        s.server->HandleShareKeys(*s.clients[dir.header.recipient]->HandleKeyDirectory(dir)).ok());
  }
  return *s.server->FinishShareKeys();
}

TEST(SecAggHygieneTest, CiphertextWithSwappedSenderAndRecipientFailsAuthentication) {
  Stage1 s;
  std::vector<SecAggShareDelivery> deliveries = ToDeliveries(s);
  // Client 1 received a share from 0 (encrypted under the symmetric key of 0 and 1, with AD
  // "from 0 to 1"). Relabel it "from 1 to 0" and hand it to client 0: the key is right, the AD
  // is not.
  SecAggShareDelivery to0 = deliveries[0];
  SecAggEncryptedShare forged;
  for (const auto& share : deliveries[1].shares) {
    if (share.sender == 0) forged = share;
  }
  std::swap(forged.sender, forged.recipient);
  for (auto& share : to0.shares) {
    if (share.sender == 1) share = forged;
  }
  absl::Status st = s.clients[0]->HandleShareDelivery(to0);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(s.clients[0]->HandleShareDelivery(deliveries[0]).ok());
}

TEST(SecAggHygieneTest, WrongLengthVectorsAreRejected) {
  Stage1 s;
  std::vector<SecAggShareDelivery> deliveries = ToDeliveries(s);
  ASSERT_TRUE(s.clients[0]->HandleShareDelivery(deliveries[0]).ok());
  EXPECT_EQ(s.clients[0]->MaskInput(std::vector<uint64_t>(7, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.clients[0]->MaskInput(std::vector<uint64_t>(8, uint64_t{1} << 20)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto m = s.clients[0]->MaskInput(std::vector<uint64_t>(8, 3));
  ASSERT_TRUE(m.ok());
  SecAggMaskedInput longer = *m;
  longer.values.push_back(0);
  EXPECT_EQ(s.server->HandleMaskedInput(longer).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.server->HandleMaskedInput(*m).ok());
  EXPECT_EQ(s.server->HandleMaskedInput(*m).code(), absl::StatusCode::kAborted);
}

TEST(SecAggHygieneTest, RequestForBothKindsOfShareOfOneClientIsRefused) {
  Stage1 s;
  std::vector<SecAggShareDelivery> deliveries = ToDeliveries(s);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.clients[i]->HandleShareDelivery(deliveries[i]).ok());
    ASSERT_TRUE(
        s.server->HandleMaskedInput(*s.clients[i]->MaskInput(std::vector<uint64_t>(8, i))).ok());
  }
  SecAggUnmaskRequest both = RequestTo0({0, 1, 2, 3}, {3});
  EXPECT_EQ(s.clients[0]->HandleUnmaskRequest(both).status().code(),
            absl::StatusCode::kInvalidArgument);
  // An honest request is answered once; a second request (asking for 3's masking key after its
  // seed share went out) is refused.
  SecAggUnmaskRequest honest = RequestTo0({0, 1, 2, 3}, {});
  ASSERT_TRUE(s.clients[0]->HandleUnmaskRequest(honest).ok());
  SecAggUnmaskRequest later = RequestTo0({0, 1, 2}, {3});
  EXPECT_EQ(s.clients[0]->HandleUnmaskRequest(later).status().code(), absl::StatusCode::kAborted);
  // The server checks responses against its own request: a masking-key share of a survivor is
  // refused.
  auto requests = s.server->FinishMaskedInput();
  ASSERT_TRUE(requests.ok());
  SecAggUnmaskResponse bad;
  bad.header = H(SecAggStage::kUnmask, 1, kSecAggServer);
  for (int32_t c : (*requests)[1].survivors)
    bad.shares.push_back({c, SecAggShareKind::kSelfMaskSeed, {}});
  bad.shares.back().kind = SecAggShareKind::kMaskingKey;
  EXPECT_EQ(s.server->HandleUnmaskResponse(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SecAggHygieneTest, CorruptedSeedShareAbortsInsteadOfReturningAWrongSum) {
  Stage1 s;
  std::vector<SecAggShareDelivery> deliveries = ToDeliveries(s);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.clients[i]->HandleShareDelivery(deliveries[i]).ok());
    ASSERT_TRUE(
        s.server->HandleMaskedInput(*s.clients[i]->MaskInput(std::vector<uint64_t>(8, i))).ok());
  }
  auto requests = s.server->FinishMaskedInput();
  ASSERT_TRUE(requests.ok());
  for (const auto& r : *requests) {
    auto m = s.clients[r.header.recipient]->HandleUnmaskRequest(r);
    ASSERT_TRUE(m.ok());
    if (r.header.recipient == 0) m->shares[1].share[2] = (m->shares[1].share[2] + 1) % 1000;
    ASSERT_TRUE(s.server->HandleUnmaskResponse(*m).ok());
  }
  auto result = s.server->FinishUnmask();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted) << result.status();
  EXPECT_EQ(s.server->stage(), SecAggStage::kAborted);
}

TEST(SecAggHygieneTest, LateMaskedInputOfDroppedClientIsNotAccepted) {
  // Self masks: once the server asked for a client's masking-key shares (declared dropped), its
  // late masked input is refused, so its input can never be unmasked.
  Stage1 s;
  std::vector<SecAggShareDelivery> deliveries = ToDeliveries(s);
  std::vector<SecAggMaskedInput> inputs;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.clients[i]->HandleShareDelivery(deliveries[i]).ok());
    inputs.push_back(*s.clients[i]->MaskInput(std::vector<uint64_t>(8, i)));
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.server->HandleMaskedInput(inputs[i]).ok());
  ASSERT_TRUE(s.server->FinishMaskedInput().ok());
  EXPECT_EQ(s.server->HandleMaskedInput(inputs[3]).code(), absl::StatusCode::kAborted);
}

TEST(SecAggConfigTest, ChoiceOfDegreeAndThresholdFollowsDropoutRate) {
  auto small = ChooseSecAggGraph(10, 0.1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->degree, 9);
  EXPECT_EQ(small->threshold, 6);
  auto low = ChooseSecAggGraph(500, 0.1);
  auto high = ChooseSecAggGraph(500, 0.3);
  ASSERT_TRUE(low.ok() && high.ok());
  EXPECT_TRUE(low->meets_target);
  EXPECT_LT(low->degree, high->degree);
  EXPECT_LT(low->degree, 499);
  EXPECT_GT(low->threshold * 2, low->degree + 1);
  EXPECT_LE(low->failure_probability, std::ldexp(1.0, -40));
  EXPECT_FALSE(ChooseSecAggGraph(1, 0.1).ok());
  EXPECT_FALSE(ChooseSecAggGraph(10, 1.0).ok());
}

TEST(SecAggConfigTest, GraphIsRegularAndSymmetric) {
  SecAggConfig c = Config(50, 8, 5, 1);
  SecAggGraph g(c);
  for (int32_t a = 0; a < 50; ++a) {
    ASSERT_EQ(g.neighbours(a).size(), 8u);
    for (int32_t b : g.neighbours(a)) EXPECT_TRUE(g.adjacent(b, a));
  }
}

TEST(SecAggConfigTest, InvalidConfigsAreRefused) {
  EXPECT_FALSE(ValidateSecAggConfig(Config(10, 9, 5, 4)).ok());  // t not a majority of 10
  EXPECT_FALSE(ValidateSecAggConfig(Config(10, 5, 4, 4)).ok());  // odd degree < n - 1
  EXPECT_FALSE(ValidateSecAggConfig(Config(10, 9, 6, 0)).ok());  // empty vector
  EXPECT_TRUE(ValidateSecAggConfig(Config(10, 9, 6, 4)).ok());
}

TEST(SecAggConfigTest, RobustRulesAreRefusedWithSecureAggregation) {
  EXPECT_TRUE(ValidateSecureAggregationRule("fedavg").ok());
  for (const char* rule : {"median", "krum", "multi_krum", "trimmed_mean"}) {
    absl::Status s = ValidateSecureAggregationRule(rule);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("reveals only the sum"), absl::string_view::npos) << s;
  }
}

TEST(SecAggMessagesTest, PackedVectorsRoundTripAtAnyWidth) {
  for (int bits : {1, 7, 16, 20, 33, 64}) {
    auto v = RandomInputs(1, 101, bits == 64 ? 63 : bits, bits)[0];
    if (bits == 64) v[3] = ~uint64_t{0};
    std::string packed = PackRingVector(v, bits);
    EXPECT_EQ(packed.size(), (101 * bits + 7) / 8u);
    auto back = UnpackRingVector(packed, bits, 101);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, v) << bits;
  }
  EXPECT_FALSE(UnpackRingVector("abc", 16, 5).ok());
}

}  // namespace
}  // namespace sextant
