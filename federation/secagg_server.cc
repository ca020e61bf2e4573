#include "federation/secagg_server.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "federation/internal/secagg_context.h"
#include "federation/internal/secagg_crypto.h"

namespace sextant {

using secagg_internal::Key32;

// Masked inputs are added a chunk of this many elements at a time.
constexpr size_t kInputChunk = size_t{1} << 16;

SecAggServer::SecAggServer(SecAggConfig config, RingVector accumulator)
    : config_(std::move(config)),
      graph_(config_),
      clients_(config_.num_clients),
      sum_(std::move(accumulator)) {}

absl::StatusOr<SecAggServer> SecAggServer::Create(SecAggConfig config, RingVector accumulator) {
  if (absl::Status s = ValidateSecAggConfig(config); !s.ok()) return s;
  if (!secagg_internal::EnsureSodium()) return absl::InternalError("libsodium failed to start");
  return SecAggServer(std::move(config), std::move(accumulator));
}

absl::Status SecAggServer::CheckHeader(const SecAggHeader& h, SecAggStage stage) const {
  if (h.experiment_id != config_.experiment_id || h.round != config_.round) {
    return absl::AbortedError(absl::StrCat("secagg server: message of experiment '",
                                           h.experiment_id, "' round ", h.round, ", expected '",
                                           config_.experiment_id, "' round ", config_.round));
  }
  if (stage_ == SecAggStage::kAborted) {
    return absl::AbortedError("secagg server: the round was aborted");
  }
  if (h.stage != stage || stage_ != stage) {
    return absl::AbortedError(absl::StrCat("secagg server: ", SecAggStageName(h.stage),
                                           " message while the ", SecAggStageName(stage_),
                                           " stage is open"));
  }
  if (h.recipient != kSecAggServer || h.sender < 0 || h.sender >= config_.num_clients) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg server: bad sender ", h.sender, " or recipient ", h.recipient));
  }
  return absl::OkStatus();
}

absl::Status SecAggServer::Abort(absl::Status why) {
  stage_ = SecAggStage::kAborted;
  sum_.Zero();
  sum_.Clear();
  for (Client& c : clients_) {
    c.inbox.clear();
    c.seed_shares.clear();
    c.key_shares.clear();
  }
  return why;
}

int32_t SecAggServer::Count(bool Client::*flag) const {
  return static_cast<int32_t>(
      std::count_if(clients_.begin(), clients_.end(), [&](const Client& c) { return c.*flag; }));
}

absl::Status SecAggServer::HandleAdvertiseKeys(const SecAggAdvertiseKeys& m) {
  if (absl::Status s = CheckHeader(m.header, SecAggStage::kAdvertiseKeys); !s.ok()) return s;
  Client& c = clients_[m.header.sender];
  if (c.advertised) {
    return absl::AbortedError(
        absl::StrCat("secagg server: client ", m.header.sender, " already advertised keys"));
  }
  const std::string enc(m.encryption_key.begin(), m.encryption_key.end());
  const std::string mask(m.masking_key.begin(), m.masking_key.end());
  if (enc == mask || public_keys_.contains(enc) || public_keys_.contains(mask)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: client ", m.header.sender,
                                                   " advertised a duplicated public key"));
  }
  public_keys_.insert(enc);
  public_keys_.insert(mask);
  c.advertised = true;
  c.encryption_key = m.encryption_key;
  c.masking_key = m.masking_key;
  c.seed_commitment = m.seed_commitment;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggKeyDirectory>> SecAggServer::FinishAdvertiseKeys() {
  if (stage_ != SecAggStage::kAdvertiseKeys) {
    return absl::FailedPreconditionError("secagg server: advertise stage is not open");
  }
  if (Count(&Client::advertised) < config_.threshold) {
    return Abort(absl::AbortedError("secagg server: fewer than t clients advertised keys"));
  }
  std::vector<SecAggKeyDirectory> out;
  for (int32_t u = 0; u < config_.num_clients; ++u) {
    Client& c = clients_[u];
    if (!c.advertised) continue;
    SecAggKeyDirectory dir{
        {config_.experiment_id, config_.round, SecAggStage::kShareKeys, kSecAggServer, u}, {}};
    for (int32_t v : graph_.holders(u)) {
      if (!clients_[v].advertised) continue;
      c.directory.push_back(v);
      dir.peers.push_back({v, clients_[v].encryption_key, clients_[v].masking_key});
    }
    out.push_back(std::move(dir));
  }
  stage_ = SecAggStage::kShareKeys;
  return out;
}

