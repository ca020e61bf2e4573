#ifndef SEXTANT_RPC_CHANNEL_CREDENTIALS_H_
#define SEXTANT_RPC_CHANNEL_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"

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

}  // namespace sextant

#endif  // SEXTANT_RPC_CHANNEL_CREDENTIALS_H_
