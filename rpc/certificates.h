#ifndef SEXTANT_RPC_CERTIFICATES_H_
#define SEXTANT_RPC_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/identity.h"

namespace sextant {

// A PEM certificate and its PEM private key (EC P-256).
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

// Creates a self-signed certificate authority named common_name, valid for `days`.
// Returns Internal when libcrypto fails.
absl::StatusOr<KeyPair> CreateCertificateAuthority(const std::string& common_name, int days);

// Issues a certificate for common_name signed by ca with subjectAltName every entry of
// extra_sans (an IPv4/IPv6 address becomes IP:, anything else DNS:) and, when identity is given,
// the URI sextant://ROLE/REGION/NAME that services take the caller's identity from. A server's
// certificate (no identity, or an aggregator's) may authenticate TLS servers and clients; a
// worker's, client's or admin's only clients. Only a certificate without an identity (the
// orchestrator's) also names DNS:localhost and IP:127.0.0.1: an aggregator's names exactly
// extra_sans, so that it cannot answer for the orchestrator on loopback. Returns
// InvalidArgument when ca does not parse or a SAN is not a host name or address, Internal on
// libcrypto errors.
absl::StatusOr<KeyPair> IssueCertificate(const KeyPair& ca, const std::string& common_name,
                                         const std::vector<std::string>& extra_sans, int days,
                                         const PeerIdentity* identity = nullptr);

// InvalidArgument naming the entry unless san is an IPv4 or IPv6 address or a DNS host name
// (labels of [A-Za-z0-9-], dots between, at most 253 bytes; a leading "*." is allowed).
absl::Status CheckSubjectAltName(const std::string& san);

// The SHA-256 fingerprint of a PEM certificate as lowercase hex (64 characters), the form
// that enrollment lists use. InvalidArgument when it does not parse.
absl::StatusOr<std::string> CertificateFingerprint(const std::string& cert_pem);

// 32 random bytes from the OS as lowercase hex: a bearer token.
absl::StatusOr<std::string> NewToken();

// `sextant certs init DIR [--san HOST,...]`: writes ca.pem/ca.key, orchestrator.pem/.key (its
// SANs: localhost, 127.0.0.1 and orchestrator_sans, the names workers dial it by),
// aggregator.pem/.key, worker.pem/.key and admin.pem/.key (identities
// sextant://ROLE/-/ROLE and no host names; per-host certificates come from IssueIntoDirectory),
// enrolled.txt (the fingerprints of those three)
// and worker.token, aggregator.token, admin.token. Keys and tokens are mode 0600. Refuses
// (AlreadyExists) when DIR already holds a ca.key, so that a CA is never overwritten;
// InvalidArgument for a bad SAN.
absl::Status InitCertificateDirectory(const std::string& dir,
                                      const std::vector<std::string>& orchestrator_sans = {});

// What `sextant certs issue` issues.
struct IssueOptions {
  Role role = Role::kWorker;      // --role; default worker
  std::string region;             // --region; required for client and aggregator, else optional
  std::vector<std::string> sans;  // --san: the host's names and addresses; default none
  bool enroll = false;            // --enroll: append the fingerprint to enrolled.txt
};

// `sextant certs issue DIR NAME --role R [--region REG] [--san ...] [--enroll]`: a per-host
// certificate NAME.pem/.key signed by DIR's CA, naming sextant://ROLE/REGION/NAME. NAME and
// REGION must be ids ([A-Za-z0-9._-], at most 128 bytes) and NAME must not be "ca"
// (InvalidArgument naming the field); an existing NAME.key is never overwritten
// (AlreadyExists). NotFound without a CA.
absl::Status IssueIntoDirectory(const std::string& dir, const std::string& name,
                                const IssueOptions& options);

// Issues the certificate of one participant that `sextant run` starts itself (a regional
// aggregator or a client on this host), signed by the CA in ca_dir (ca.pem and ca.key), into
// out_dir as ca.pem, NAME.pem and NAME.key (NAME = identity.name), so that the participant
// dials and serves as exactly that identity. Returns the certificate's fingerprint, for the
// caller's enrolment list. NotFound when ca_dir holds no CA key (naming it).
absl::StatusOr<std::string> IssueParticipantDirectory(const std::string& ca_dir,
                                                      const std::string& out_dir,
                                                      const PeerIdentity& identity);

// The enrolment list of a participant's server (a regional aggregator that `sextant run`
// starts): ca_dir's enrolled.txt, the orchestrator's own list, plus `fingerprints` (the
// certificates the run issued its clients), written to participant_dir/enrolled.txt, so that
// each tier admits exactly the enrolled certificates. Nothing is written when ca_dir has no
// enrolled.txt (every tier then admits any certificate of the CA). Internal when writing fails.
absl::Status EnrollParticipants(const std::string& ca_dir, const std::string& participant_dir,
                                const std::vector<std::string>& fingerprints);

}  // namespace sextant

#endif  // SEXTANT_RPC_CERTIFICATES_H_