absl::Status SecAggServer::HandleShareKeys(const SecAggShareKeys& m) {
  if (absl::Status s = CheckHeader(m.header, SecAggStage::kShareKeys); !s.ok()) return s;
  const int32_t u = m.header.sender;
  Client& c = clients_[u];
  if (!c.advertised) {
    return absl::AbortedError(absl::StrCat("secagg server: client ", u, " dropped earlier"));
  }
  if (c.shared) {
    return absl::AbortedError(absl::StrCat("secagg server: client ", u, " already shared keys"));
  }
  // Exactly one ciphertext for every other peer of its directory.
  std::vector<int32_t> recipients;
  for (const SecAggEncryptedShare& s : m.shares) {
    if (s.sender != u) {
      return absl::InvalidArgumentError("secagg server: share sender differs from the header");
    }
    if (s.ciphertext.size() != secagg_internal::kShareCiphertextBytes) {
      return absl::InvalidArgumentError("secagg server: share ciphertext has the wrong size");
    }
    recipients.push_back(s.recipient);
  }
  std::sort(recipients.begin(), recipients.end());
  std::vector<int32_t> expected;
  for (int32_t v : c.directory) {
    if (v != u) expected.push_back(v);
  }
  if (recipients != expected) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: client ", u,
                                                   " must send one share to each of its ",
                                                   expected.size(), " peers"));
  }
  for (const SecAggEncryptedShare& s : m.shares) clients_[s.recipient].inbox.push_back(s);
  c.shared = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggShareDelivery>> SecAggServer::FinishShareKeys() {
  if (stage_ != SecAggStage::kShareKeys) {
    return absl::FailedPreconditionError("secagg server: share stage is not open");
  }
  if (Count(&Client::shared) < config_.threshold) {
    return Abort(absl::AbortedError("secagg server: fewer than t clients shared keys"));
  }
  std::vector<SecAggShareDelivery> out;
  for (int32_t v = 0; v < config_.num_clients; ++v) {
    Client& c = clients_[v];
    if (!c.shared) {
      c.inbox.clear();
      continue;
    }
    SecAggShareDelivery d{
        {config_.experiment_id, config_.round, SecAggStage::kMaskedInput, kSecAggServer, v},
        std::move(c.inbox)};
    c.inbox.clear();
    out.push_back(std::move(d));
  }
  if (sum_.ring_bits() == config_.ring_bits && sum_.size() == config_.vector_length) {
    sum_.Zero();
  } else {
    sum_ = RingVector(config_.ring_bits, config_.vector_length);
  }
  stage_ = SecAggStage::kMaskedInput;
  return out;
}

absl::Status SecAggServer::CheckMaskedInputSender(const SecAggHeader& h) const {
  if (absl::Status s = CheckHeader(h, SecAggStage::kMaskedInput); !s.ok()) return s;
  const Client& c = clients_[h.sender];
  if (!c.shared) {
    return absl::AbortedError(absl::StrCat("secagg server: client ", h.sender, " dropped earlier"));
  }
  if (c.masked) {
    return absl::AbortedError(
        absl::StrCat("secagg server: client ", h.sender, " already sent input"));
  }
  return absl::OkStatus();
}

absl::Status SecAggServer::HandleMaskedInput(const SecAggMaskedInput& m) {
  if (absl::Status s = CheckMaskedInputSender(m.header); !s.ok()) return s;
  if (m.values.size() != config_.vector_length) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: masked input of ",
                                                   m.header.sender, " has ", m.values.size(),
                                                   " elements, expected ", config_.vector_length));
  }
  // Whole in memory: checked, then added in one pass.
  const uint64_t ring = secagg_internal::RingMask(config_.ring_bits);
  uint64_t outside = 0;
  for (uint64_t v : m.values) outside |= v & ~ring;
  if (outside != 0) return absl::InvalidArgumentError("secagg server: element outside the ring");
  sum_.Add(0, m.values);
  clients_[m.header.sender].masked = true;
  return absl::OkStatus();
}

