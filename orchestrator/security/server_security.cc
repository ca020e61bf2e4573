#include "orchestrator/security/server_security.h"

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "absl/strings/str_split.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/server_credentials.h"
#include "orchestrator/security/certificates.h"

namespace sextant {
const char* RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kAggregator:
      return "aggregator";
    case Role::kAdmin:
      return "admin";
  }
  return "";
}

std::optional<Role> RoleOf(const grpc::AuthContext& context) {
  for (const auto& v : context.FindPropertyValues(kRoleProperty)) {
    std::string name(v.data(), v.size());
    for (Role r : {Role::kWorker, Role::kAggregator, Role::kAdmin}) {
      if (name == RoleName(r)) return r;
    }
  }
  return std::nullopt;
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
  for (auto [name, role] : {std::pair{"worker", Role::kWorker},
                            std::pair{"aggregator", Role::kAggregator},
                            std::pair{"admin", Role::kAdmin}}) {
    if (auto token = ReadFileIfPresent(absl::StrCat(dir, "/", name, ".token"))) {
      std::string t(absl::StripAsciiWhitespace(*token));
      if (!t.empty()) s.tokens[t] = role;
    }
  }
  return s;
}

bool IsLoopbackAddress(const std::string& listen) {
  return absl::StartsWith(listen, "127.") || absl::StartsWith(listen, "localhost:") ||
         absl::StartsWith(listen, "[::1]:");
}

absl::Status CheckListenAllowed(const std::string& listen, const ServerSecurity& security) {
  if (IsLoopbackAddress(listen) || (security.tls() && security.auth())) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to listen on ", listen,
                   ": a non-loopback address needs TLS and authentication (--tls-dir DIR from "
                   "`sextant certs init DIR`)"));
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
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

std::set<Role> AllowedRoles(const std::string& method) {
  if (absl::StartsWith(method, "/sextant.v1.WorkerService/")) return {Role::kWorker, Role::kAdmin};
  if (absl::StartsWith(method, "/sextant.v1.FederationService/")) {
    return {Role::kAggregator, Role::kWorker, Role::kAdmin};
  }
  return {Role::kAdmin};
}

grpc::Status RoleAuthProcessor::Process(const InputMetadata& auth_metadata,
                                        grpc::AuthContext* context,
                                        OutputMetadata* consumed_auth_metadata,
                                        OutputMetadata*) {
  if (!security_.enrolled.empty()) {
    auto pems = context->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (pems.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no client certificate");
    }
    auto fp = CertificateFingerprint(std::string(pems[0].data(), pems[0].size()));
    if (!fp.ok() || !security_.enrolled.count(*fp)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "client certificate is not enrolled with this orchestrator");
    }
  }
  if (security_.tokens.empty()) return grpc::Status::OK;
  std::string method;
  if (auto it = auth_metadata.find(":path"); it != auth_metadata.end()) {
    method.assign(it->second.data(), it->second.size());
  }
  auto it = auth_metadata.find("authorization");
  if (it == auth_metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing bearer token");
  }
  std::string header(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(header, kBearer)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "authorization is not a bearer token");
  }
  auto role = security_.tokens.find(header.substr(kBearer.size()));
  if (role == security_.tokens.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown bearer token");
  }
  if (!AllowedRoles(method).count(role->second)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("this token's role may not call ", method));
  }
  // Services read the role back from the call's auth context (see RoleOf).
  context->AddProperty(kRoleProperty, RoleName(role->second));
  consumed_auth_metadata->insert({"authorization", header});
  return grpc::Status::OK;
}

}  // namespace sextant
