#ifndef SEXTANT_FEDERATION_SECAGG_CLIENT_H_
#define SEXTANT_FEDERATION_SECAGG_CLIENT_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "federation/internal/secagg_crypto.h"
#include "federation/internal/shamir.h"
#include "federation/secagg_config.h"
#include "federation/secagg_messages.h"

namespace sextant {

// One client's side of a secure-aggregation round (SecAgg+). Call in this order, feeding it the
// server's messages as they arrive:
//   AdvertiseKeys()                  -> send SecAggAdvertiseKeys
//   HandleKeyDirectory(directory)    -> send SecAggShareKeys
//   HandleShareDelivery(delivery)    (stores the shares of its neighbours' secrets)
//   MaskInput(input)                 -> send SecAggMaskedInput
//   HandleUnmaskRequest(request)     -> send SecAggUnmaskResponse
// A client object serves one round; a new round needs a new client and fresh entropy.
//
// Errors. A message for another experiment, round, stage or recipient, a message that arrives
// out of order, and a replayed one are Aborted; the client's state does not change. A malformed
// message (unknown or repeated peers, duplicated public keys, a share that fails authentication,
// an unmask request that asks for both kinds of share of one client) is InvalidArgument, also
// without a state change. Too few peers to continue (fewer than t) is Aborted, and so is a second
// unmask request: the client answers at most one, so it never reveals both secrets of a peer.
// Calling the methods out of order is FailedPrecondition.
//
// Not thread-safe; runs on the worker's loop.
class SecAggClient {
 public:
  // `id` in 0..n-1; `entropy` must be fresh, uniformly random bytes for every round (e.g. from
  // randombytes_buf): every secret of the round (key pairs, self-mask seed, Shamir coefficients,
  // nonces) derives from it. InvalidArgument for a bad config or id.
  static absl::StatusOr<SecAggClient> Create(SecAggConfig config, int32_t id,
                                             const std::array<uint8_t, 32>& entropy);

  // Stage 0: the client's two public keys.
  absl::StatusOr<SecAggAdvertiseKeys> AdvertiseKeys();

  // Stage 1: checks the directory (only the client's holders, itself with its own keys, at least
  // t of them, no client or key twice), Shamir-splits its masking key and self-mask seed t-of-m
  // among the m peers listed and encrypts each peer's shares for it.
  absl::StatusOr<SecAggShareKeys> HandleKeyDirectory(const SecAggKeyDirectory& directory);

  // Stage 2 (opening): decrypts and stores the shares addressed to this client. Its pairwise
  // masks are agreed with exactly the senders in the delivery. Aborted when fewer than t - 1.
  absl::Status HandleShareDelivery(const SecAggShareDelivery& delivery);

  // Stage 2: y = x + PRG(self-mask seed) + sum over delivered peers v of +-PRG(s_uv) (+ when
  // this client's index is lower), mod 2^ring_bits. InvalidArgument for a wrong length or an
  // element >= 2^ring_bits. `buffer` is memory for the masked vector (e.g. the previous round's),
  // so that a long-running client does not allocate O(d) per round; empty by default.
  absl::StatusOr<SecAggMaskedInput> MaskInput(absl::Span<const uint64_t> input,
                                              std::vector<uint64_t> buffer = {});
  // The same, masking `input` in place (no copy of the O(d) vector).
  absl::StatusOr<SecAggMaskedInput> MaskInput(std::vector<uint64_t>&& input);
  // The same, masking a RingVector in place a block at a time (a large input then never takes
  // 64-bit words whole): returns the masked input's header, the values being *input's.
  // InvalidArgument also for a vector in another ring.
  absl::StatusOr<SecAggHeader> MaskInput(RingVector* input);

  // Stage 3: reveals the self-mask seed share of each survivor and the masking-key share of each
  // dropped peer. InvalidArgument when a client is in both lists, is not a peer whose shares this
  // client holds, is listed twice, or when this client is not among the survivors; Aborted when
  // fewer than t survivors are listed or a request was already answered.
  absl::StatusOr<SecAggUnmaskResponse> HandleUnmaskRequest(const SecAggUnmaskRequest& request);

  int32_t id() const { return id_; }
  const SecAggConfig& config() const { return config_; }

 private:
  enum class State { kNew, kAwaitDirectory, kAwaitDelivery, kReadyToMask, kAwaitUnmask, kDone };
  // The masks of this client's input: its self mask and one per delivered peer.
  absl::StatusOr<std::vector<secagg_internal::MaskTerm>> MaskTerms() const;
  struct HeldShares {
    secagg_internal::FieldShare masking_key;
    secagg_internal::FieldShare self_mask_seed;
  };

  SecAggClient(SecAggConfig config, int32_t id, const std::array<uint8_t, 32>& entropy);
  absl::Status CheckHeader(const SecAggHeader& h, SecAggStage stage, State expected) const;
  SecAggHeader Header(SecAggStage stage) const;

  SecAggConfig config_;
  int32_t id_;
  State state_ = State::kNew;
  std::vector<int32_t> holders_;  // sorted
  secagg_internal::Key32 entropy_;
  secagg_internal::Key32 encryption_sk_, encryption_pk_, masking_sk_, masking_pk_, self_seed_;
  absl::flat_hash_map<int32_t, SecAggPeerKeys> directory_;
  absl::flat_hash_map<int32_t, HeldShares> held_;  // owner -> its shares held here (incl. own)
  std::vector<int32_t> mask_peers_;                // sorted delivery senders
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECAGG_CLIENT_H_