absl::Status SecAggServer::HandleMaskedInput(const SecAggHeader& h, const MaskedInputReader& read) {
  if (absl::Status s = CheckMaskedInputSender(h); !s.ok()) return s;
  const uint64_t ring = secagg_internal::RingMask(config_.ring_bits);
  const size_t n = config_.vector_length;
  std::vector<uint64_t> chunk(std::min(n, kInputChunk));
  size_t added = 0;
  absl::Status failed;
  while (added < n && failed.ok()) {
    const absl::Span<uint64_t> part =
        absl::MakeSpan(chunk).first(std::min(chunk.size(), n - added));
    failed = read(added, part);
    uint64_t outside = 0;
    for (uint64_t v : part) outside |= v & ~ring;
    if (failed.ok() && outside != 0) {
      failed = absl::InvalidArgumentError("secagg server: element outside the ring");
    }
    if (failed.ok()) {
      sum_.Add(added, part);
      added += part.size();
    }
  }
  if (failed.ok()) {
    clients_[h.sender].masked = true;
    return absl::OkStatus();
  }
  // Takes back what was added: the sum is then as it was before this input.
  for (size_t at = 0; at < added; at += chunk.size()) {
    const absl::Span<uint64_t> part =
        absl::MakeSpan(chunk).first(std::min(chunk.size(), added - at));
    if (absl::Status s = read(at, part); !s.ok()) {
      return Abort(absl::DataLossError(
          absl::StrCat("secagg server: the partly added masked input of client ", h.sender,
                       " cannot be read again to take it back: ", s.message())));
    }
    sum_.Add(at, part, /*subtract=*/true);
  }
  return failed;
}

