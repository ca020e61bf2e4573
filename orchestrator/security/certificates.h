#ifndef SEXTANT_ORCHESTRATOR_SECURITY_CERTIFICATES_H_
#define SEXTANT_ORCHESTRATOR_SECURITY_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant {

// A PEM certificate and its PEM private key (EC P-256).
struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

// Creates a self-signed certificate authority named common_name, valid for `days`.
// Returns Internal when libcrypto fails.
absl::StatusOr<KeyPair> CreateCertificateAuthority(const std::string& common_name, int days);

// Issues a certificate for common_name signed by ca, usable for both TLS server and client
// authentication, with subjectAltName DNS:localhost, IP:127.0.0.1 and every name in
// extra_dns. Returns InvalidArgument when ca does not parse, Internal on libcrypto errors.
absl::StatusOr<KeyPair> IssueCertificate(const KeyPair& ca, const std::string& common_name,
                                         const std::vector<std::string>& extra_dns, int days);

// The SHA-256 fingerprint of a PEM certificate as lowercase hex (64 characters), the form
// that enrollment lists use. InvalidArgument when it does not parse.
absl::StatusOr<std::string> CertificateFingerprint(const std::string& cert_pem);

// 32 random bytes from the OS as lowercase hex: a bearer token.
absl::StatusOr<std::string> NewToken();

// `sextant certs init DIR`: writes ca.pem/ca.key, orchestrator.pem/.key, aggregator.pem/.key,
// worker.pem/.key, enrolled.txt (the fingerprints of the aggregator and worker certificates)
// and worker.token, aggregator.token, admin.token. Keys and tokens are mode 0600. Refuses
// (AlreadyExists) when DIR already holds a ca.key, so that a CA is never overwritten.
absl::Status InitCertificateDirectory(const std::string& dir);

// `sextant certs issue DIR NAME [--enroll]`: a new certificate NAME.pem/.key signed by DIR's
// CA; with enroll, its fingerprint is appended to enrolled.txt. NotFound without a CA.
absl::Status IssueIntoDirectory(const std::string& dir, const std::string& name, bool enroll);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SECURITY_CERTIFICATES_H_
