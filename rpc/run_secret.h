// Loopback mode's authentication. Without --tls-dir the services listen on loopback, which
// every local user can reach; so each run writes random secrets into its run directory
// (mode 0600 in a 0700 folder) and every call must carry one as its bearer token. Processes
// the run starts get the file's path; another local user cannot read it and is refused
// (UNAUTHENTICATED).
#ifndef SEXTANT_RPC_RUN_SECRET_H_
#define SEXTANT_RPC_RUN_SECRET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "rpc/server_security.h"

namespace sextant {

// The secrets of one run, and where they are.
struct RunSecrets {
  std::string worker_file, admin_file;  // DIR/worker.secret, DIR/admin.secret
  std::string worker, admin;            // 64 hex characters each
};

// Creates dir (mode 0700) with fresh worker.secret and admin.secret (0600), replacing any
// earlier ones (a resumed run's processes are new). Internal naming the file on error.
absl::StatusOr<RunSecrets> CreateRunSecrets(const std::string& dir);

// Creates dir (mode 0700) if needed and a fresh DIR/NAME.secret (0600) with a new random secret
// (64 hex characters), replacing an earlier one; returns the secret. Internal naming the file
// on error.
absl::StatusOr<std::string> CreateSecretFile(const std::string& dir, const std::string& name);

// The secret in path. NotFound or PermissionDenied naming it when it cannot be read;
// FailedPrecondition when group or others may read it (it would not be secret).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// A loopback server's security: local TCP credentials (loopback peers only) with the worker
// secret for the worker role and the admin secret for the admin role.
ServerSecurity LoopbackSecurity(const RunSecrets& secrets);
// The same with one secret for the worker role only (a regional aggregator serving its clients).
ServerSecurity LoopbackSecurity(const std::string& worker_secret);

// Local TCP credentials that send `secret` as the bearer token of every call.
std::shared_ptr<grpc::ChannelCredentials> LoopbackChannelCredentials(const std::string& secret);

}  // namespace sextant

#endif  // SEXTANT_RPC_RUN_SECRET_H_
