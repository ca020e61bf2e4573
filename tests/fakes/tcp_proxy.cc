#include "tests/fakes/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <future>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sextant::testing {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

constexpr size_t kMaxBuffered = 1 << 20;
constexpr double kSegmentBytes = 1448;  // a TCP segment's payload on a 1500-byte MTU

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int Connect(const in_addr& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr = host;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  SetNonBlocking(fd);
  return fd;
}

// One relayed connection: bytes read from one side wait in its buffer for the other side,
// each run of them until its release time.
struct Pair {
  int fd[2];
  std::string buf[2];  // buf[i]: read from fd[i], to be written to fd[1 - i]
  std::deque<std::pair<SteadyTime, size_t>> runs[2];  // (release time, length) covering buf[i]
  bool eof[2] = {false, false};                       // fd[i] has sent all it will send
  bool shut[2] = {false, false};  // ... and all of it went on, with a FIN after it
  bool closed = false;

  size_t Ready(int from, SteadyTime now) const {
    size_t n = 0;
    for (const auto& [at, len] : runs[from]) {
      if (at > now) break;
      n += len;
    }
    return n;
  }
};

// The link: when a chunk read now may leave, given the one before it (streams stay ordered).
class Link {
 public:
  Link(const TcpProxyOptions& o) : o_(o), rng_(o.seed) {}
  SteadyTime Release(size_t bytes, SteadyTime now, SteadyTime previous,
                     std::atomic<int64_t>* lost) {
    SteadyTime at = now + std::chrono::milliseconds(o_.latency_ms);
    if (o_.loss > 0) {
      const int64_t segments = static_cast<int64_t>(std::ceil(bytes / kSegmentBytes));
      std::bernoulli_distribution drop(o_.loss);
      int64_t dropped = 0;
      for (int64_t s = 0; s < segments; ++s) dropped += drop(rng_);
      if (dropped > 0) {
        *lost += dropped;
        at += std::chrono::milliseconds(o_.retransmit_ms);
      }
    }
    return std::max(at, previous);
  }

 private:
  const TcpProxyOptions& o_;
  std::mt19937_64 rng_;
};

// Moves what fd[from] has into buf[from] (marking eof at its end); false on an error.
bool ReadSide(Pair& p, int from, Link& link, std::atomic<int64_t>* bytes,
              std::atomic<int64_t>* lost) {
  char chunk[65536];
  ssize_t n = read(p.fd[from], chunk, sizeof(chunk));
  if (n > 0) {
    p.buf[from].append(chunk, static_cast<size_t>(n));
    const SteadyTime now = std::chrono::steady_clock::now();
    const SteadyTime previous = p.runs[from].empty() ? now : p.runs[from].back().first;
    p.runs[from].push_back(
        {link.Release(static_cast<size_t>(n), now, previous, lost), static_cast<size_t>(n)});
    *bytes += n;
    return true;
  }
  if (n == 0) {
    p.eof[from] = true;
    return true;
  }
  return errno == EAGAIN || errno == EINTR;
}

