#include "federation/secagg_client.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "federation/internal/secagg_context.h"

namespace sextant {

using secagg_internal::ChaChaDrbg;
using secagg_internal::FieldShare;
using secagg_internal::Key32;

namespace {
// Independent DRBG streams drawn from the client's entropy.
constexpr uint64_t kKeysStream = 1, kShamirStream = 2, kNonceStream = 3;

template <typename Container>
bool HasDuplicates(Container ids) {
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) != ids.end();
}
}  // namespace

SecAggClient::SecAggClient(SecAggConfig config, int32_t id, const std::array<uint8_t, 32>& entropy)
    : config_(std::move(config)), id_(id), entropy_(entropy) {
  holders_ = SecAggGraph(config_).holders(id_);
  ChaChaDrbg keys(entropy_, kKeysStream);
  encryption_sk_ = keys.NextKey();
  masking_sk_ = keys.NextKey();
  self_seed_ = keys.NextKey();
  encryption_pk_ = secagg_internal::PublicKey(encryption_sk_);
  masking_pk_ = secagg_internal::PublicKey(masking_sk_);
}

absl::StatusOr<SecAggClient> SecAggClient::Create(SecAggConfig config, int32_t id,
                                                  const std::array<uint8_t, 32>& entropy) {
  if (absl::Status s = ValidateSecAggConfig(config); !s.ok()) return s;
  if (id < 0 || id >= config.num_clients) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: client id ", id, " out of range"));
  }
  if (!secagg_internal::EnsureSodium()) return absl::InternalError("libsodium failed to start");
  return SecAggClient(std::move(config), id, entropy);
}

SecAggHeader SecAggClient::Header(SecAggStage stage) const {
  return SecAggHeader{config_.experiment_id, config_.round, stage, id_, kSecAggServer};
}

