#include "rpc/server_security.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/read_file.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/server_credentials.h"
#include "rpc/certificates.h"

namespace sextant {
std::optional<Role> RoleOf(const grpc::AuthContext& context) {
  for (const auto& v : context.FindPropertyValues(kRoleProperty)) {
    if (std::optional<Role> r = ParseRole(absl::string_view(v.data(), v.size()))) return r;
  }
  return std::nullopt;
}

std::optional<PeerIdentity> IdentityOf(const grpc::AuthContext& context) {
  for (const auto& v : context.FindPropertyValues(kIdentityProperty)) {
    if (auto id = ParseIdentityUri(absl::string_view(v.data(), v.size())); id.ok()) return *id;
  }
  return std::nullopt;
}

std::optional<PeerIdentity> CallerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return auth ? IdentityOf(*auth) : std::nullopt;
}

std::string CallerCertificate(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth) return "";
  std::vector<grpc::string_ref> pems = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  return pems.empty() ? "" : std::string(pems[0].data(), pems[0].size());
}

absl::StatusOr<ServerSecurity> LoadServerSecurity(const std::string& dir, const std::string& name) {
  ServerSecurity s;
  for (auto [file, out] : {std::pair{absl::StrCat(name, ".pem"), &s.cert_pem},
                           std::pair{absl::StrCat(name, ".key"), &s.key_pem}}) {
    auto text = ReadFileIfPresent(absl::StrCat(dir, "/", file));
    if (!text) return absl::NotFoundError(absl::StrCat(dir, "/", file, ": cannot read"));
    *out = *text;
  }
  s.ca_pem = ReadFileIfPresent(dir + "/ca.pem").value_or("");
  if (auto enrolled = ReadFileIfPresent(dir + "/enrolled.txt")) {
    for (absl::string_view line : absl::StrSplit(*enrolled, '\n', absl::SkipWhitespace())) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (!parts.empty()) s.enrolled.insert(absl::AsciiStrToLower(parts[0]));
    }
  }
  for (auto [name, role] :
       {std::pair{"worker", Role::kWorker}, std::pair{"aggregator", Role::kAggregator},
        std::pair{"admin", Role::kAdmin}}) {
    if (auto token = ReadFileIfPresent(absl::StrCat(dir, "/", name, ".token"))) {
      std::string t(absl::StripAsciiWhitespace(*token));
      if (!t.empty()) s.tokens[t] = role;
    }
  }
  return s;
}

bool IsLoopbackAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) return false;
  int port = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) return false;
  const std::string host = listen.substr(0, colon);
  if (host == "localhost" || host == "[::1]") return true;
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) return false;
  return (ntohl(addr.s_addr) >> 24) == 127;
}

absl::Status CheckListenAllowed(const std::string& listen, const ServerSecurity& security) {
  if (IsLoopbackAddress(listen) || (security.tls() && security.auth())) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to listen on ", listen,
                   ": a non-loopback address needs TLS and authentication (--tls-dir DIR from "
                   "`sextant certs init DIR`)"));
}

absl::Status CheckDialAllowed(const std::string& target, bool tls) {
  if (tls || IsLoopbackAddress(target)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to connect to ", target,
                   " without TLS: a non-loopback address is dialled only with --tls-dir DIR "
                   "(from `sextant certs init DIR`)"));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (!security.tls()) {
    if (!security.local) return grpc::InsecureServerCredentials();
    auto creds = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
    if (security.auth())
      creds->SetAuthMetadataProcessor(std::make_shared<RoleAuthProcessor>(security));
    return creds;
  }
  grpc::SslServerCredentialsOptions opts(
      security.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = security.ca_pem;
  opts.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  auto creds = grpc::SslServerCredentials(opts);
  if (security.auth()) {
    creds->SetAuthMetadataProcessor(std::make_shared<RoleAuthProcessor>(security));
  }
  return creds;
}