// Writes what is due of buf[from] to the other side; once side `from` ended and all of it went
// on, passes the end on (half-close), so that nothing still in flight is dropped.
bool WriteSide(Pair& p, int from, SteadyTime now) {
  std::string& b = p.buf[from];
  if (const size_t ready = p.Ready(from, now); ready > 0) {
    // MSG_NOSIGNAL: a peer that has gone is EPIPE (the pair ends), not a SIGPIPE that kills
    // the test process hosting the relay.
    ssize_t n = send(p.fd[1 - from], b.data(), ready, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    b.erase(0, static_cast<size_t>(n));
    size_t left = static_cast<size_t>(n);
    auto& runs = p.runs[from];
    while (left > 0 && !runs.empty()) {
      const size_t take = std::min(left, runs.front().second);
      runs.front().second -= take;
      left -= take;
      if (runs.front().second == 0) runs.pop_front();
    }
  }
  if (p.eof[from] && b.empty() && !p.shut[from]) {
    shutdown(p.fd[1 - from], SHUT_WR);
    p.shut[from] = true;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int upstream_port) {
  TcpProxyOptions o;
  o.upstream_port = upstream_port;
  return Start(o);
}

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const TcpProxyOptions& options) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.listen_port));
  in_addr upstream{};
  if (inet_pton(AF_INET, options.listen_host.c_str(), &addr.sin_addr) != 1 ||
      inet_pton(AF_INET, options.upstream_host.c_str(), &upstream) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("proxy: bad IPv4 address ", options.listen_host,
                                                   " or ", options.upstream_host));
  }
  int netns = -1;
  if (!options.upstream_netns.empty()) {
    netns = open(options.upstream_netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0) {
      return absl::NotFoundError(
          absl::StrCat("proxy: ", options.upstream_netns, ": ", std::strerror(errno)));
    }
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    if (netns >= 0) close(netns);
    return absl::InternalError(absl::StrCat("proxy listen on ", options.listen_host, ": ", why));
  }
  SetNonBlocking(fd);
  std::unique_ptr<TcpProxy> proxy(new TcpProxy(fd, ntohs(addr.sin_port), options));
  // The relay thread alone moves into the upstream namespace (setns is per thread), so that the
  // sockets it connects live there while the listening socket stays here.
  std::promise<absl::Status> ready;
  std::future<absl::Status> switched = ready.get_future();
  proxy->thread_ = std::thread([p = proxy.get(), netns, ready = std::move(ready)]() mutable {
    if (netns >= 0) {
      const int rc = setns(netns, CLONE_NEWNET);
      const std::string why = rc == 0 ? "" : std::strerror(errno);
      close(netns);
      if (rc != 0) {
        ready.set_value(absl::InternalError(absl::StrCat("proxy: setns: ", why)));
        return;
      }
    }
    ready.set_value(absl::OkStatus());
    p->Loop();
  });
  if (absl::Status s = switched.get(); !s.ok()) {
    proxy->thread_.join();
    return s;
  }
  return proxy;
}

TcpProxy::~TcpProxy() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

std::string TcpProxy::address() const { return absl::StrCat(options_.listen_host, ":", port_); }

// Polls every 10 ms at most, so that Cut, Heal, release times and the destructor take effect
// promptly.
void TcpProxy::Loop() {
  in_addr upstream{};
  inet_pton(AF_INET, options_.upstream_host.c_str(), &upstream);
  Link link(options_);
  std::vector<Pair> pairs;
  while (!stop_.load()) {
    const bool cut = cut_.load();
    SteadyTime now = std::chrono::steady_clock::now();
    int timeout_ms = 10;
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, static_cast<short>(cut ? 0 : POLLIN), 0});
    for (Pair& p : pairs) {
      for (int i = 0; i < 2; ++i) {
        short ev = 0;
        if (!cut && !p.eof[i] && p.buf[i].size() < kMaxBuffered) ev |= POLLIN;
        if (!cut && p.Ready(1 - i, now) > 0) ev |= POLLOUT;
        if (!p.runs[1 - i].empty() && p.runs[1 - i].front().first > now) {
          const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
              p.runs[1 - i].front().first - now);
          timeout_ms = std::min<int>(timeout_ms, static_cast<int>(wait.count()) + 1);
        }
        fds.push_back({p.fd[i], ev, 0});
      }
    }
    poll(fds.data(), fds.size(), timeout_ms);
    if (cut_.load()) continue;
    if (int delay = delay_ms_.load(); delay > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    if (fds[0].revents & POLLIN) {
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client >= 0) {
        int up = Connect(upstream, options_.upstream_port);
        if (up < 0) {
          close(client);
        } else {
          int one = 1;
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          pairs.push_back(Pair{{client, up}, {}, {}, {false, false}, {false, false}, false});
          ++connections_;
        }
      }
    }
    now = std::chrono::steady_clock::now();
    for (size_t k = 0; k < pairs.size() && 1 + 2 * k + 1 < fds.size(); ++k) {
      Pair& p = pairs[k];
      for (int i = 0; i < 2 && !p.closed; ++i) {
        short re = fds[1 + 2 * k + i].revents;
        if (!p.eof[i] && (re & (POLLIN | POLLHUP | POLLERR)) &&
            !ReadSide(p, i, link, &bytes_, &lost_)) {
          p.closed = true;
        }
        if (!p.closed && !WriteSide(p, 1 - i, now)) p.closed = true;
      }
      if (p.shut[0] && p.shut[1]) p.closed = true;
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
