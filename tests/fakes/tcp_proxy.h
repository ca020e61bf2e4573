#ifndef SEXTANT_TESTS_FAKES_TCP_PROXY_H_
#define SEXTANT_TESTS_FAKES_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace sextant::testing {

// A userspace TCP relay on 127.0.0.1 for fault injection between a worker and the
// orchestrator. Cut() models a network partition: no byte moves in either direction and new
// connections wait in the backlog, while the sockets stay open (as TCP's do across a short
// outage); Heal() lets the held bytes through, late. DelayMs adds a fixed latency to every
// chunk forwarded. Thread-safe; the relay runs on its own thread.
class TcpProxy {
 public:
  // Listens on 127.0.0.1:0 and relays each accepted connection to 127.0.0.1:upstream_port.
  // Returns Internal when the socket cannot be set up.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int upstream_port);
  ~TcpProxy();  // stops the relay and closes every connection

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:PORT"
  void Cut() { cut_.store(true); }
  void Heal() { cut_.store(false); }
  // Delay before each forwarded chunk, in milliseconds (0: none; the default).
  void SetDelayMs(int ms) { delay_ms_.store(ms); }
  // Bytes relayed so far, both directions together.
  int64_t bytes_relayed() const { return bytes_.load(); }

 private:
  TcpProxy(int listen_fd, int port, int upstream_port)
      : listen_fd_(listen_fd), port_(port), upstream_port_(upstream_port) {}
  void Loop();

  int listen_fd_;
  int port_;
  int upstream_port_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> delay_ms_{0};
  std::atomic<int64_t> bytes_{0};
  std::thread thread_;
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_FAKES_TCP_PROXY_H_