absl::Status SecAggClient::CheckHeader(const SecAggHeader& h, SecAggStage stage,
                                       State expected) const {
  if (h.experiment_id != config_.experiment_id || h.round != config_.round) {
    return absl::AbortedError(absl::StrCat("secagg client ", id_, ": message of experiment '",
                                           h.experiment_id, "' round ", h.round, ", expected '",
                                           config_.experiment_id, "' round ", config_.round));
  }
  if (h.sender != kSecAggServer || h.recipient != id_) {
    return absl::AbortedError(absl::StrCat("secagg client ", id_, ": message from ", h.sender,
                                           " to ", h.recipient, " is not for this client"));
  }
  if (h.stage != stage || state_ != expected) {
    return absl::AbortedError(absl::StrCat("secagg client ", id_, ": ", SecAggStageName(h.stage),
                                           " message out of order or replayed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SecAggAdvertiseKeys> SecAggClient::AdvertiseKeys() {
  if (state_ != State::kNew) return absl::FailedPreconditionError("secagg: keys already sent");
  state_ = State::kAwaitDirectory;
  SecAggAdvertiseKeys out;
  out.header = Header(SecAggStage::kAdvertiseKeys);
  out.encryption_key = encryption_pk_;
  out.masking_key = masking_pk_;
  out.seed_commitment =
      secagg_internal::Commit(self_seed_, secagg_internal::SeedCommitmentContext(config_, id_));
  return out;
}

absl::StatusOr<SecAggShareKeys> SecAggClient::HandleKeyDirectory(const SecAggKeyDirectory& dir) {
  if (absl::Status s = CheckHeader(dir.header, SecAggStage::kShareKeys, State::kAwaitDirectory);
      !s.ok()) {
    return s;
  }
  std::vector<int32_t> ids;
  std::vector<std::string> keys;
  bool self_ok = false;
  for (const SecAggPeerKeys& p : dir.peers) {
    if (!std::binary_search(holders_.begin(), holders_.end(), p.client)) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg client ", id_, ": directory lists non-neighbour ", p.client));
    }
    ids.push_back(p.client);
    keys.emplace_back(p.encryption_key.begin(), p.encryption_key.end());
    keys.emplace_back(p.masking_key.begin(), p.masking_key.end());
    if (p.client == id_) {
      self_ok = p.encryption_key == encryption_pk_ && p.masking_key == masking_pk_;
    }
  }
  if (HasDuplicates(ids)) return absl::InvalidArgumentError("secagg: directory repeats a client");
  if (HasDuplicates(keys)) {
    return absl::InvalidArgumentError("secagg: directory holds a duplicated public key");
  }
  if (!self_ok) {
    return absl::InvalidArgumentError("secagg: directory lacks this client's own keys");
  }
  if (static_cast<int32_t>(dir.peers.size()) < config_.threshold) {
    return absl::AbortedError(
        absl::StrCat("secagg client ", id_, ": ", dir.peers.size(),
                     " peers advertised keys, fewer than t = ", config_.threshold));
  }
  std::vector<uint32_t> xs;
  for (const SecAggPeerKeys& p : dir.peers) xs.push_back(static_cast<uint32_t>(p.client) + 1);
  ChaChaDrbg shamir_rng(entropy_, kShamirStream);
  const std::vector<FieldShare> key_shares =
      secagg_internal::ShamirSplit(masking_sk_, config_.threshold, xs, shamir_rng);
  const std::vector<FieldShare> seed_shares =
      secagg_internal::ShamirSplit(self_seed_, config_.threshold, xs, shamir_rng);
  ChaChaDrbg nonce_rng(entropy_, kNonceStream);
  SecAggShareKeys out{Header(SecAggStage::kShareKeys), {}};
  const std::string enc_context = secagg_internal::EncryptionContext(config_);
  for (size_t i = 0; i < dir.peers.size(); ++i) {
    const SecAggPeerKeys& p = dir.peers[i];
    if (p.client == id_) {
      held_[id_] = HeldShares{key_shares[i], seed_shares[i]};
      continue;
    }
    absl::StatusOr<Key32> key =
        secagg_internal::AgreeKey(encryption_sk_, encryption_pk_, p.encryption_key, enc_context);
    if (!key.ok()) return key.status();
    uint8_t plain[secagg_internal::kSharePlaintextBytes];
    std::memcpy(plain, &id_, 4);
    std::memcpy(plain + 4, &p.client, 4);
    std::memcpy(plain + 8, key_shares[i].data(), 40);
    std::memcpy(plain + 48, seed_shares[i].data(), 40);
    SecAggEncryptedShare share;
    share.sender = id_;
    share.recipient = p.client;
    nonce_rng.Fill(share.nonce.data(), share.nonce.size());
    share.ciphertext = secagg_internal::Seal(
        *key, share.nonce, secagg_internal::ShareAd(config_, id_, p.client), plain);
    out.shares.push_back(std::move(share));
  }
  for (const SecAggPeerKeys& p : dir.peers) directory_[p.client] = p;
  state_ = State::kAwaitDelivery;
  return out;
}

absl::Status SecAggClient::HandleShareDelivery(const SecAggShareDelivery& delivery) {
  if (absl::Status s =
          CheckHeader(delivery.header, SecAggStage::kMaskedInput, State::kAwaitDelivery);
      !s.ok()) {
    return s;
  }
  absl::flat_hash_map<int32_t, HeldShares> received;
  const std::string enc_context = secagg_internal::EncryptionContext(config_);
  for (const SecAggEncryptedShare& share : delivery.shares) {
    auto peer = directory_.find(share.sender);
    if (share.recipient != id_ || share.sender == id_ || peer == directory_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("secagg client ", id_, ": share from ",
                                                     share.sender, " to ", share.recipient,
                                                     " does not belong here"));
    }
    if (received.contains(share.sender)) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg client ", id_, ": two shares from ", share.sender));
    }
    absl::StatusOr<Key32> key = secagg_internal::AgreeKey(encryption_sk_, encryption_pk_,
                                                          peer->second.encryption_key, enc_context);
    if (!key.ok()) return key.status();
    absl::StatusOr<std::vector<uint8_t>> plain = secagg_internal::Open(
        *key, share.nonce, secagg_internal::ShareAd(config_, share.sender, share.recipient),
        share.ciphertext);
    if (!plain.ok()) return plain.status();
    int32_t from = 0, to = 0;
    if (plain->size() != secagg_internal::kSharePlaintextBytes) {
      return absl::InvalidArgumentError("secagg: share plaintext has the wrong size");
    }
    std::memcpy(&from, plain->data(), 4);
    std::memcpy(&to, plain->data() + 4, 4);
    if (from != share.sender || to != id_) {
      return absl::InvalidArgumentError("secagg: share plaintext names other parties");
    }
    HeldShares held;
    std::memcpy(held.masking_key.data(), plain->data() + 8, 40);
    std::memcpy(held.self_mask_seed.data(), plain->data() + 48, 40);
    received[share.sender] = held;
  }
  if (static_cast<int32_t>(received.size()) + 1 < config_.threshold) {
    return absl::AbortedError(absl::StrCat("secagg client ", id_, ": shares from ", received.size(),
                                           " peers, fewer than t - 1"));
  }
  for (auto& [owner, held] : received) {
    held_[owner] = held;
    mask_peers_.push_back(owner);
  }
  std::sort(mask_peers_.begin(), mask_peers_.end());
  state_ = State::kReadyToMask;
  return absl::OkStatus();
}

absl::StatusOr<SecAggMaskedInput> SecAggClient::MaskInput(absl::Span<const uint64_t> input,
                                                          std::vector<uint64_t> buffer) {
  buffer.assign(input.begin(), input.end());
  return MaskInput(std::move(buffer));
}

