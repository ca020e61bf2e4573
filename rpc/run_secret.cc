#include "rpc/run_secret.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "grpc/grpc_security_constants.h"
#include "rpc/certificates.h"

namespace sextant {
namespace {

absl::StatusOr<std::string> WriteNewSecret(const std::string& path) {
  SEXTANT_ASSIGN_OR_RETURN(std::string secret, NewToken());
  std::filesystem::remove(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  const bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return secret;
}

// Sends the secret as "authorization: Bearer ..." on every call, also over local TCP, whose
// security level (none) the built-in token credentials refuse to send over.
class BearerPlugin final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerPlugin(std::string secret) : header_("Bearer " + std::move(secret)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
                           std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->insert({"authorization", header_});
    return grpc::Status::OK;
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<RunSecrets> CreateRunSecrets(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat(dir, ": ", std::strerror(errno)));
  }
  RunSecrets s;
  s.worker_file = dir + "/worker.secret";
  s.admin_file = dir + "/admin.secret";
  SEXTANT_ASSIGN_OR_RETURN(s.worker, WriteNewSecret(s.worker_file));
  SEXTANT_ASSIGN_OR_RETURN(s.admin, WriteNewSecret(s.admin_file));
  return s;
}

absl::StatusOr<std::string> CreateSecretFile(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat(dir, ": ", std::strerror(errno)));
  }
  return WriteNewSecret(absl::StrCat(dir, "/", name, ".secret"));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  // Opened once, not through a link, and checked on the open file: what is checked is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return errno == EACCES ? absl::PermissionDeniedError(absl::StrCat(path, ": permission denied"))
                           : absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  std::string text;
  absl::Status bad;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bad = absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  } else if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
    bad = absl::FailedPreconditionError(absl::StrFormat(
        "%s may be read by others (mode %o, owner %d); a secret must be 0600 and this user's", path,
        st.st_mode & 0777, static_cast<int>(st.st_uid)));
  } else {
    char buf[256];
    ssize_t n = 0;
    while (text.size() < 4096 && (n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, n);
  }
  ::close(fd);
  if (!bad.ok()) return bad;
  std::string secret(absl::StripAsciiWhitespace(text));
  if (secret.empty()) return absl::FailedPreconditionError(absl::StrCat(path, " is empty"));
  return secret;
}

ServerSecurity LoopbackSecurity(const RunSecrets& secrets) {
  ServerSecurity s;
  s.local = true;
  s.tokens[secrets.worker] = Role::kWorker;
  s.tokens[secrets.admin] = Role::kAdmin;
  return s;
}

ServerSecurity LoopbackSecurity(const std::string& worker_secret) {
  ServerSecurity s;
  s.local = true;
  s.tokens[worker_secret] = Role::kWorker;
  return s;
}

std::shared_ptr<grpc::ChannelCredentials> LoopbackChannelCredentials(const std::string& secret) {
  return grpc::CompositeChannelCredentials(
      grpc::experimental::LocalCredentials(LOCAL_TCP),
      grpc::experimental::MetadataCredentialsFromPlugin(std::make_unique<BearerPlugin>(secret),
                                                        GRPC_SECURITY_NONE));
}

}  // namespace sextant
