#ifndef SEXTANT_TESTS_ORCHESTRATOR_NET_NAMESPACES_H_
#define SEXTANT_TESTS_ORCHESTRATOR_NET_NAMESPACES_H_

#include <string>
#include <vector>

namespace sextant::testing {

// Linux network namespaces private to one test, standing for hosts: regions of a deployment,
// nodes of a cluster. Their names and links carry this process's pid, and addresses come from
// a random 10.B.0.0/16. Everything is removed in the destructor (what still runs inside is
// killed first), and what a test process that no longer exists left is removed on creation.
// Needs root and `ip` (iproute2). Not thread-safe.
class NetNamespaces {
 public:
  enum class Wiring {
    // Each namespace joined to the host by a veth link of its own: HostEnd(i) = 10.B.i.1 on
    // the host's end, Inside(i) = 10.B.i.2 inside. Nothing routes between namespaces.
    kLinks,
    // Every namespace on one bridge, as the nodes of one network, the host on it too: the
    // host is 10.B.0.1 (HostEnd(i) for every i), namespace i is Inside(i) = 10.B.0.(i+2), and
    // the namespaces reach each other and the host. The bridge lives in a namespace of its
    // own, so that no packet filter of the host's stands between the nodes.
    kBridge,
  };

  NetNamespaces() = default;
  ~NetNamespaces();
  NetNamespaces(const NetNamespaces&) = delete;
  NetNamespaces& operator=(const NetNamespaces&) = delete;

  // Creates namespaces 0..count-1, each with loopback up. Empty when created; otherwise why
  // namespaces cannot be used here (the caller skips its test with that reason).
  std::string Create(int count, Wiring wiring);

  std::string Namespace(int i) const;  // its name for `ip netns`
  std::string Path(int i) const;       // /var/run/netns/NAME
  std::string HostEnd(int i) const;    // the host's address toward namespace i
  std::string Inside(int i) const;     // namespace i's address
  // argv prefixed to run inside namespace i, as `ip netns exec` runs it: with its own /sys and
  // /etc/netns/NAME/* mounted over /etc.
  std::vector<std::string> In(int i, std::vector<std::string> argv) const;
  // argv prefixed to run with namespace i's network only (nsenter --net), the host's mounts
  // kept: a daemon that needs the host's /sys/fs/cgroup (slurmd) runs there.
  std::vector<std::string> NetworkOnly(int i, std::vector<std::string> argv) const;

 private:
  std::string tag_, subnet_;
  Wiring wiring_ = Wiring::kLinks;
  std::vector<std::string> created_;
  std::string switch_;  // kBridge: the namespace holding the bridge
  bool netns_was_mounted_ = true;
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_ORCHESTRATOR_NET_NAMESPACES_H_
