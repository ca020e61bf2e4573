#include "rpc/identity.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sextant {
namespace {

constexpr absl::string_view kScheme = "sextant://";
constexpr absl::string_view kNoRegion = "-";

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kClient:
      return "client";
    case Role::kAggregator:
      return "aggregator";
    case Role::kAdmin:
      return "admin";
  }
  return "";
}

std::optional<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kWorker, Role::kClient, Role::kAggregator, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

std::string IdentityUri(const PeerIdentity& identity) {
  return absl::StrCat(kScheme, RoleName(identity.role), "/",
                      identity.region.empty() ? kNoRegion : identity.region, "/", identity.name);
}

absl::StatusOr<PeerIdentity> ParseIdentityUri(absl::string_view uri) {
  if (!absl::StartsWith(uri, kScheme)) {
    return absl::InvalidArgumentError("not a sextant:// identity");
  }
  std::vector<absl::string_view> parts = absl::StrSplit(uri.substr(kScheme.size()), '/');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError("a sextant:// identity is sextant://ROLE/REGION/NAME");
  }
  std::optional<Role> role = ParseRole(parts[0]);
  if (!role) {
    return absl::InvalidArgumentError(absl::StrCat("unknown role ", QuotedId(parts[0])));
  }
  PeerIdentity id;
  id.role = *role;
  if (parts[1] != kNoRegion) {
    if (absl::Status s = CheckId("region", parts[1]); !s.ok()) return s;
    id.region = std::string(parts[1]);
  }
  if (absl::Status s = CheckId("name", parts[2]); !s.ok()) return s;
  id.name = std::string(parts[2]);
  if (id.role == Role::kClient && id.region.empty()) {
    return absl::InvalidArgumentError("a client identity needs a region");
  }
  return id;
}

absl::StatusOr<PeerIdentity> IdentityFromCertificate(const std::string& cert_pem) {
  struct Free {
    void operator()(BIO* p) const { BIO_free(p); }
    void operator()(X509* p) const { X509_free(p); }
    void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
  };
  std::unique_ptr<BIO, Free> bio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  std::unique_ptr<X509, Free> cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)
                                       : nullptr);
  if (!cert) return absl::InvalidArgumentError("not a PEM certificate");
  std::unique_ptr<GENERAL_NAMES, Free> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  std::optional<std::string> found;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = name->d.uniformResourceIdentifier;
    std::string value(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                      static_cast<size_t>(ASN1_STRING_length(uri)));
    if (!absl::StartsWith(value, kScheme)) continue;
    if (found) return absl::InvalidArgumentError("the certificate names two sextant identities");
    found = std::move(value);
  }
  if (!found) return absl::NotFoundError("the certificate names no sextant:// identity");
  return ParseIdentityUri(*found);
}

}  // namespace sextant