std::set<Role> AllowedRoles(const std::string& method, bool from_certificate) {
  if (absl::StartsWith(method, "/sextant.v1.WorkerService/")) return {Role::kWorker, Role::kAdmin};
  // Ask/tell clients train as workers do, with the worker's certificate or token.
  if (absl::StartsWith(method, "/sextant.v1.TrialService/")) return {Role::kWorker, Role::kAdmin};
  if (absl::StartsWith(method, "/sextant.v1.FederationService/")) {
    if (from_certificate) return {Role::kClient, Role::kAggregator};
    return {Role::kClient, Role::kAggregator, Role::kWorker};
  }
  return {Role::kAdmin};
}

namespace {

// The role of a bearer token, compared against every known token in constant time (the loop
// does not stop at a match, and each comparison takes the same time for equal lengths).
std::optional<Role> TokenRole(const std::map<std::string, Role>& tokens, const std::string& token) {
  std::optional<Role> found;
  for (const auto& [known, role] : tokens) {
    const bool same = known.size() == token.size() &&
                      CRYPTO_memcmp(known.data(), token.data(), token.size()) == 0;
    if (same) found = role;
  }
  return found;
}

grpc::Status Unauthenticated(const std::string& why) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}

}  // namespace

grpc::Status RoleAuthProcessor::Process(const InputMetadata& auth_metadata,
                                        grpc::AuthContext* context,
                                        OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  std::string method;
  if (auto it = auth_metadata.find(":path"); it != auth_metadata.end()) {
    method.assign(it->second.data(), it->second.size());
  }
  std::optional<PeerIdentity> identity;
  if (!security_.ca_pem.empty()) {
    auto pems = context->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (pems.empty()) return Unauthenticated("no client certificate");
    const std::string pem(pems[0].data(), pems[0].size());
    if (!security_.enrolled.empty()) {
      auto fp = CertificateFingerprint(pem);
      if (!fp.ok() || !security_.enrolled.count(*fp)) {
        return Unauthenticated("client certificate is not enrolled with this orchestrator");
      }
    }
    absl::StatusOr<PeerIdentity> id = IdentityFromCertificate(pem);
    if (id.ok()) {
      identity = *id;
    } else if (!absl::IsNotFound(id.status())) {
      return Unauthenticated(absl::StrCat("client certificate: ", id.status().message()));
    }
  }
  std::optional<Role> role;
  if (identity) {
    role = identity->role;
  } else {
    auto it = auth_metadata.find("authorization");
    if (it == auth_metadata.end()) {
      return Unauthenticated(security_.tokens.empty()
                                 ? "the client certificate names no sextant:// identity"
                                 : "missing bearer token");
    }
    std::string header(it->second.data(), it->second.size());
    constexpr absl::string_view kBearer = "Bearer ";
    if (!absl::StartsWith(header, kBearer)) {
      return Unauthenticated("authorization is not a bearer token");
    }
    role = TokenRole(security_.tokens, header.substr(kBearer.size()));
    if (!role) return Unauthenticated("unknown bearer token");
    consumed_auth_metadata->insert({"authorization", header});
  }
  // Under mTLS the federated services bind every sender to its certificate: a certificate
  // without an identity cannot be let in there by a token.
  if (!identity && !security_.ca_pem.empty() &&
      absl::StartsWith(method, "/sextant.v1.FederationService/")) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "FederationService needs a client certificate with a sextant:// identity "
                        "(`sextant certs issue DIR NAME --role client|aggregator --region R`)");
  }
  if (!AllowedRoles(method, identity.has_value()).count(*role)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("the ", RoleName(*role), " role may not call ", method));
  }
  // Services read the role and identity back from the call's auth context.
  context->AddProperty(kRoleProperty, RoleName(*role));
  if (identity) context->AddProperty(kIdentityProperty, IdentityUri(*identity));
  return grpc::Status::OK;
}

}  // namespace sextant
