#include "tests/fakes/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sextant::testing {
namespace {

constexpr size_t kMaxBuffered = 1 << 20;

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetNonBlocking(fd);
  return fd;
}

// One relayed connection: bytes read from one side wait in its buffer for the other side.
struct Pair {
  int fd[2];
  std::string buf[2];  // buf[i]: read from fd[i], to be written to fd[1 - i]
  bool closed = false;
};

// Moves what fd[from] has into buf[from]; false on EOF or error.
bool ReadSide(Pair& p, int from, std::atomic<int64_t>* bytes) {
  char chunk[65536];
  ssize_t n = read(p.fd[from], chunk, sizeof(chunk));
  if (n > 0) {
    p.buf[from].append(chunk, static_cast<size_t>(n));
    *bytes += n;
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

bool WriteSide(Pair& p, int from) {
  std::string& b = p.buf[from];
  ssize_t n = write(p.fd[1 - from], b.data(), b.size());
  if (n > 0) {
    b.erase(0, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int upstream_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("proxy listen: ", std::strerror(errno)));
  }
  SetNonBlocking(fd);
  std::unique_ptr<TcpProxy> proxy(new TcpProxy(fd, ntohs(addr.sin_port), upstream_port));
  proxy->thread_ = std::thread([p = proxy.get()] { p->Loop(); });
  return proxy;
}

TcpProxy::~TcpProxy() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

std::string TcpProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

// Polls every 10 ms at most, so that Cut, Heal and the destructor take effect promptly.
void TcpProxy::Loop() {
  std::vector<Pair> pairs;
  while (!stop_.load()) {
    const bool cut = cut_.load();
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, static_cast<short>(cut ? 0 : POLLIN), 0});
    for (Pair& p : pairs) {
      for (int i = 0; i < 2; ++i) {
        short ev = 0;
        if (!cut && p.buf[i].size() < kMaxBuffered) ev |= POLLIN;
        if (!cut && !p.buf[1 - i].empty()) ev |= POLLOUT;
        fds.push_back({p.fd[i], ev, 0});
      }
    }
    poll(fds.data(), fds.size(), 10);
    if (cut_.load()) continue;
    if (int delay = delay_ms_.load(); delay > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    if (fds[0].revents & POLLIN) {
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client >= 0) {
        int upstream = ConnectLoopback(upstream_port_);
        if (upstream < 0) {
          close(client);
        } else {
          pairs.push_back(Pair{{client, upstream}, {}, false});
        }
      }
    }
    for (size_t k = 0; k < pairs.size() && 1 + 2 * k + 1 < fds.size(); ++k) {
      Pair& p = pairs[k];
      for (int i = 0; i < 2 && !p.closed; ++i) {
        short re = fds[1 + 2 * k + i].revents;
        if ((re & (POLLIN | POLLHUP | POLLERR)) && !ReadSide(p, i, &bytes_)) p.closed = true;
        if (!p.closed && (re & POLLOUT) && !WriteSide(p, 1 - i)) p.closed = true;
      }
    }
    for (auto it = pairs.begin(); it != pairs.end();) {
      if (it->closed) {
        close(it->fd[0]);
        close(it->fd[1]);
        it = pairs.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Pair& p : pairs) {
    close(p.fd[0]);
    close(p.fd[1]);
  }
}

}  // namespace sextant::testing
