#ifndef SEXTANT_ORCHESTRATOR_SECURITY_SERVER_SECURITY_H_
#define SEXTANT_ORCHESTRATOR_SECURITY_SERVER_SECURITY_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"

namespace sextant {

// Who a bearer token speaks for.
enum class Role { kWorker, kAggregator, kAdmin };

// "worker", "aggregator" or "admin".
const char* RoleName(Role role);

// The auth-context property where RoleAuthProcessor leaves the caller's role.
inline constexpr char kRoleProperty[] = "sextant.role";

// The role RoleAuthProcessor found for a call; nullopt when token auth is off.
std::optional<Role> RoleOf(const grpc::AuthContext& context);

// How the orchestrator's gRPC server protects itself. Default: nothing (loopback only).
struct ServerSecurity {
  std::string cert_pem, key_pem;  // the server's certificate; empty: no TLS
  std::string ca_pem;             // client certificates must chain to it (mTLS); empty: no mTLS
  // SHA-256 fingerprints of the client certificates allowed in (enrolled). Empty: any
  // certificate from the CA.
  std::set<std::string> enrolled;
  std::map<std::string, Role> tokens;  // bearer token -> role; empty: no token auth

  bool tls() const { return !cert_pem.empty(); }
  bool auth() const { return !tokens.empty() || (!ca_pem.empty() && !enrolled.empty()); }
};

// Reads a directory made by `sextant certs init`: NAME.pem/.key (the server's own certificate:
// "orchestrator", or "aggregator" for a regional aggregator), ca.pem, enrolled.txt and the
// worker/aggregator/admin .token files (each optional except the certificate and key).
// NotFound naming the missing file.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const std::string& dir,
                                                  const std::string& name = "orchestrator");

// True when listen ("HOST:PORT") names a loopback host: 127.x.x.x, localhost or [::1].
bool IsLoopbackAddress(const std::string& listen);

// OK when listen is a loopback address or security has both TLS and auth; otherwise
// FailedPrecondition saying that a non-loopback address needs them (--tls-dir).
absl::Status CheckListenAllowed(const std::string& listen, const ServerSecurity& security);

// The credentials to listen with: TLS that requires and verifies a client certificate when
// ca_pem is set, with a RoleAuthProcessor attached. Insecure credentials when !tls().
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// The roles allowed to call a full method name ("/sextant.v1.AdminService/Drain"): the
// WorkerService takes worker and admin, the AdminService admin only, the FederationService
// aggregator, worker and admin; anything else admin only.
std::set<Role> AllowedRoles(const std::string& method);

// Checks every call before it reaches a service: the client certificate must be enrolled
// (UNAUTHENTICATED otherwise), the bearer token must be known (UNAUTHENTICATED) and its role
// allowed to call the method (PERMISSION_DENIED). Thread-safe; runs inline on gRPC's threads.
class RoleAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit RoleAuthProcessor(ServerSecurity security) : security_(std::move(security)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  ServerSecurity security_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SECURITY_SERVER_SECURITY_H_
