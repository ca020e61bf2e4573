// Secure aggregation cost (bench/secagg/run.sh): one SecAgg+ round with n clients, vectors of d
// coordinates quantised to 16 bits, and a fraction of the clients dropping after sharing keys
// (before their masked input: the costliest place to drop, since the server must then recover
// and expand the pairwise masks of every dropped client with each surviving neighbour). Prints
// one key=value line per configuration:
//   client_s / server_s      compute time of one client (all stages) and of the server
//   client_prg_s / server_prg_s  the PRG-bound minimum: mask bytes each role must expand,
//                            divided by the ChaCha20 throughput measured in the same run
//   client_bytes / plain_bytes   bytes one client sends vs a plaintext float32 update
//   server_bytes             bytes the server sends in all (directories, deliveries, requests)
//   plain_server_s           the plaintext server: n weighted folds of d floats (WeightedAverage)
// All single-threaded; times are thread CPU seconds. The clients run one after another in this
// process; every client does the same work, so one representative client's time is reported. When n
// * (k + 1) * d is large, only the representative client masks its vector and the other survivors
// submit copies of it: the server's work does not depend on the values, but then the unmasked sum
// is not checked (verified=0); below that size every client masks its own input and the sum is
// checked against the plaintext sum (verified=1).
//   secagg_bench chacha
//   secagg_bench round --n N --d D --dropout F [--bits 16] [--max-weight 128]
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "federation/internal/secagg_crypto.h"
#include "federation/secagg_client.h"
#include "federation/secagg_config.h"
#include "federation/secagg_messages.h"
#include "federation/secagg_server.h"
#include "federation/secure_quantizer.h"
#include "federation/weighted_average.h"

