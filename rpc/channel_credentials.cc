#include "rpc/channel_credentials.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "rpc/run_secret.h"

namespace sextant {
namespace {

// What a TLS directory holds for one participant.
struct TlsFiles {
  std::string ca, cert, key;
  // NAME.token without its whitespace; unset when absent or empty.
  std::optional<std::string> token;
};

absl::StatusOr<TlsFiles> ReadTlsFiles(const std::string& tls_dir, const std::string& name) {
  auto read = [&](const std::string& file) {
    return ReadFileIfPresent(absl::StrCat(tls_dir, "/", file));
  };
  std::optional<std::string> ca = read("ca.pem"), cert = read(name + ".pem"),
                             key = read(name + ".key");
  if (!ca || !cert || !key) {
    return absl::NotFoundError(
        absl::StrCat(tls_dir, " lacks ca.pem, ", name, ".pem or ", name, ".key"));
  }
  TlsFiles files{*std::move(ca), *std::move(cert), *std::move(key), std::nullopt};
  if (std::optional<std::string> token = read(name + ".token")) {
    std::string t(absl::StripAsciiWhitespace(*token));
    if (!t.empty()) files.token = std::move(t);
  }
  return files;
}

// Sends the token with every call, when there is one.
std::shared_ptr<grpc::ChannelCredentials> WithToken(std::shared_ptr<grpc::ChannelCredentials> creds,
                                                    const std::optional<std::string>& token) {
  if (!token) return creds;
  return grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(*token));
}

// Admits a server whose certificate (already verified against the CA by TLS) carries one URI
// subject name: the identity the dialler expects.
class IdentityVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit IdentityVerifier(std::string uri) : uri_(std::move(uri)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    for (const grpc::string_ref& uri : request->uri_names()) {
      if (std::string(uri.data(), uri.size()) == uri_) {
        *sync_status = grpc::Status::OK;
        return true;
      }
    }
    *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                absl::StrCat("the server's certificate is not ", uri_));
    return true;  // answered at once
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  const std::string uri_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentials(
    const std::string& tls_dir, const std::string& name, const std::string& secret_file) {
  if (tls_dir.empty() && !secret_file.empty()) {
    absl::StatusOr<std::string> secret = ReadSecretFile(secret_file);
    if (!secret.ok()) return secret.status();
    return LoopbackChannelCredentials(*secret);
  }
  if (tls_dir.empty()) return grpc::InsecureChannelCredentials();
  absl::StatusOr<TlsFiles> files = ReadTlsFiles(tls_dir, name);
  if (!files.ok()) return files.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = files->ca;
  ssl.pem_cert_chain = files->cert;
  ssl.pem_private_key = files->key;
  return WithToken(grpc::SslCredentials(ssl), files->token);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LoadChannelCredentialsForServer(
    const std::string& tls_dir, const std::string& name, const PeerIdentity& server) {
  if (tls_dir.empty()) {
    return absl::InvalidArgumentError("a server's identity is checked over TLS only (--tls-dir)");
  }
  absl::StatusOr<TlsFiles> files = ReadTlsFiles(tls_dir, name);
  if (!files.ok()) return files.status();
  using grpc::experimental::IdentityKeyCertPair;
  auto provider = std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
      files->ca, std::vector<IdentityKeyCertPair>{{files->key, files->cert}});
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // The chain is still verified against the CA; only the host name check gives way to the
  // identity check, on the handshake and on each call.
  options.set_verify_server_certs(true);
  options.set_check_call_host(false);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<IdentityVerifier>(
          IdentityUri(server)));
  return WithToken(grpc::experimental::TlsCredentials(options), files->token);
}

}  // namespace sextant
