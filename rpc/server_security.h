#ifndef SEXTANT_RPC_SERVER_SECURITY_H_
#define SEXTANT_RPC_SERVER_SECURITY_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "rpc/identity.h"

namespace sextant {

// The auth-context property where RoleAuthProcessor leaves the caller's role.
inline constexpr char kRoleProperty[] = "sextant.role";
// The auth-context property where RoleAuthProcessor leaves the caller's certificate identity
// (its sextant:// URI).
inline constexpr char kIdentityProperty[] = "sextant.identity";

// The role RoleAuthProcessor found for a call (from the certificate's identity, else from the
// bearer token); nullopt when auth is off.
std::optional<Role> RoleOf(const grpc::AuthContext& context);

// The identity of a call's verified certificate; nullopt when the call carries none (no mTLS,
// or a certificate without a sextant:// identity, admitted by its token instead).
std::optional<PeerIdentity> IdentityOf(const grpc::AuthContext& context);

// The same for a call being served (nullopt without an auth context).
std::optional<PeerIdentity> CallerIdentity(const grpc::ServerContextBase& context);
// The PEM of the call's verified client certificate; empty without one.
std::string CallerCertificate(const grpc::ServerContextBase& context);

// How the orchestrator's gRPC server protects itself. Default: nothing (loopback only).
struct ServerSecurity {
  std::string cert_pem, key_pem;  // the server's certificate; empty: no TLS
  std::string ca_pem;             // client certificates must chain to it (mTLS); empty: no mTLS
  // SHA-256 fingerprints of the client certificates allowed in (enrolled). Empty: any
  // certificate from the CA.
  std::set<std::string> enrolled;
  std::map<std::string, Role> tokens;  // bearer token -> role; empty: no token auth
  // Without TLS: local TCP credentials (loopback peers only) that still run the token check
  // (LoopbackSecurity, run_secret.h). Default false: plaintext.
  bool local = false;

  bool tls() const { return !cert_pem.empty(); }
  // Every caller is authenticated: by its verified client certificate (mTLS) or by a token.
  bool auth() const { return !tokens.empty() || !ca_pem.empty(); }
};

// Reads a directory made by `sextant certs init`: NAME.pem/.key (the server's own certificate:
// "orchestrator", or "aggregator" for a regional aggregator), ca.pem, enrolled.txt and the
// worker/aggregator/admin .token files (each optional except the certificate and key).
// NotFound naming the missing file.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const std::string& dir,
                                                  const std::string& name = "orchestrator");

// True when listen ("HOST:PORT") names a loopback host: an IPv4 address in 127.0.0.0/8,
// localhost or [::1], followed by a port. "127.evil.com:80" is not.
bool IsLoopbackAddress(const std::string& listen);

// OK when listen is a loopback address or security has both TLS and auth; otherwise
// FailedPrecondition saying that a non-loopback address needs them (--tls-dir).
absl::Status CheckListenAllowed(const std::string& listen, const ServerSecurity& security);

// The dialling side of the same rule: OK when target (the HOST:PORT a worker, client or
// aggregator dials) is a loopback address (IsLoopbackAddress) or tls is set; otherwise
// FailedPrecondition saying that a non-loopback address is dialled only over TLS (--tls-dir),
// so that no leased command, plan or model travels in plaintext.
absl::Status CheckDialAllowed(const std::string& target, bool tls);

// The credentials to listen with: TLS that requires and verifies a client certificate when
// ca_pem is set, with a RoleAuthProcessor attached; without TLS, local TCP credentials with the
// processor when `local`, else insecure credentials.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// The roles allowed to call a full method name ("/sextant.v1.AdminService/Drain"): the
// WorkerService and the TrialService (ask/tell) take worker and admin, the AdminService admin only,
// the FederationService client and aggregator (and, from a bearer token only, worker: the shared
// token that identity-less clients use); anything else admin only. from_certificate: the role comes
// from a certificate's identity.
std::set<Role> AllowedRoles(const std::string& method, bool from_certificate = false);

// Checks every call before it reaches a service. Under mTLS the client certificate must be
// enrolled when an enrolment list exists (UNAUTHENTICATED otherwise); a certificate with a
// sextant:// identity then decides the caller's role and identity, and no token is needed.
// Otherwise the bearer token must be known (compared in constant time; UNAUTHENTICATED). The
// role must be allowed to call the method (PERMISSION_DENIED). A call that proves neither is
// UNAUTHENTICATED. Thread-safe; runs inline on gRPC's threads.
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

#endif  // SEXTANT_RPC_SERVER_SECURITY_H_
