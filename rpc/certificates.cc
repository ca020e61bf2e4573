#include "rpc/certificates.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

absl::Status Crypto(const char* what) {
  return absl::InternalError(absl::StrCat("libcrypto: ", what, " failed"));
}

absl::StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Crypto("EC key generation");
  return key;
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<KeyPair> ToPem(X509* cert, EVP_PKEY* key) {
  Bio c(BIO_new(BIO_s_mem())), k(BIO_new(BIO_s_mem()));
  if (!c || !k || PEM_write_bio_X509(c.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(k.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Crypto("PEM encoding");
  }
  return KeyPair{BioText(c.get()), BioText(k.get())};
}

absl::StatusOr<Cert> ParseCert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  return cert;
}

absl::StatusOr<Key> ParseKey(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return absl::InvalidArgumentError("not a PEM private key");
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Crypto("certificate extension");
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? absl::OkStatus() : Crypto("certificate extension");
}

// A certificate for key with the given subject, valid from now for `days`, not yet signed.
absl::StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& common_name, int days) {
  Cert cert(X509_new());
  if (!cert) return Crypto("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return Crypto("RAND_bytes");
  serial[0] &= 0x7f;  // a positive serial number
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("Sextant"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  return cert;
}

absl::Status WriteSecret(const std::string& path, const std::string& text, bool secret) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, secret ? 0600 : 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = fsync(fd) == 0 && ok;
  close(fd);
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat(path, ": write failed"));
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

absl::Status WritePair(const std::string& dir, const std::string& name, const KeyPair& pair) {
  SEXTANT_RETURN_IF_ERROR(WriteSecret(absl::StrCat(dir, "/", name, ".pem"), pair.cert_pem, false));
  return WriteSecret(absl::StrCat(dir, "/", name, ".key"), pair.key_pem, true);
}

absl::Status Enroll(const std::string& dir, const KeyPair& pair, const std::string& name) {
  SEXTANT_ASSIGN_OR_RETURN(std::string fp, CertificateFingerprint(pair.cert_pem));
  std::ofstream f(dir + "/enrolled.txt", std::ios::app);
  f << fp << " " << name << "\n";
  f.flush();
  return f.good() ? absl::OkStatus() : absl::InternalError(dir + "/enrolled.txt: write failed");
}

}  // namespace

absl::StatusOr<KeyPair> CreateCertificateAuthority(const std::string& common_name, int days) {
  SEXTANT_ASSIGN_OR_RETURN(Key key, NewKey());
  SEXTANT_ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), common_name, days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  SEXTANT_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  SEXTANT_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  SEXTANT_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return Crypto("X509_sign");
  return ToPem(cert.get(), key.get());
}

absl::Status CheckSubjectAltName(const std::string& san) {
  unsigned char addr[sizeof(in6_addr)];
  if (inet_pton(AF_INET, san.c_str(), addr) == 1 || inet_pton(AF_INET6, san.c_str(), addr) == 1) {
    return absl::OkStatus();
  }
  absl::string_view host = san;
  if (absl::StartsWith(host, "*.")) host.remove_prefix(2);
  bool ok = !host.empty() && host.size() <= 253;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    ok = ok && !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-';
    for (char c : label)
      ok = ok && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--san '", absl::CHexEscape(san.substr(0, 64)),
                                                 "' is neither an IP address nor a DNS host name"));
}

absl::StatusOr<KeyPair> IssueCertificate(const KeyPair& ca, const std::string& common_name,
                                         const std::vector<std::string>& extra_sans, int days,
                                         const PeerIdentity* identity) {
  for (const std::string& san : extra_sans) SEXTANT_RETURN_IF_ERROR(CheckSubjectAltName(san));
  SEXTANT_ASSIGN_OR_RETURN(Cert ca_cert, ParseCert(ca.cert_pem));
  SEXTANT_ASSIGN_OR_RETURN(Key ca_key, ParseKey(ca.key_pem));
  SEXTANT_ASSIGN_OR_RETURN(Key key, NewKey());
  SEXTANT_ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), common_name, days));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  // Only servers (the orchestrator, aggregators, and certificates without an identity, as
  // issued before identities) may authenticate as servers; a worker, client or admin
  // certificate is for dialling out only. Only the orchestrator's answers for loopback: an
  // aggregator's names only its own hosts, or its key could pose as the orchestrator to a
  // worker on the same host.
  const bool server = identity == nullptr || identity->role == Role::kAggregator;
  std::string san = identity == nullptr ? "DNS:localhost,IP:127.0.0.1" : "";
  for (const std::string& name : extra_sans) {
    unsigned char addr[sizeof(in6_addr)];
    const bool ip =
        inet_pton(AF_INET, name.c_str(), addr) == 1 || inet_pton(AF_INET6, name.c_str(), addr) == 1;
    absl::StrAppend(&san, san.empty() ? "" : ",", ip ? "IP:" : "DNS:", name);
  }
  if (identity != nullptr)
    absl::StrAppend(&san, san.empty() ? "" : ",", "URI:", IdentityUri(*identity));
  X509* issuer = ca_cert.get();
  SEXTANT_RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_basic_constraints, "CA:FALSE"));
  SEXTANT_RETURN_IF_ERROR(
      AddExtension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature,keyAgreement"));
  SEXTANT_RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_ext_key_usage,
                                       server ? "serverAuth,clientAuth" : "clientAuth"));
  if (!san.empty()) {
    SEXTANT_RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_subject_alt_name, san));
  }
  SEXTANT_RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_authority_key_identifier, "keyid"));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return Crypto("X509_sign");
  return ToPem(cert.get(), key.get());
}

