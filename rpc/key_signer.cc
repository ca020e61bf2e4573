#include "rpc/key_signer.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "rpc/certificates.h"
#include "rpc/identity.h"

namespace sextant {
namespace {

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};

std::unique_ptr<X509, Free> ParseCert(const std::string& pem) {
  std::unique_ptr<BIO, Free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return std::unique_ptr<X509, Free>(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)
                                         : nullptr);
}

void AppendField(std::string* out, const std::string& field) {
  const uint64_t n = field.size();
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out->append(field);
}

absl::Status Denied(const std::string& id, const std::string& why) {
  return absl::PermissionDeniedError(
      absl::StrCat("secagg: the keys relayed for '", id, "' are not its own: ", why));
}

}  // namespace

struct KeySigner::Keys {
  std::unique_ptr<X509, Free> ca;
  std::unique_ptr<EVP_PKEY, Free> key;
};

KeySigner::KeySigner(std::unique_ptr<Keys> keys) : keys_(std::move(keys)) {}
KeySigner::~KeySigner() = default;

std::string KeyBinding(const std::string& experiment_id, int64_t round, int32_t index,
                       const std::string& participant_id, const std::string& encryption_key,
                       const std::string& masking_key) {
  std::string out = "sextant-secagg-keys/v1";
  for (const std::string& f : {experiment_id, absl::StrCat(round), absl::StrCat(index),
                               participant_id, encryption_key, masking_key}) {
    AppendField(&out, f);
  }
  return out;
}

namespace {

// OK when signature is cert's over binding (ECDSA-SHA256).
absl::Status SignatureMatches(X509* cert, const std::string& signature,
                              const std::string& binding) {
  std::unique_ptr<EVP_MD_CTX, Free> md(EVP_MD_CTX_new());
  if (!md ||
      EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, X509_get0_pubkey(cert)) != 1 ||
      EVP_DigestVerify(md.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(binding.data()),
                       binding.size()) != 1) {
    return absl::PermissionDeniedError("the signature does not match the keys");
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// An ECDSA-SHA256 (DER) signature over data with key.
absl::StatusOr<std::string> SignBytes(EVP_PKEY* key, const std::string& data) {
  std::unique_ptr<EVP_MD_CTX, Free> ctx(EVP_MD_CTX_new());
  size_t n = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &n, bytes, data.size()) != 1) {
    return absl::InternalError("libcrypto: signing failed");
  }
  std::string sig(n, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &n, bytes,
                     data.size()) != 1) {
    return absl::InternalError("libcrypto: signing failed");
  }
  sig.resize(n);
  return sig;
}

// True when cert chains to ca.
bool ChainsTo(X509* ca, X509* cert) {
  std::unique_ptr<X509_STORE, Free> store(X509_STORE_new());
  std::unique_ptr<X509_STORE_CTX, Free> ctx(X509_STORE_CTX_new());
  return store && ctx && X509_STORE_add_cert(store.get(), ca) == 1 &&
         X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) == 1 &&
         X509_verify_cert(ctx.get()) == 1;
}

}  // namespace

