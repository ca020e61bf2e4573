#include "rpc/host_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sextant {

std::string DialTarget(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = "127.0.0.1";
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", target.substr(0, 200), "' is not HOST:PORT"));
  }
  std::string host = target.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = target.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", target.substr(0, 200), ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  std::string local;
  for (addrinfo* a = found; a != nullptr && local.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // A datagram socket's connect only picks the route and the source address.
    sockaddr_storage mine{};
    socklen_t len = sizeof(mine);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    close(fd);
    char text[INET6_ADDRSTRLEN] = {0};
    if (mine.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&mine)->sin_addr, text, sizeof(text));
      local = text;
    } else if (mine.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&mine)->sin6_addr, text, sizeof(text));
      local = absl::StrCat("[", text, "]");
    }
  }
  freeaddrinfo(found);
  if (local.empty()) {
    return absl::UnavailableError(absl::StrCat("no route to ", target.substr(0, 200), ": ", why));
  }
  return local;
}

absl::StatusOr<std::string> ResolveListen(const std::string& listen, const std::string& upstream) {
  constexpr char kAuto[] = "auto:";
  if (listen.rfind(kAuto, 0) != 0) return listen;
  absl::StatusOr<std::string> host = LocalAddressToward(upstream);
  if (!host.ok()) {
    return absl::Status(
        host.status().code(),
        absl::StrCat("--listen ", listen.substr(0, 200),
                     ": this host's address toward its upstream: ", host.status().message()));
  }
  return absl::StrCat(*host, ":", listen.substr(sizeof(kAuto) - 1));
}

}  // namespace sextant
