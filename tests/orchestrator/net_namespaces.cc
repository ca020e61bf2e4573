#include "tests/orchestrator/net_namespaces.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/orchestrator/test_util.h"

namespace sextant::testing {
namespace {

CommandOutput Sh(const std::string& command) { return RunProcess({"/bin/sh", "-c", command}, 30); }

// Kills what still runs inside (only a test's processes live there), then removes the
// namespace (its veth goes with it) and its /etc/netns folder.
void Remove(const std::string& ns) {
  Sh(absl::StrCat("ip netns pids ", ns, " 2>/dev/null | xargs -r kill -9; ip netns del ", ns,
                  " 2>/dev/null; rm -rf /etc/netns/", ns));
}

// Namespaces sxt-PID-X of test processes that are gone.
void RemoveStale() {
  auto list = Sh("ip netns list 2>/dev/null | cut -d' ' -f1");
  for (absl::string_view line : absl::StrSplit(list.out, '\n')) {
    std::vector<std::string> parts = absl::StrSplit(line, '-');
    if (parts.size() != 3 || parts[0] != "sxt") continue;
    if (!std::filesystem::exists("/proc/" + parts[1])) Remove(std::string(line));
  }
}

}  // namespace

std::string NetNamespaces::Create(int count, Wiring wiring) {
  if (geteuid() != 0) return "network namespaces need root";
  if (Sh("command -v ip").exit_code != 0) return "no `ip` (iproute2; scripts/install-deps)";
  RemoveStale();
  // The first `ip netns add` bind-mounts /run/netns onto itself; if this test makes that
  // mount, it undoes it at the end when no namespace is left (a chroot must be left unmountable).
  netns_was_mounted_ = Sh("mountpoint -q /run/netns").exit_code == 0;
  std::mt19937 rng(static_cast<unsigned>(getpid()) ^ std::random_device{}());
  tag_ = absl::StrCat(getpid());
  subnet_ = absl::StrCat("10.", 100 + rng() % 150);
  wiring_ = wiring;
  if (wiring == Wiring::kBridge) {
    // The bridge sits in a namespace of its own (sxt-PID-net), whose empty packet filter passes
    // what the host's might not; the host joins it by one more veth link.
    switch_ = absl::StrCat("sxt-", tag_, "-net");
    const std::string host_end = absl::StrCat("sx", tag_, "hs"),
                      port = absl::StrCat("sx", tag_, "ps");
    auto r = Sh(absl::StrCat(
        "set -e; ip netns add ", switch_, "; ip -n ", switch_, " link set lo up; ip -n ", switch_,
        " link add br0 type bridge; ip -n ", switch_, " link set br0 up; ip link add ", host_end,
        " type veth peer name ", port, "; ip link set ", port, " netns ", switch_, "; ip -n ",
        switch_, " link set ", port, " master br0; ip -n ", switch_, " link set ", port,
        " up; ip addr add ", HostEnd(0), "/24 dev ", host_end, "; ip link set ", host_end, " up"));
    created_.push_back(switch_);
    if (r.exit_code != 0) return absl::StrCat("cannot build the bridge's namespace: ", r.err);
  }
  for (int i = 0; i < count; ++i) {
    const std::string ns = Namespace(i), host_end = absl::StrCat("sx", tag_, "h", i),
                      inside = absl::StrCat("sx", tag_, "n", i);
    const std::string outer_end =
        wiring == Wiring::kBridge
            ? absl::StrCat("ip link set ", host_end, " netns ", switch_, "; ip -n ", switch_,
                           " link set ", host_end, " master br0; ip -n ", switch_, " link set ",
                           host_end, " up")
            : absl::StrCat("ip addr add ", HostEnd(i), "/30 dev ", host_end, "; ip link set ",
                           host_end, " up");
    const int prefix = wiring == Wiring::kBridge ? 24 : 30;
    auto r = Sh(absl::StrCat("set -e; ip netns add ", ns, "; ip -n ", ns,
                             " link set lo up; ip link add ", host_end, " type veth peer name ",
                             inside, "; ip link set ", inside, " netns ", ns, "; ", outer_end,
                             "; ip -n ", ns, " addr add ", Inside(i), "/", prefix, " dev ", inside,
                             "; ip -n ", ns, " link set ", inside, " up"));
    created_.push_back(ns);
    if (r.exit_code != 0) return absl::StrCat("cannot build namespace ", ns, ": ", r.err);
  }
  return "";
}

NetNamespaces::~NetNamespaces() {
  for (const std::string& ns : created_) Remove(ns);
  if (!created_.empty() && !netns_was_mounted_ && Sh("ip netns list").out.empty()) {
    Sh("umount /run/netns 2>/dev/null");
  }
}

std::string NetNamespaces::Namespace(int i) const { return absl::StrCat("sxt-", tag_, "-", i); }

std::string NetNamespaces::Path(int i) const { return "/var/run/netns/" + Namespace(i); }

std::string NetNamespaces::HostEnd(int i) const {
  return wiring_ == Wiring::kBridge ? absl::StrCat(subnet_, ".0.1")
                                    : absl::StrCat(subnet_, ".", i, ".1");
}

std::string NetNamespaces::Inside(int i) const {
  return wiring_ == Wiring::kBridge ? absl::StrCat(subnet_, ".0.", i + 2)
                                    : absl::StrCat(subnet_, ".", i, ".2");
}

std::vector<std::string> NetNamespaces::In(int i, std::vector<std::string> argv) const {
  argv.insert(argv.begin(), {"ip", "netns", "exec", Namespace(i)});
  return argv;
}

std::vector<std::string> NetNamespaces::NetworkOnly(int i, std::vector<std::string> argv) const {
  argv.insert(argv.begin(), {"nsenter", absl::StrCat("--net=", Path(i)), "--"});
  return argv;
}

}  // namespace sextant::testing
