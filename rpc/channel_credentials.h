#ifndef SEXTANT_RPC_CHANNEL_CREDENTIALS_H_
#define SEXTANT_RPC_CHANNEL_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "rpc/identity.h"

namespace sextant {

// The credentials a participant (worker, federated client, regional aggregator) dials with,
// from a directory made by `sextant certs init`: TLS that verifies the server against
// TLS_DIR/ca.pem and presents TLS_DIR/NAME.pem and NAME.key as the client certificate (mTLS),
// plus TLS_DIR/NAME.token as the bearer token when that file is there. An empty tls_dir gives
// plaintext credentials, or, with secret_file, local TCP credentials that carry the run's
// secret (LoopbackChannelCredentials). NotFound naming the directory and files when ca.pem,
// NAME.pem or NAME.key cannot be read; ReadSecretFile's errors for the secret.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentials(
    const std::string& tls_dir, const std::string& name, const std::string& secret_file = "");

// The same TLS credentials, with the server checked by who it is rather than by the name
// dialled: its certificate must chain to TLS_DIR/ca.pem and carry the URI IdentityUri(server)
// (UNAUTHENTICATED at the handshake otherwise), whatever host names it has. For participants
// that `sextant run` starts, which dial their region's aggregator on loopback, a name that no
// aggregator certificate carries. NotFound as LoadChannelCredentials; InvalidArgument for an
// empty tls_dir (an identity needs TLS).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentialsForServer(
    const std::string& tls_dir, const std::string& name, const PeerIdentity& server);

}  // namespace sextant

#endif  // SEXTANT_RPC_CHANNEL_CREDENTIALS_H_
