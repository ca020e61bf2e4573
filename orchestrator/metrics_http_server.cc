#include "orchestrator/metrics_http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

void SendAll(int fd, const std::string& data, std::chrono::steady_clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, left) <= 0) return;
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return;
    }
    sent += n;
  }
}

std::string Response(int code, const char* reason, const std::string& type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, MetricsHttpOptions options) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port < 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: bad address ", host, ":", port));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("metrics: socket: ", strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", host, ":", port, ": ", why));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("metrics: pipe: ", strerror(errno)));
  }
  std::unique_ptr<MetricsHttpServer> s(
      new MetricsHttpServer(fd, pipe_fds[0], pipe_fds[1], ntohs(addr.sin_port), options));
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port,
                                     MetricsHttpOptions o)
    : listen_fd_(listen_fd), wake_read_(wake_read), wake_write_(wake_write), port_(port), options_(o) {}

MetricsHttpServer::~MetricsHttpServer() {
  char c = 1;
  (void)!write(wake_write_, &c, 1);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void MetricsHttpServer::Publish(std::string body) {
  std::lock_guard<std::mutex> lock(mu_);
  body_ = std::move(body);
}

void MetricsHttpServer::Serve() {
  while (true) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    Handle(fd);
    close(fd);
  }
}

void MetricsHttpServer::Handle(int fd) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int>(options_.request_timeout_seconds * 1000));
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() > options_.max_request_bytes) {
      SendAll(fd, Response(431, "Request Header Fields Too Large", "text/plain", "request too large\n"), deadline);
      return;
    }
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0) return;
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(p, 2, left) <= 0 || p[1].revents) return;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    head.append(buf, n);
  }
  std::string line = head.substr(0, head.find_first_of("\r\n"));
  size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    SendAll(fd, Response(400, "Bad Request", "text/plain", "bad request\n"), deadline);
    return;
  }
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string path = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") {
    SendAll(fd, Response(405, "Method Not Allowed", "text/plain", "only GET\n"), deadline);
    return;
  }
  if (path != "/metrics") {
    SendAll(fd, Response(404, "Not Found", "text/plain", "see /metrics\n"), deadline);
    return;
  }
  std::string body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    body = body_;
  }
  std::string r = Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
  if (method == "HEAD") r.resize(r.size() - body.size());
  SendAll(fd, r, deadline);
}

}  // namespace sextant
