#include "orchestrator/monitor/metrics_http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace sextant {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

constexpr char kPrometheusType[] = "text/plain; version=0.0.4; charset=utf-8";

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

// Milliseconds left until deadline, at least 0.
int Left(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until fd is ready for `events` or the deadline passes.
bool Ready(int fd, short events, SteadyTime deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, Left(deadline));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

std::string IpOf(const sockaddr_in& a) {
  char text[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
  return text;
}

enum class Head { kComplete, kTooLarge, kGone };

// Reads the request head (up to and including its blank line) into *head, never holding more
// than max + 1 bytes. Bytes after the blank line that came in the same read stay in *head. A
// head ended by bare line feeds is complete too, so that httplib answers it 400 at once.
Head ReadHead(int fd, size_t max, SteadyTime deadline, std::string* head) {
  char buf[4096];
  while (true) {
    if (head->find("\r\n\r\n") != std::string::npos || head->find("\n\n") != std::string::npos) {
      return Head::kComplete;
    }
    if (head->size() > max) return Head::kTooLarge;
    if (!Ready(fd, POLLIN, deadline)) return Head::kGone;
    ssize_t n = recv(fd, buf, std::min(sizeof(buf), max + 1 - head->size()), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Head::kGone;
    head->append(buf, static_cast<size_t>(n));
  }
}

// One connection as httplib reads and writes it: the head already read, then the socket, each
// direction bounded by its own deadline and reads by a byte budget.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, std::string head, size_t read_budget, SteadyTime read_deadline,
                   double response_timeout_seconds)
      : fd_(fd),
        head_(std::move(head)),
        read_budget_(read_budget),
        read_deadline_(read_deadline),
        response_timeout_seconds_(response_timeout_seconds) {}

  bool is_readable() const override {
    return at_ < head_.size() || Ready(fd_, POLLIN, read_deadline_);
  }
  bool is_writable() const override { return Ready(fd_, POLLOUT, WriteDeadline()); }

  ssize_t read(char* ptr, size_t size) override {
    if (at_ < head_.size()) {
      size_t n = std::min(size, head_.size() - at_);
      head_.copy(ptr, n, at_);
      at_ += n;
      return static_cast<ssize_t>(n);
    }
    if (read_budget_ == 0 || !Ready(fd_, POLLIN, read_deadline_)) return -1;
    ssize_t n = recv(fd_, ptr, std::min(size, read_budget_), 0);
    if (n > 0) read_budget_ -= static_cast<size_t>(n);
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!Ready(fd_, POLLOUT, WriteDeadline())) return -1;
    return send(fd_, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // The response's deadline starts with its first byte, so that making the page (a report
  // of a large run) does not eat into the client's time to take it.
  SteadyTime WriteDeadline() const {
    if (!write_deadline_) {
      write_deadline_ = std::chrono::steady_clock::now() + Millis(response_timeout_seconds_);
    }
    return *write_deadline_;
  }

  void Address(int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    if (name(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) return;
    ip = IpOf(a);
    port = ntohs(a.sin_port);
  }

  int fd_;
  std::string head_;
  size_t at_ = 0;
  size_t read_budget_;
  SteadyTime read_deadline_;
  double response_timeout_seconds_;
  mutable std::optional<SteadyTime> write_deadline_;
};

void SendAll(int fd, const std::string& data, SteadyTime deadline) {
  for (size_t sent = 0; sent < data.size();) {
    if (!Ready(fd, POLLOUT, deadline)) return;
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// After a refusal: what the client already sent is read and dropped (a bounded amount), so
// that closing does not reset the connection before the client has read the answer.
void Discard(int fd, SteadyTime deadline) {
  char buf[4096];
  for (size_t dropped = 0; dropped < (1u << 20) && Ready(fd, POLLIN, deadline);) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    dropped += static_cast<size_t>(n);
  }
}

// Whether a Host value names this server: a loopback name or the address it listens on, with
// its port (or without, on port 80, where browsers leave it out). A rebinding page's requests
// carry its own host name, never one of these.
bool NamesThisServer(const std::string& host, const std::string& listen_host, int port) {
  for (const std::string& name :
       {std::string("127.0.0.1"), std::string("localhost"), std::string("[::1]"), listen_host}) {
    if (absl::EqualsIgnoreCase(host, absl::StrCat(name, ":", port))) return true;
    if (port == 80 && absl::EqualsIgnoreCase(host, name)) return true;
  }
  return false;
}

// Why a request may not be answered at all, or "" when it may: it must name this server in one
// Host header, and a browser's request must come from this server's own origin.
std::string Refusal(const httplib::Request& req, const std::string& listen_host, int port) {
  if (req.get_header_value_count("Host") != 1 ||
      !NamesThisServer(req.get_header_value("Host"), listen_host, port)) {
    return absl::StrCat("forbidden: the Host header must name this server (127.0.0.1:", port,
                        " or localhost:", port, ")\n");
  }
  if (req.has_header("Origin") &&
      (req.get_header_value_count("Origin") != 1 ||
       !absl::EqualsIgnoreCase(req.get_header_value("Origin"),
                               absl::StrCat("http://", req.get_header_value("Host"))))) {
    return "forbidden: a request from another origin\n";
  }
  return "";
}

// Compares in time that depends on the lengths only, so that the page's token cannot be
// guessed byte by byte from how long a refusal takes. An empty secret matches nothing.
bool SameSecret(const std::string& given, const std::string& secret) {
  if (secret.empty() || given.size() != secret.size()) return false;
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i)
    diff = diff | static_cast<unsigned char>(given[i] ^ secret[i]);
  return diff == 0;
}

httplib::Server::HandlerResponse Forbidden(httplib::Response& res, const std::string& why) {
  res.status = 403;
  res.set_content(why, "text/plain");
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

// httplib parses, routes and answers; this subclass only reads each connection's request head
// first, within the size and time limits, which httplib 0.11 does not bound (it reads a header
// line whole, however long, and any number of them). One request per connection.
class MetricsHttpServer::Http : public httplib::Server {
 public:
  explicit Http(const MetricsHttpOptions& options) : options_(options) {}

 private:
  // Runs on one of httplib's pool threads for each accepted connection.
  bool process_and_close_socket(socket_t sock) override {
    // The orchestrator starts workers: none of them may inherit a client's connection.
    fcntl(sock, F_SETFD, FD_CLOEXEC);
    const SteadyTime deadline =
        std::chrono::steady_clock::now() + Millis(options_.request_timeout_seconds);
    std::string head;
    bool ok = false;
    switch (ReadHead(sock, options_.max_request_bytes, deadline, &head)) {
      case Head::kComplete: {
        const size_t budget =
            options_.max_request_bytes - std::min(options_.max_request_bytes, head.size());
        ConnectionStream stream(sock, std::move(head), budget, deadline,
                                options_.response_timeout_seconds);
        bool closed = false;
        ok = process_request(stream, /*close_connection=*/true, closed, nullptr);
        break;
      }
      case Head::kTooLarge: {
        const std::string body = "request head too large\n";
        SendAll(sock,
                absl::StrCat("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: "
                             "text/plain\r\nContent-Length: ",
                             body.size(), "\r\nConnection: close\r\n\r\n", body),
                std::chrono::steady_clock::now() + Millis(options_.response_timeout_seconds));
        shutdown(sock, SHUT_WR);
        Discard(sock, std::chrono::steady_clock::now() + std::chrono::milliseconds(500));
        break;
      }
      case Head::kGone:
        break;
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
  }

  MetricsHttpOptions options_;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, Clock* clock, MetricsHttpOptions options) {
  in_addr parsed{};
  if (port < 0 || port > 65535 || inet_pton(AF_INET, host.c_str(), &parsed) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics: bad address ", host, ":", port));
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->http_ = std::make_unique<Http>(options);
  Http& http = *s->http_;
  http.set_address_family(AF_INET);
  // httplib's default adds SO_REUSEPORT, under which a second server would share the port
  // instead of being refused. The listening socket is not inherited by worker processes.
  http.set_socket_options([](socket_t sock) {
    int one = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    fcntl(sock, F_SETFD, FD_CLOEXEC);
  });
  http.set_payload_max_length(options.max_request_bytes);
  // port_ is set before the server thread starts, and read only on its threads.
  http.set_pre_routing_handler(
      [p = s.get(), host, token = options.page_token, page = static_cast<bool>(options.page)](
          const httplib::Request& req, httplib::Response& res) {
        if (std::string why = Refusal(req, host, p->port_); !why.empty())
          return Forbidden(res, why);
        const bool ours = req.path == "/metrics" || req.path == "/";
        if (ours && req.method != "GET" && req.method != "HEAD") {
          res.status = 405;
          res.set_header("Allow", "GET, HEAD");
          res.set_content("only GET and HEAD\n", "text/plain");
          return httplib::Server::HandlerResponse::Handled;
        }
        if (page && req.path == "/" && !SameSecret(req.get_param_value("token"), token)) {
          return Forbidden(res,
                           "forbidden: open the live report at the address `sextant run` printed, "
                           "with its ?token=\n");
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
  http.Get("/metrics", [p = s.get()](const httplib::Request&, httplib::Response& res) {
    res.set_content(p->Published(), kPrometheusType);
  });
  if (options.page) {
    http.Get("/", [page = options.page](const httplib::Request&, httplib::Response& res) {
      absl::StatusOr<std::string> html = page();
      if (html.ok()) {
        res.set_header("Cache-Control", "no-store");
        // The address holds the token: links out of the page must not pass it on.
        res.set_header("Referrer-Policy", "no-referrer");
        res.set_content(*std::move(html), "text/html; charset=utf-8");
      } else {
        res.status = 503;
        res.set_content(
            absl::StrCat("the report is not available: ", html.status().message(), "\n"),
            "text/plain");
      }
    });
  }
  const bool bound =
      port == 0 ? (s->port_ = http.bind_to_any_port(host)) > 0 : http.bind_to_port(host, port);
  if (!bound) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", host, ":", port, " (is the port in use?)"));
  }
  if (port != 0) s->port_ = port;
  auto returned = std::make_shared<std::atomic<bool>>(false);
  s->thread_ = std::thread([&http, returned] {
    http.listen_after_bind();
    returned->store(true);
  });
  // stop() only stops a server that is already listening: wait for it, so that a server
  // destroyed at once still shuts down.
  while (!http.is_running() && !returned->load()) {
    clock->SleepFor(absl::Milliseconds(1));
  }
  if (!http.is_running()) {
    s->thread_.join();
    return absl::UnavailableError(absl::StrCat("metrics: cannot serve on ", host, ":", s->port_));
  }
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

void MetricsHttpServer::Publish(std::string body) {
  absl::MutexLock lock(&mu_);
  body_ = std::move(body);
}

std::string MetricsHttpServer::Published() {
  absl::MutexLock lock(&mu_);
  return body_;
}

}  // namespace sextant
