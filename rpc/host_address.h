#ifndef SEXTANT_RPC_HOST_ADDRESS_H_
#define SEXTANT_RPC_HOST_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace sextant {

// The address a process dials to reach a server listening on `listen` (HOST:PORT, as given to
// the server) that bound `port`: HOST:port, or 127.0.0.1:port when HOST is a wildcard
// (0.0.0.0, [::] or empty), which only a process on the server's own host can use.
std::string DialTarget(const std::string& listen, int port);

// This host's address on the route toward `target` (HOST:PORT; HOST an IP address or a name
// it resolves): the source address the kernel would give a packet to it (none is sent). A
// server that listens there is reachable by whoever reaches `target` from its side of the
// network: on another node of a cluster, that node's address; toward loopback, 127.0.0.1. An
// IPv6 address comes in brackets ("[fd00::2]"). Errors name the target: no port, a name that
// does not resolve, no route.
absl::StatusOr<std::string> LocalAddressToward(const std::string& target);

// A server's listen address as given: HOST:PORT unchanged, or with HOST `auto`
// ("auto:PORT") this host's address toward `upstream` (LocalAddressToward) and PORT, so that
// a server started on any node of a cluster listens where its peers reach it.
absl::StatusOr<std::string> ResolveListen(const std::string& listen, const std::string& upstream);

}  // namespace sextant

#endif  // SEXTANT_RPC_HOST_ADDRESS_H_
