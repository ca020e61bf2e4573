#ifndef SEXTANT_FEDERATION_SECAGG_SERVER_H_
#define SEXTANT_FEDERATION_SECAGG_SERVER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "federation/internal/shamir.h"
#include "federation/secagg_config.h"
#include "federation/secagg_messages.h"

namespace sextant {

// The server's side of a secure-aggregation round (SecAgg+): it routes keys and encrypted
// shares, adds up masked inputs as they arrive (O(d) memory whatever n: the sum in a RingVector,
// 4 bytes an element in a ring of up to 32 bits, and a chunk of the input being added), and
// removes the masks
// once t holders of every needed secret have answered. It learns the sum of the survivors'
// inputs and nothing else about them.
//
// Each stage is a series of Handle* calls (one per arriving client message, in any order)
// closed by one Finish* call, which the transport makes when every expected client has answered
// or the stage's deadline passed; clients that have not answered by then are dropped:
//   HandleAdvertiseKeys* -> FinishAdvertiseKeys  -> a SecAggKeyDirectory per client
//   HandleShareKeys*     -> FinishShareKeys      -> a SecAggShareDelivery per client
//   HandleMaskedInput*   -> FinishMaskedInput    -> a SecAggUnmaskRequest per survivor
//   HandleUnmaskResponse* -> FinishUnmask        -> the SecAggResult
//
// Errors. Handle*: Aborted for another experiment or round, a message of another stage than the
// open one (stage order is strict; late messages of a closed stage included), a repeated message
// from a client, a sender that dropped at an earlier stage, or any message after the round
// aborted; InvalidArgument for a malformed message (bad sender or recipient, a public key another
// client already uses, a wrong-length vector or an element outside the ring, shares for the wrong
// peers or of the wrong kind). A rejected message changes nothing. Finish*: FailedPrecondition
// when called out of order; Aborted when fewer than t clients remain, or when some secret that
// is needed has fewer than t holders left, or when a reconstructed secret does not match the
// client's public key or seed commitment (a corrupted share: no wrong sum is ever returned). An
// aborted round stays aborted, discards the masked sum and reveals nothing; the next round is a new
// server object.
//
// Not thread-safe; runs on the aggregator's loop.
class SecAggServer {
 public:
  // InvalidArgument for a bad config. `accumulator` is memory to hold the running sum (the
  // previous round's SecAggResult::sum, so that a long-running aggregator allocates its O(d)
  // state once), used when its ring and length are the config's; empty by default.
  static absl::StatusOr<SecAggServer> Create(SecAggConfig config, RingVector accumulator = {});

  absl::Status HandleAdvertiseKeys(const SecAggAdvertiseKeys& message);
  absl::StatusOr<std::vector<SecAggKeyDirectory>> FinishAdvertiseKeys();

  absl::Status HandleShareKeys(const SecAggShareKeys& message);
  absl::StatusOr<std::vector<SecAggShareDelivery>> FinishShareKeys();

  absl::Status HandleMaskedInput(const SecAggMaskedInput& message);
  // The same for a masked input read a chunk at a time (staged in a file, say), so that it is
  // never whole in memory: read(offset, out) fills out with the input's elements [offset,
  // offset + out.size()) (vector_length in all) or fails. It may be asked for a range again, to
  // take back a partly added input, and must then give the same elements. Errors as above, and
  // read's own error (nothing added); a range that cannot be read again aborts the round.
  using MaskedInputReader = std::function<absl::Status(size_t offset, absl::Span<uint64_t> out)>;
  absl::Status HandleMaskedInput(const SecAggHeader& header, const MaskedInputReader& read);
  absl::StatusOr<std::vector<SecAggUnmaskRequest>> FinishMaskedInput();

  absl::Status HandleUnmaskResponse(const SecAggUnmaskResponse& message);
  absl::StatusOr<SecAggResult> FinishUnmask();

  // The open stage (kDone after FinishUnmask, kAborted after an abort).
  SecAggStage stage() const { return stage_; }
  const SecAggConfig& config() const { return config_; }

 private:
  struct Client {
    bool advertised = false, shared = false, masked = false, responded = false;
    SecAggPublicKey encryption_key{}, masking_key{};
    std::array<uint8_t, 32> seed_commitment{};
    std::vector<int32_t> directory;  // holders that advertised (incl. itself), sorted
    std::vector<SecAggEncryptedShare> inbox;
    std::vector<int32_t> survivors, dropped;  // its unmask request
    std::vector<std::pair<uint32_t, secagg_internal::FieldShare>> seed_shares, key_shares;
  };

  SecAggServer(SecAggConfig config, RingVector accumulator);
  absl::Status CheckHeader(const SecAggHeader& h, SecAggStage stage) const;
  absl::Status CheckMaskedInputSender(const SecAggHeader& h) const;
  absl::Status Abort(absl::Status why);
  absl::Status CheckRecoverable() const;
  absl::Status RemoveMasks();
  int32_t Count(bool Client::*flag) const;

  SecAggConfig config_;
  SecAggGraph graph_;
  SecAggStage stage_ = SecAggStage::kAdvertiseKeys;
  std::vector<Client> clients_;
  absl::flat_hash_set<std::string> public_keys_;
  RingVector sum_;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECAGG_SERVER_H_