absl::Status SecAggServer::CheckRecoverable() const {
  for (int32_t u = 0; u < config_.num_clients; ++u) {
    const Client& c = clients_[u];
    if (!c.shared) continue;
    int32_t alive = 0;
    bool needed = c.masked;
    for (int32_t v : c.directory) {
      if (clients_[v].masked) {
        ++alive;
        if (v != u) needed = true;
      }
    }
    if (needed && alive < config_.threshold) {
      return absl::AbortedError(
          absl::StrCat("secagg server: client ", u, " has ", alive,
                       " surviving share holders, fewer than t = ", config_.threshold));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggUnmaskRequest>> SecAggServer::FinishMaskedInput() {
  if (stage_ != SecAggStage::kMaskedInput) {
    return absl::FailedPreconditionError("secagg server: masked-input stage is not open");
  }
  if (Count(&Client::masked) < config_.threshold) {
    return Abort(absl::AbortedError("secagg server: fewer than t masked inputs"));
  }
  if (absl::Status s = CheckRecoverable(); !s.ok()) return Abort(s);
  std::vector<SecAggUnmaskRequest> out;
  for (int32_t v = 0; v < config_.num_clients; ++v) {
    Client& c = clients_[v];
    if (!c.masked) continue;
    for (int32_t u : c.directory) {
      if (clients_[u].masked) {
        c.survivors.push_back(u);
      } else if (clients_[u].shared) {
        c.dropped.push_back(u);
      }
    }
    SecAggUnmaskRequest request;
    request.header =
        SecAggHeader{config_.experiment_id, config_.round, SecAggStage::kUnmask, kSecAggServer, v};
    request.survivors = c.survivors;
    request.dropped = c.dropped;
    out.push_back(std::move(request));
  }
  stage_ = SecAggStage::kUnmask;
  return out;
}

absl::Status SecAggServer::HandleUnmaskResponse(const SecAggUnmaskResponse& m) {
  if (absl::Status s = CheckHeader(m.header, SecAggStage::kUnmask); !s.ok()) return s;
  const int32_t v = m.header.sender;
  Client& c = clients_[v];
  if (!c.masked) {
    return absl::AbortedError(absl::StrCat("secagg server: client ", v, " is not a survivor"));
  }
  if (c.responded) {
    return absl::AbortedError(absl::StrCat("secagg server: client ", v, " already answered"));
  }
  // The response must answer exactly the request: survivors' seeds, then dropped clients' keys.
  if (m.shares.size() != c.survivors.size() + c.dropped.size()) {
    return absl::InvalidArgumentError("secagg server: unmask response does not match request");
  }
  for (size_t i = 0; i < m.shares.size(); ++i) {
    const bool seed = i < c.survivors.size();
    const int32_t owner = seed ? c.survivors[i] : c.dropped[i - c.survivors.size()];
    const auto kind = seed ? SecAggShareKind::kSelfMaskSeed : SecAggShareKind::kMaskingKey;
    if (m.shares[i].owner != owner || m.shares[i].kind != kind) {
      return absl::InvalidArgumentError(
          "secagg server: unmask response names the wrong client or kind of share");
    }
  }
  for (const SecAggRevealedShare& s : m.shares) {
    for (uint64_t e : s.share) {
      if (e >= secagg_internal::kShamirPrime) {
        return absl::InvalidArgumentError("secagg server: revealed share outside the field");
      }
    }
  }
  const uint32_t x = static_cast<uint32_t>(v) + 1;
  for (const SecAggRevealedShare& s : m.shares) {
    Client& owner = clients_[s.owner];
    (s.kind == SecAggShareKind::kSelfMaskSeed ? owner.seed_shares : owner.key_shares)
        .emplace_back(x, s.share);
  }
  c.responded = true;
  return absl::OkStatus();
}

absl::Status SecAggServer::RemoveMasks() {
  const std::string context = secagg_internal::MaskContext(config_);
  // Every mask is collected first and removed in one chunk-by-chunk pass over the sum.
  std::vector<secagg_internal::MaskTerm> masks;
  for (int32_t u = 0; u < config_.num_clients; ++u) {
    Client& c = clients_[u];
    if (c.masked) {
      absl::StatusOr<Key32> seed =
          secagg_internal::ShamirReconstruct(c.seed_shares, config_.threshold);
      if (!seed.ok()) {
        return absl::AbortedError(absl::StrCat("secagg server: self-mask seed of client ", u, ": ",
                                               seed.status().message()));
      }
      if (secagg_internal::Commit(*seed, secagg_internal::SeedCommitmentContext(config_, u)) !=
          c.seed_commitment) {
        return absl::AbortedError(
            absl::StrCat("secagg server: reconstructed self-mask seed of "
                         "client ",
                         u, " does not match its commitment"));
      }
      masks.push_back({*seed, /*subtract=*/true});
      continue;
    }
    if (!c.shared || c.key_shares.empty()) continue;
    absl::StatusOr<Key32> sk = secagg_internal::ShamirReconstruct(c.key_shares, config_.threshold);
    if (!sk.ok()) {
      return absl::AbortedError(
          absl::StrCat("secagg server: masking key of client ", u, ": ", sk.status().message()));
    }
    if (secagg_internal::PublicKey(*sk) != c.masking_key) {
      return absl::AbortedError(absl::StrCat("secagg server: reconstructed masking key of client ",
                                             u, " does not match its key"));
    }
    for (int32_t v : c.directory) {
      if (v == u || !clients_[v].masked) continue;
      absl::StatusOr<Key32> s =
          secagg_internal::AgreeKey(*sk, c.masking_key, clients_[v].masking_key, context);
      if (!s.ok()) return s.status();
      // Survivor v added +PRG(s_uv) when v < u, and subtracted it otherwise.
      masks.push_back({*s, /*subtract=*/v < u});
    }
  }
  sum_.AddMasks(masks);
  return absl::OkStatus();
}

absl::StatusOr<SecAggResult> SecAggServer::FinishUnmask() {
  if (stage_ != SecAggStage::kUnmask) {
    return absl::FailedPreconditionError("secagg server: unmask stage is not open");
  }
  for (int32_t u = 0; u < config_.num_clients; ++u) {
    const Client& c = clients_[u];
    const bool needs_seed = c.masked;
    const bool needs_key = !c.masked && c.shared && !c.key_shares.empty();
    bool dropped_with_survivor = false;
    if (!c.masked && c.shared) {
      for (int32_t v : c.directory) dropped_with_survivor |= (v != u && clients_[v].masked);
    }
    const size_t have = needs_seed ? c.seed_shares.size() : c.key_shares.size();
    if ((needs_seed || needs_key || dropped_with_survivor) &&
        have < static_cast<size_t>(config_.threshold)) {
      return Abort(
          absl::AbortedError(absl::StrCat("secagg server: only ", have, " shares to unmask client ",
                                          u, ", fewer than t = ", config_.threshold)));
    }
  }
  if (absl::Status s = RemoveMasks(); !s.ok()) return Abort(s);
  SecAggResult result;
  result.sum = std::move(sum_);
  sum_.Clear();
  for (int32_t u = 0; u < config_.num_clients; ++u) {
    if (clients_[u].masked) result.contributors.push_back(u);
  }
  stage_ = SecAggStage::kDone;
  return result;
}

}  // namespace sextant