absl::Status CheckOwnAttestation(const KeyAttestation& a, const std::string& binding,
                                 const std::string& caller_cert_pem) {
  absl::StatusOr<std::string> theirs = CertificateFingerprint(a.certificate_pem);
  absl::StatusOr<std::string> caller = CertificateFingerprint(caller_cert_pem);
  if (a.signature.empty() || !theirs.ok() || !caller.ok() || *theirs != *caller) {
    return absl::PermissionDeniedError(
        "secagg: keys must come signed with the sender's own TLS certificate");
  }
  std::unique_ptr<X509, Free> cert = ParseCert(a.certificate_pem);
  absl::Status s = SignatureMatches(cert.get(), a.signature, binding);
  if (!s.ok()) return absl::PermissionDeniedError(absl::StrCat("secagg: ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KeySigner>> KeySigner::Load(const std::string& tls_dir,
                                                           const std::string& name) {
  std::string text[3];
  const std::string files[3] = {"ca.pem", name + ".pem", name + ".key"};
  for (int i = 0; i < 3; ++i) {
    std::optional<std::string> t = ReadFileIfPresent(absl::StrCat(tls_dir, "/", files[i]));
    if (!t) return absl::NotFoundError(absl::StrCat(tls_dir, "/", files[i], ": cannot read"));
    text[i] = *std::move(t);
  }
  return Create(text[0], text[1], text[2]);
}

absl::StatusOr<std::unique_ptr<KeySigner>> KeySigner::Create(const std::string& ca_pem,
                                                             const std::string& cert_pem,
                                                             const std::string& key_pem) {
  auto keys = std::make_unique<Keys>();
  keys->ca = ParseCert(ca_pem);
  if (!keys->ca || !ParseCert(cert_pem)) return absl::InvalidArgumentError("not a PEM certificate");
  std::unique_ptr<BIO, Free> bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  keys->key.reset(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!keys->key) return absl::InvalidArgumentError("not a PEM private key");
  std::unique_ptr<X509, Free> own = ParseCert(cert_pem);
  if (X509_check_private_key(own.get(), keys->key.get()) != 1) {
    return absl::InvalidArgumentError("the private key is not the certificate's");
  }
  absl::StatusOr<PeerIdentity> id = IdentityFromCertificate(cert_pem);
  if (!id.ok()) return absl::InvalidArgumentError(id.status().message());
  if (id->role != Role::kClient && id->role != Role::kAggregator) {
    return absl::InvalidArgumentError(
        absl::StrCat(IdentityUri(*id), " is not a client or an aggregator: it has no SecAgg keys"));
  }
  std::unique_ptr<KeySigner> signer(new KeySigner(std::move(keys)));
  signer->cert_pem_ = cert_pem;
  signer->identity_ = *std::move(id);
  return signer;
}

absl::StatusOr<KeyAttestation> KeySigner::Sign(const std::string& binding) const {
  SEXTANT_ASSIGN_OR_RETURN(std::string sig, SignBytes(keys_->key.get(), binding));
  return KeyAttestation{cert_pem_, std::move(sig)};
}

std::string ExperimentBinding(const std::string& experiment_id, const std::string& spec,
                              int64_t expires_at) {
  std::string out = "sextant-experiment/v2";
  AppendField(&out, experiment_id);
  AppendField(&out, spec);
  AppendField(&out, absl::StrCat(expires_at));
  return out;
}

absl::StatusOr<KeyAttestation> SignAsOrchestrator(const std::string& tls_dir,
                                                  const std::string& binding) {
  std::string text[2];
  const std::string files[2] = {"orchestrator.pem", "orchestrator.key"};
  for (int i = 0; i < 2; ++i) {
    std::optional<std::string> t = ReadFileIfPresent(absl::StrCat(tls_dir, "/", files[i]));
    if (!t) return absl::NotFoundError(absl::StrCat(tls_dir, "/", files[i], ": cannot read"));
    text[i] = *std::move(t);
  }
  std::unique_ptr<X509, Free> cert = ParseCert(text[0]);
  std::unique_ptr<BIO, Free> bio(BIO_new_mem_buf(text[1].data(), static_cast<int>(text[1].size())));
  std::unique_ptr<EVP_PKEY, Free> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert || !key || X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(tls_dir, ": orchestrator.pem and orchestrator.key do not parse or match"));
  }
  SEXTANT_ASSIGN_OR_RETURN(std::string sig, SignBytes(key.get(), binding));
  return KeyAttestation{text[0], std::move(sig)};
}

absl::Status VerifyOrchestratorSignature(const std::string& ca_pem, const KeyAttestation& a,
                                         const std::string& binding) {
  auto denied = [](absl::string_view why) {
    return absl::PermissionDeniedError(
        absl::StrCat("the experiment is not the orchestrator's as it signed it: ", why));
  };
  if (a.signature.empty() || a.certificate_pem.empty()) return denied("it carries no signature");
  std::unique_ptr<X509, Free> ca = ParseCert(ca_pem);
  std::unique_ptr<X509, Free> cert = ParseCert(a.certificate_pem);
  if (!ca || !cert) return denied("a certificate does not parse");
  if (!ChainsTo(ca.get(), cert.get())) return denied("its certificate is not from this CA");
  if (X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0) != 1) {
    return denied("its certificate may not serve TLS");
  }
  if (absl::StatusOr<PeerIdentity> id = IdentityFromCertificate(a.certificate_pem); id.ok()) {
    return denied(absl::StrCat("it is signed by ", IdentityUri(*id), ", not the orchestrator"));
  } else if (!absl::IsNotFound(id.status())) {
    return denied(id.status().message());
  }
  if (!SignatureMatches(cert.get(), a.signature, binding).ok()) {
    return denied("the signature does not match it");
  }
  return absl::OkStatus();
}

absl::Status KeySigner::Verify(const KeyAttestation& a, const std::string& binding,
                               const std::string& participant_id) const {
  if (a.signature.empty() || a.certificate_pem.empty()) {
    return Denied(participant_id, "they carry no signature");
  }
  std::unique_ptr<X509, Free> cert = ParseCert(a.certificate_pem);
  if (!cert) return Denied(participant_id, "its certificate does not parse");
  if (!ChainsTo(keys_->ca.get(), cert.get())) {
    return Denied(participant_id, "its certificate is not from this run's CA");
  }
  absl::StatusOr<PeerIdentity> id = IdentityFromCertificate(a.certificate_pem);
  if (!id.ok()) return Denied(participant_id, std::string(id.status().message()));
  // Who may be a peer follows from this signer's own identity, not from the relayed message.
  const bool peer = identity_.role == Role::kClient
                        ? id->role == Role::kClient && id->region == identity_.region &&
                              id->ClientId() == participant_id
                        : id->role == Role::kAggregator && id->region == participant_id;
  if (!peer) {
    return Denied(participant_id, absl::StrCat("they are signed by ", IdentityUri(*id)));
  }
  if (!SignatureMatches(cert.get(), a.signature, binding).ok()) {
    return Denied(participant_id, "the signature does not match the keys");
  }
  return absl::OkStatus();
}

}  // namespace sextant
