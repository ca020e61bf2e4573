// Signed SecAgg+ key advertisements, against an active aggregator. Under secure aggregation the
// aggregator relays each client's public keys to its neighbours; one that swapped them could
// agree the pairwise masks with a client itself and unmask its update. So each participant
// signs its keys, bound to the experiment, round, its index and id, with its TLS private key,
// and checks every neighbour's signature against that neighbour's certificate (chained to the
// CA, naming the neighbour's identity) before it uses the keys.
#ifndef SEXTANT_RPC_KEY_SIGNER_H_
#define SEXTANT_RPC_KEY_SIGNER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rpc/identity.h"

namespace sextant {

// A participant's signature over its advertised keys, and the certificate to check it by.
struct KeyAttestation {
  std::string certificate_pem;
  std::string signature;  // ECDSA-SHA256 (DER) over KeyBinding(...)
};

// The bytes signed: a fixed label, then the experiment, round, index, participant id and both
// public keys, each length-prefixed.
std::string KeyBinding(const std::string& experiment_id, int64_t round, int32_t index,
                       const std::string& participant_id, const std::string& encryption_key,
                       const std::string& masking_key);

// Signs and checks key bindings with one participant's TLS identity. Immutable after Load;
// thread-safe.
class KeySigner {
 public:
  // From a TLS folder: ca.pem, NAME.pem and NAME.key (as LoadChannelCredentials). NotFound
  // naming the file; InvalidArgument when the key or certificates do not parse, the key is not
  // the certificate's, or the certificate names no client or aggregator identity.
  static absl::StatusOr<std::unique_ptr<KeySigner>> Load(const std::string& tls_dir,
                                                         const std::string& name);
  // The same from PEM text.
  static absl::StatusOr<std::unique_ptr<KeySigner>> Create(const std::string& ca_pem,
                                                           const std::string& cert_pem,
                                                           const std::string& key_pem);
  ~KeySigner();

  // This participant's attestation of `binding`. Internal on a libcrypto failure.
  absl::StatusOr<KeyAttestation> Sign(const std::string& binding) const;

  // OK when attestation's certificate chains to this signer's CA, names the identity that may
  // speak as participant_id among this signer's own peers, and its signature over binding
  // verifies. The peers are derived from this signer's identity, never from the relayed
  // message: a client's are the clients of its own region (participant_id REGION/NAME), an
  // aggregator's the other regions' aggregators (participant_id the region). PermissionDenied
  // naming participant_id and what failed otherwise.
  absl::Status Verify(const KeyAttestation& attestation, const std::string& binding,
                      const std::string& participant_id) const;

 private:
  struct Keys;
  explicit KeySigner(std::unique_ptr<Keys> keys);
  std::unique_ptr<Keys> keys_;
  std::string cert_pem_;
  PeerIdentity identity_;
};

// The aggregator's check of an attestation as it arrives from its sender: the attestation's
// certificate is the caller's own verified certificate (same fingerprint) and its signature over
// binding verifies. PermissionDenied saying which failed. So that one participant's bad
// signature is refused at the aggregator, not by every neighbour (which would sink the round).
absl::Status CheckOwnAttestation(const KeyAttestation& attestation, const std::string& binding,
                                 const std::string& caller_cert_pem);

// The experiment the orchestrator hands participants started by hand (JoinPlan) is signed with
// the orchestrator's own TLS key, so that an aggregator, which relays it to its clients, cannot
// change what they run or send, nor pass off another run's (the id) or an old one (the
// expiry). The bytes signed: a fixed label, the experiment id, the serialized experiment and
// the expiry in unix seconds, each length-prefixed.
std::string ExperimentBinding(const std::string& experiment_id, const std::string& spec,
                              int64_t expires_at);

// Signs binding with tls_dir's orchestrator.pem and orchestrator.key. NotFound naming a file
// that cannot be read; InvalidArgument when they do not parse or do not match; Internal on a
// libcrypto failure.
absl::StatusOr<KeyAttestation> SignAsOrchestrator(const std::string& tls_dir,
                                                  const std::string& binding);

// OK when the attestation's certificate chains to ca_pem, may answer as a TLS server and names
// no participant identity (as only the orchestrator's does: an aggregator's names its own), and
// its signature over binding verifies. PermissionDenied saying what failed.
absl::Status VerifyOrchestratorSignature(const std::string& ca_pem, const KeyAttestation& a,
                                         const std::string& binding);

}  // namespace sextant

#endif  // SEXTANT_RPC_KEY_SIGNER_H_
