#ifndef SEXTANT_ORCHESTRATOR_MONITOR_METRICS_HTTP_SERVER_H_
#define SEXTANT_ORCHESTRATOR_MONITOR_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace sextant {

// The HTML page `/` serves, made when asked; an error is answered 503 with its message.
using PageSource = std::function<absl::StatusOr<std::string>()>;

struct MetricsHttpOptions {
  size_t max_request_bytes = 8192;  // a longer request head gets 431; default 8 KiB
  // A client that has not sent its whole request head this long after connecting is dropped;
  // default 2.
  double request_timeout_seconds = 2;
  // A client that has not taken the whole response this long after it began is dropped;
  // default 10.
  double response_timeout_seconds = 10;
  PageSource page;  // serves GET `/` when set; default none (404)
  // The page's secret: `/` answers only a request whose query carries token=PAGE_TOKEN
  // (compared in constant time), 403 otherwise. Default empty: the page is refused to all.
  std::string page_token;
};

// The HTTP server of --metrics-port, on cpp-httplib: GET /metrics answers the last published
// text (Content-Type text/plain; version=0.0.4) and GET /?token=PAGE_TOKEN the page (text/html)
// when there is one; other paths get 404, other methods on those two 405, a malformed request
// 400. Every request must name this server in its one Host header (127.0.0.1:PORT,
// localhost:PORT, [::1]:PORT or the address it listens on) and, when it has an Origin, come
// from that same origin: anything else gets 403, so that a page of another site (DNS rebinding)
// reads nothing. /metrics needs no token (Prometheus scrapes it on loopback). Each
// connection carries one request and is closed after the response. A request head is read
// whole, within max_request_bytes and request_timeout_seconds, before httplib parses it, so a
// slow or hostile client holds one of httplib's threads for at most the timeouts and never
// makes the server buffer more than the limit.
// Thread-safe: Publish may be called from any thread while the server's threads answer.
class MetricsHttpServer {
 public:
  // Listens on host:port (port 0 picks a free one; read it back with port()). host must be a
  // numeric IPv4 address. InvalidArgument for a bad host or port, Unavailable when the port is
  // taken. clock (not owned) paces the wait for the server thread to listen; it need not
  // outlive Start.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  Clock* clock,
                                                                  MetricsHttpOptions options = {});
  ~MetricsHttpServer();  // stops listening, waits for the server thread

  int port() const { return port_; }
  // Replaces the text that /metrics serves.
  void Publish(std::string body) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Http;  // httplib::Server with the bounded request head (metrics_http_server.cc)

  MetricsHttpServer() = default;
  std::string Published() ABSL_LOCKS_EXCLUDED(mu_);

  int port_ = 0;
  absl::Mutex mu_;
  std::string body_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Http> http_;
  std::thread thread_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MONITOR_METRICS_HTTP_SERVER_H_