absl::StatusOr<std::string> CertificateFingerprint(const std::string& cert_pem) {
  SEXTANT_ASSIGN_OR_RETURN(Cert cert, ParseCert(cert_pem));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert.get(), EVP_sha256(), md, &n) != 1) return Crypto("X509_digest");
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) absl::StrAppendFormat(&hex, "%02x", md[i]);
  return hex;
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Crypto("RAND_bytes");
  std::string hex;
  for (unsigned char b : bytes) absl::StrAppendFormat(&hex, "%02x", b);
  return hex;
}

absl::Status InitCertificateDirectory(const std::string& dir,
                                      const std::vector<std::string>& orchestrator_sans) {
  for (const std::string& san : orchestrator_sans)
    SEXTANT_RETURN_IF_ERROR(CheckSubjectAltName(san));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  if (std::filesystem::exists(dir + "/ca.key")) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " already holds a CA (ca.key)"));
  }
  SEXTANT_ASSIGN_OR_RETURN(KeyPair ca, CreateCertificateAuthority("Sextant private CA", 3650));
  SEXTANT_RETURN_IF_ERROR(WritePair(dir, "ca", ca));
  SEXTANT_ASSIGN_OR_RETURN(KeyPair orchestrator,
                           IssueCertificate(ca, "orchestrator", orchestrator_sans, 825));
  SEXTANT_RETURN_IF_ERROR(WritePair(dir, "orchestrator", orchestrator));
  for (Role role : {Role::kAggregator, Role::kWorker, Role::kAdmin}) {
    const PeerIdentity identity{role, "", RoleName(role)};
    SEXTANT_ASSIGN_OR_RETURN(KeyPair pair,
                             IssueCertificate(ca, RoleName(role), {}, 825, &identity));
    SEXTANT_RETURN_IF_ERROR(WritePair(dir, RoleName(role), pair));
    SEXTANT_RETURN_IF_ERROR(Enroll(dir, pair, RoleName(role)));
  }
  for (const char* role : {"worker", "aggregator", "admin"}) {
    SEXTANT_ASSIGN_OR_RETURN(std::string token, NewToken());
    SEXTANT_RETURN_IF_ERROR(WriteSecret(absl::StrCat(dir, "/", role, ".token"), token, true));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> IssueParticipantDirectory(const std::string& ca_dir,
                                                      const std::string& out_dir,
                                                      const PeerIdentity& identity) {
  auto cert = ReadText(ca_dir + "/ca.pem");
  auto key = ReadText(ca_dir + "/ca.key");
  if (!cert.ok() || !key.ok()) {
    return absl::NotFoundError(absl::StrCat(
        ca_dir,
        " holds no ca.key: the participants that `sextant run` starts get their own "
        "certificates from the CA, so --tls-dir must be the `sextant certs init` folder"));
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(out_dir, ": ", ec.message()));
  SEXTANT_ASSIGN_OR_RETURN(
      KeyPair pair, IssueCertificate(KeyPair{*cert, *key}, identity.name, {}, 825, &identity));
  SEXTANT_RETURN_IF_ERROR(WriteSecret(out_dir + "/ca.pem", *cert, false));
  SEXTANT_RETURN_IF_ERROR(WritePair(out_dir, identity.name, pair));
  return CertificateFingerprint(pair.cert_pem);
}

absl::Status EnrollParticipants(const std::string& ca_dir, const std::string& participant_dir,
                                const std::vector<std::string>& fingerprints) {
  absl::StatusOr<std::string> list = ReadText(ca_dir + "/enrolled.txt");
  if (!list.ok()) return absl::OkStatus();
  std::string text = *list;
  if (!text.empty() && text.back() != '\n') text += '\n';
  for (const std::string& fp : fingerprints) absl::StrAppend(&text, fp, " issued-by-the-run\n");
  return WriteSecret(participant_dir + "/enrolled.txt", text, false);
}

absl::Status IssueIntoDirectory(const std::string& dir, const std::string& name,
                                const IssueOptions& options) {
  SEXTANT_RETURN_IF_ERROR(CheckId("NAME", name));
  if (name == "ca") {
    return absl::InvalidArgumentError("NAME 'ca' is the certificate authority's own; pick another");
  }
  if (!options.region.empty()) SEXTANT_RETURN_IF_ERROR(CheckId("--region", options.region));
  if (options.role == Role::kClient) {  // its client id, REGION/NAME, must be an id too
    SEXTANT_RETURN_IF_ERROR(CheckClientId("REGION/NAME", absl::StrCat(options.region, "/", name)));
  }
  if (options.region.empty() &&
      (options.role == Role::kClient || options.role == Role::kAggregator)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--region is required for a ", RoleName(options.role), " certificate"));
  }
  for (const std::string& san : options.sans) SEXTANT_RETURN_IF_ERROR(CheckSubjectAltName(san));
  auto cert = ReadText(dir + "/ca.pem");
  auto key = ReadText(dir + "/ca.key");
  if (!cert.ok() || !key.ok()) {
    return absl::NotFoundError(
        absl::StrCat(dir, " holds no CA; run `sextant certs init ", dir, "`"));
  }
  if (std::filesystem::exists(absl::StrCat(dir, "/", name, ".key"))) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, "/", name, ".key exists; remove it first to issue ", name, " again"));
  }
  KeyPair ca{*cert, *key};
  const PeerIdentity identity{options.role, options.region, name};
  SEXTANT_ASSIGN_OR_RETURN(KeyPair pair, IssueCertificate(ca, name, options.sans, 825, &identity));
  SEXTANT_RETURN_IF_ERROR(WritePair(dir, name, pair));
  return options.enroll ? Enroll(dir, pair, name) : absl::OkStatus();
}

}  // namespace sextant