absl::StatusOr<std::vector<secagg_internal::MaskTerm>> SecAggClient::MaskTerms() const {
  std::vector<secagg_internal::MaskTerm> masks = {{self_seed_, false}};
  const std::string context = secagg_internal::MaskContext(config_);
  for (int32_t v : mask_peers_) {
    absl::StatusOr<Key32> seed =
        secagg_internal::AgreeKey(masking_sk_, masking_pk_, directory_.at(v).masking_key, context);
    if (!seed.ok()) return seed.status();
    masks.push_back({*seed, /*subtract=*/id_ > v});
  }
  return masks;
}

absl::StatusOr<SecAggMaskedInput> SecAggClient::MaskInput(std::vector<uint64_t>&& input) {
  if (state_ != State::kReadyToMask) {
    return absl::FailedPreconditionError("secagg: MaskInput before the share delivery, or twice");
  }
  if (input.size() != config_.vector_length) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: input has ", input.size(),
                                                   " elements, expected ", config_.vector_length));
  }
  const uint64_t ring = secagg_internal::RingMask(config_.ring_bits);
  for (uint64_t v : input) {
    if (v & ~ring) return absl::InvalidArgumentError("secagg: input element outside the ring");
  }
  absl::StatusOr<std::vector<secagg_internal::MaskTerm>> masks = MaskTerms();
  if (!masks.ok()) return masks.status();
  SecAggMaskedInput out;
  out.header = Header(SecAggStage::kMaskedInput);
  out.values = std::move(input);
  secagg_internal::AddMasks(*masks, config_.ring_bits, absl::MakeSpan(out.values));
  for (uint64_t& v : out.values) v &= ring;
  state_ = State::kAwaitUnmask;
  return out;
}

absl::StatusOr<SecAggHeader> SecAggClient::MaskInput(RingVector* input) {
  if (state_ != State::kReadyToMask) {
    return absl::FailedPreconditionError("secagg: MaskInput before the share delivery, or twice");
  }
  if (input->size() != config_.vector_length || input->ring_bits() != config_.ring_bits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secagg: input has ", input->size(), " elements in a ", input->ring_bits(),
        "-bit ring, expected ", config_.vector_length, " in a ", config_.ring_bits, "-bit ring"));
  }
  absl::StatusOr<std::vector<secagg_internal::MaskTerm>> masks = MaskTerms();
  if (!masks.ok()) return masks.status();
  input->AddMasks(*masks);
  state_ = State::kAwaitUnmask;
  return Header(SecAggStage::kMaskedInput);
}

absl::StatusOr<SecAggUnmaskResponse> SecAggClient::HandleUnmaskRequest(
    const SecAggUnmaskRequest& request) {
  if (state_ == State::kDone) {
    return absl::AbortedError(absl::StrCat(
        "secagg client ", id_, ": unmask request already answered; a second one is refused"));
  }
  if (absl::Status s = CheckHeader(request.header, SecAggStage::kUnmask, State::kAwaitUnmask);
      !s.ok()) {
    return s;
  }
  absl::flat_hash_set<int32_t> survivors(request.survivors.begin(), request.survivors.end());
  absl::flat_hash_set<int32_t> dropped(request.dropped.begin(), request.dropped.end());
  if (survivors.size() != request.survivors.size() || dropped.size() != request.dropped.size()) {
    return absl::InvalidArgumentError("secagg: unmask request lists a client twice");
  }
  for (int32_t c : request.survivors) {
    if (dropped.contains(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secagg client ", id_, ": unmask request asks for both kinds of share of client ", c));
    }
  }
  for (const auto* list : {&request.survivors, &request.dropped}) {
    for (int32_t c : *list) {
      if (!held_.contains(c)) {
        return absl::InvalidArgumentError(
            absl::StrCat("secagg client ", id_, ": holds no shares of client ", c));
      }
    }
  }
  if (!survivors.contains(id_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg client ", id_, ": not listed among the survivors"));
  }
  if (static_cast<int32_t>(survivors.size()) < config_.threshold) {
    return absl::AbortedError(absl::StrCat("secagg client ", id_, ": ", survivors.size(),
                                           " survivors, fewer than t = ", config_.threshold));
  }
  SecAggUnmaskResponse out{Header(SecAggStage::kUnmask), {}};
  for (int32_t c : request.survivors) {
    out.shares.push_back({c, SecAggShareKind::kSelfMaskSeed, held_.at(c).self_mask_seed});
  }
  for (int32_t c : request.dropped) {
    out.shares.push_back({c, SecAggShareKind::kMaskingKey, held_.at(c).masking_key});
  }
  state_ = State::kDone;
  return out;
}

}  // namespace sextant
