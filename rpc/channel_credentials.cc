#include "rpc/channel_credentials.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "rpc/run_secret.h"

namespace sextant {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentials(
    const std::string& tls_dir, const std::string& name, const std::string& secret_file) {
  if (tls_dir.empty() && !secret_file.empty()) {
    absl::StatusOr<std::string> secret = ReadSecretFile(secret_file);
    if (!secret.ok()) return secret.status();
    return LoopbackChannelCredentials(*secret);
  }
  if (tls_dir.empty()) return grpc::InsecureChannelCredentials();
  auto read = [&](const std::string& file) {
    return ReadFileIfPresent(absl::StrCat(tls_dir, "/", file));
  };
  std::optional<std::string> ca = read("ca.pem"), cert = read(name + ".pem"),
                             key = read(name + ".key");
  if (!ca || !cert || !key) {
    return absl::NotFoundError(
        absl::StrCat(tls_dir, " lacks ca.pem, ", name, ".pem or ", name, ".key"));
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *ca;
  ssl.pem_cert_chain = *cert;
  ssl.pem_private_key = *key;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::SslCredentials(ssl);
  if (std::optional<std::string> token = read(name + ".token")) {
    std::string t(absl::StripAsciiWhitespace(*token));
    if (!t.empty()) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(t));
    }
  }
  return creds;
}

}  // namespace sextant
