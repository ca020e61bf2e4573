#ifndef SEXTANT_ORCHESTRATOR_METRICS_HTTP_SERVER_H_
#define SEXTANT_ORCHESTRATOR_METRICS_HTTP_SERVER_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace sextant {

struct MetricsHttpOptions {
  size_t max_request_bytes = 8192;  // a longer request head gets 431; default 8 KiB
  double request_timeout_seconds = 2;  // a client that takes longer is dropped; default 2
};

// A minimal HTTP/1.x server for Prometheus scrapes: GET /metrics answers the last published
// text (Content-Type text/plain; version=0.0.4); other paths get 404, other methods 405.
// One connection at a time, closed after each response, each bounded in size and time, so a
// slow or hostile client delays scrapes by at most request_timeout_seconds.
// Thread-safe: Publish may be called from any thread while the server thread answers.
class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one; read it back with port()). host must be a
  // numeric IPv4 address. InvalidArgument for a bad host, Unavailable when the port is taken.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, MetricsHttpOptions options = {});
  ~MetricsHttpServer();  // stops the thread and closes the socket

  int port() const { return port_; }
  // Replaces the text that /metrics serves.
  void Publish(std::string body);

 private:
  MetricsHttpServer(int listen_fd, int wake_read, int wake_write, int port, MetricsHttpOptions o);
  void Serve();
  void Handle(int fd);

  int listen_fd_, wake_read_, wake_write_, port_;
  MetricsHttpOptions options_;
  std::mutex mu_;
  std::string body_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_METRICS_HTTP_SERVER_H_
