#ifndef SEXTANT_TESTS_FAKES_TCP_PROXY_H_
#define SEXTANT_TESTS_FAKES_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace sextant::testing {

// Where a TcpProxy listens and relays to, and the link it emulates.
struct TcpProxyOptions {
  std::string listen_host = "127.0.0.1";    // an IPv4 address; default loopback
  int listen_port = 0;                      // 0 (the default) picks one
  std::string upstream_host = "127.0.0.1";  // an IPv4 address; default loopback
  int upstream_port = 0;                    // required
  // A network namespace (e.g. /var/run/netns/NAME) to open upstream connections in, while the
  // listening socket stays in the caller's. Default empty: the caller's namespace.
  std::string upstream_netns;
  // One-way latency added to every chunk in each direction, pipelined (bytes keep flowing
  // while earlier ones wait). Default 0.
  int latency_ms = 0;
  // Probability that a segment (1448 bytes) is lost on the link. As over TCP, a loss stalls
  // the stream: the chunk and everything behind it wait retransmit_ms more. Default 0.
  double loss = 0;
  int retransmit_ms = 200;  // Linux's minimum RTO; default 200
  uint64_t seed = 1;        // draws the losses; default 1
};

// A userspace TCP relay for fault injection between a worker and the orchestrator, or between
// regions. Cut() models a network partition: no byte moves in either direction and new
// connections wait in the backlog, while the sockets stay open (as TCP's do across a short
// outage); Heal() lets the held bytes through, late. DelayMs adds a fixed latency to every
// chunk forwarded; TcpProxyOptions emulate a link's latency and loss instead.
// Thread-safe; the relay runs on its own thread.
class TcpProxy {
 public:
  // Listens on 127.0.0.1:0 and relays each accepted connection to 127.0.0.1:upstream_port.
  // Returns Internal when the socket cannot be set up.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int upstream_port);
  // Listens and relays as options say. InvalidArgument for a bad address, NotFound for a
  // missing namespace, Internal when a socket or the namespace switch fails.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const TcpProxyOptions& options);
  ~TcpProxy();  // stops the relay and closes every connection

  int port() const { return port_; }
  std::string address() const;  // "LISTEN_HOST:PORT"
  void Cut() { cut_.store(true); }
  void Heal() { cut_.store(false); }
  // Delay before each forwarded chunk, in milliseconds (0: none; the default).
  void SetDelayMs(int ms) { delay_ms_.store(ms); }
  // Bytes relayed so far, both directions together.
  int64_t bytes_relayed() const { return bytes_.load(); }
  // Connections accepted and segments lost (TcpProxyOptions::loss) so far.
  int64_t connections() const { return connections_.load(); }
  int64_t segments_lost() const { return lost_.load(); }

 private:
  TcpProxy(int listen_fd, int port, TcpProxyOptions options)
      : listen_fd_(listen_fd), port_(port), options_(std::move(options)) {}
  void Loop();

  int listen_fd_;
  int port_;
  TcpProxyOptions options_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> delay_ms_{0};
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> lost_{0};
  std::thread thread_;
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_FAKES_TCP_PROXY_H_