namespace sextant {
namespace {

// Thread CPU time, not wall time: the machine is shared, and a compute cost should not include
// the time other processes held the core.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};
double Seconds(double a, double b) { return b - a; }

template <typename T>
T Check(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*v);
}
void Check(absl::Status s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// Bytes per second of ChaCha20-IETF keystream (libsodium), best of 5 over 64 MiB.
double ChaChaThroughput() {
  std::vector<uint8_t> buf(64 << 20);
  secagg_internal::Key32 key{};
  key[0] = 1;
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    secagg_internal::Keystream(key, absl::MakeSpan(buf));
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  volatile uint8_t sink = buf[12345];
  (void)sink;
  return static_cast<double>(buf.size()) / best;
}

struct Args {
  int32_t n = 10;
  size_t d = 100000;
  double dropout = 0;
  int bits = 16;
  int64_t max_weight = 128;
};

std::array<uint8_t, 32> Entropy(uint64_t seed, int32_t client) {
  std::array<uint8_t, 32> e{};
  std::mt19937_64 rng(seed * 1000003 + client);
  for (auto& b : e) b = static_cast<uint8_t>(rng());
  return e;
}

int RunRound(const Args& a) {
  const double chacha = ChaChaThroughput();
  SecAggGraphChoice choice = Check(ChooseSecAggGraph(a.n, a.dropout), "graph");
  SecureQuantizerOptions qo;
  qo.bits = a.bits;
  qo.clip = 1.0;
  qo.max_clients = a.n;
  qo.max_weight = a.max_weight;
  SecureQuantizer quantizer = Check(SecureQuantizer::Create(qo), "quantizer");
  SecAggConfig config;
  config.experiment_id = "bench";
  config.round = 1;
  config.num_clients = a.n;
  config.degree = choice.degree;
  config.threshold = choice.threshold;
  config.ring_bits = quantizer.ring_bits();
  config.vector_length = a.d + 1;
  config.graph_seed = 7;
  const bool real = static_cast<double>(a.n) * (choice.degree + 1) * a.d <= 1.0e9;

  // Dropouts: a seeded random subset, silent from the masked-input stage on.
  std::vector<int32_t> order(a.n);
  for (int32_t i = 0; i < a.n; ++i) order[i] = i;
  std::mt19937_64 pick(11);
  std::shuffle(order.begin(), order.end(), pick);
  const int32_t num_dropped = static_cast<int32_t>(a.dropout * a.n);
  std::vector<bool> dropped(a.n, false);
  for (int32_t i = 0; i < num_dropped; ++i) dropped[order[i]] = true;
  int32_t rep = 0;
  while (dropped[rep]) ++rep;

  // Memory a long-running aggregator and client reuse from round to round, touched once here:
  // first touches of fresh pages are slow in this sandbox (about 20 us per 4 KiB page) and are
  // not part of the protocol's cost.
  RingVector server_memory(config.ring_bits, config.vector_length);  // zeros, pages touched
  std::vector<uint64_t> client_memory(config.vector_length, 1);
  std::vector<uint64_t> encoded(config.vector_length, 1);
  SecAggServer server = Check(SecAggServer::Create(config, std::move(server_memory)), "server");
  std::vector<std::optional<SecAggClient>> clients;
  // Without `real`, the clients other than the representative mask a 1-element vector: the
  // vector length enters no key, context or header, and the server receives copies of the
  // representative's full-length masked input in their name instead.
  SecAggConfig small = config;
  small.vector_length = 1;
  for (int32_t i = 0; i < a.n; ++i) {
    clients.emplace_back(
        Check(SecAggClient::Create(real || i == rep ? config : small, i, Entropy(3, i)), "client"));
  }
  double server_s = 0, client_s = 0;
  size_t client_bytes = 0, server_bytes = 0;
  auto timed = [](double& acc, auto&& f) {
    auto t0 = Clock::now();
    auto r = f();
    acc += Seconds(t0, Clock::now());
    return r;
  };
  double scratch = 0, server_input_s = 0, server_unmask_s = 0;

  // Stage 0.
  for (int32_t i = 0; i < a.n; ++i) {
    auto m =
        Check(timed(i == rep ? client_s : scratch, [&] { return clients[i]->AdvertiseKeys(); }),
              "advertise");
    if (i == rep) client_bytes += WireSize(m);
    Check(timed(server_s, [&] { return server.HandleAdvertiseKeys(m); }), "handle advertise");
  }
  auto dirs = Check(timed(server_s, [&] { return server.FinishAdvertiseKeys(); }), "finish adv");
  // Stage 1.
  for (const auto& dir : dirs) {
    server_bytes += WireSize(dir);
    const int32_t i = dir.header.recipient;
    auto m = Check(
        timed(i == rep ? client_s : scratch, [&] { return clients[i]->HandleKeyDirectory(dir); }),
        "share keys");
    if (i == rep) client_bytes += WireSize(m);
    Check(timed(server_s, [&] { return server.HandleShareKeys(m); }), "handle share");
  }
  auto deliveries =
      Check(timed(server_s, [&] { return server.FinishShareKeys(); }), "finish share");
  // Stage 2: quantise, mask, send.
  std::vector<float> update(a.d);
  std::mt19937_64 vals(5);
  std::uniform_real_distribution<float> u(-1.2f, 1.2f);
  for (float& x : update) x = u(vals);
  std::vector<uint64_t> expected(config.vector_length, 0);
  std::optional<SecAggMaskedInput> rep_masked;
  size_t rep_mask_peers = 0;
  for (const auto& del : deliveries) {
    server_bytes += WireSize(del);
    const int32_t i = del.header.recipient;
    if (dropped[i]) continue;
    if (i == rep) rep_mask_peers = del.shares.size();
    Check(
        timed(i == rep ? client_s : scratch, [&] { return clients[i]->HandleShareDelivery(del); }),
        "delivery");
    if (i != rep && !real) {
      const uint64_t zero = 0;
      Check(clients[i]->MaskInput(absl::MakeConstSpan(&zero, 1)).status(), "mask small");
      continue;
    }
    SecAggMaskedInput m =
        Check(timed(i == rep ? client_s : scratch,
                    [&] {
                      Check(quantizer.Encode(update, 1 + i % a.max_weight, 100 + i,
                                             absl::MakeSpan(encoded)),
                            "encode");
                      return i == rep ? clients[i]->MaskInput(encoded, std::move(client_memory))
                                      : clients[i]->MaskInput(encoded);
                    }),
              "mask");
    for (size_t j = 0; j < encoded.size(); ++j) expected[j] += encoded[j];
    if (i == rep) {
      client_bytes += WireSize(m, config.ring_bits);
      rep_masked = m;
    }
    if (real) {
      Check(timed(server_input_s, [&] { return server.HandleMaskedInput(m); }), "handle masked");
    }
  }
  if (!real) {
    for (int32_t i = 0; i < a.n; ++i) {
      if (dropped[i]) continue;
      SecAggMaskedInput copy = *rep_masked;
      copy.header.sender = i;
      Check(timed(server_input_s, [&] { return server.HandleMaskedInput(copy); }), "handle masked");
    }
  }
  auto requests =
      Check(timed(server_s, [&] { return server.FinishMaskedInput(); }), "finish masked");
  // Stage 3.
  for (const auto& req : requests) {
    server_bytes += WireSize(req);
    const int32_t i = req.header.recipient;
    auto m = Check(
        timed(i == rep ? client_s : scratch, [&] { return clients[i]->HandleUnmaskRequest(req); }),
        "unmask");
    if (i == rep) client_bytes += WireSize(m);
    Check(timed(server_s, [&] { return server.HandleUnmaskResponse(m); }), "handle unmask");
  }
  SecAggResult result =
      Check(timed(server_unmask_s, [&] { return server.FinishUnmask(); }), "finish");
  server_s += server_input_s + server_unmask_s;
  int verified = 0;
  if (real) {
    const uint64_t ring = config.ring_bits == 64 ? ~0ull : (1ull << config.ring_bits) - 1;
    for (auto& v : expected) v &= ring;
    if (result.sum.ToWords() != expected) {
      std::fprintf(stderr, "unmasked sum differs from the plaintext sum\n");
      return 1;
    }
    verified = 1;
  }

  // The PRG-bound minimum: keystream bytes each role must expand.
  const double bpe = static_cast<double>(secagg_internal::MaskBytesPerElement(config.ring_bits));
  const double elems = static_cast<double>(config.vector_length);
  const double client_prg = (1 + rep_mask_peers) * elems * bpe / chacha;
  SecAggGraph graph(config);
  double server_masks = 0;
  for (int32_t u = 0; u < a.n; ++u) {
    if (!dropped[u]) {
      server_masks += 1;
      continue;
    }
    for (int32_t v : graph.neighbours(u)) server_masks += dropped[v] ? 0 : 1;
  }
  const double server_prg = server_masks * elems * bpe / chacha;

  // The plaintext server: fold n weighted float updates (one buffer reused).
  WeightedAverage avg(a.d);
  double plain_server_s = 0;
  for (int32_t i = 0; i < a.n - num_dropped; ++i) {
    auto t0 = Clock::now();
    Check(avg.Add(update, 1 + i % a.max_weight), "fold");
    plain_server_s += Seconds(t0, Clock::now());
  }
  const size_t plain_bytes = 4 * a.d;
  std::printf(
      "bench=secagg n=%d d=%zu dropout=%.2f dropped=%d k=%d t=%d ring_bits=%d real=%d "
      "verified=%d client_s=%.4f server_s=%.4f server_input_s=%.4f server_unmask_s=%.4f "
      "client_prg_s=%.4f server_prg_s=%.4f "
      "server_masks=%.0f client_bytes=%zu plain_bytes=%zu expansion=%.4f server_bytes=%zu "
      "plain_server_s=%.4f chacha_gbps=%.3f\n",
      a.n, a.d, a.dropout, num_dropped, config.degree, config.threshold, config.ring_bits,
      real ? 1 : 0, verified, client_s, server_s, server_input_s, server_unmask_s, client_prg,
      server_prg, server_masks, client_bytes, plain_bytes,
      static_cast<double>(client_bytes) / plain_bytes, server_bytes, plain_server_s, chacha / 1e9);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: secagg_bench chacha | round --n N --d D --dropout F\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "chacha") {
    std::printf("bench=chacha gbps=%.3f\n", sextant::ChaChaThroughput() / 1e9);
    return 0;
  }
  sextant::Args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--n")
      a.n = std::atoi(v);
    else if (k == "--d")
      a.d = static_cast<size_t>(std::atof(v));
    else if (k == "--dropout")
      a.dropout = std::atof(v);
    else if (k == "--bits")
      a.bits = std::atoi(v);
    else if (k == "--max-weight")
      a.max_weight = std::atoll(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  return sextant::RunRound(a);
}
