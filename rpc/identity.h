// Who a peer is: the role, region and name carried in its certificate (ids: common/ids.h).
#ifndef SEXTANT_RPC_IDENTITY_H_
#define SEXTANT_RPC_IDENTITY_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/ids.h"

namespace sextant {

// What a certificate or bearer token speaks for.
enum class Role { kWorker, kClient, kAggregator, kAdmin };

// "worker", "client", "aggregator" or "admin".
const char* RoleName(Role role);
// The role named `name`; nullopt for anything else.
std::optional<Role> ParseRole(absl::string_view name);

// The identity a certificate is issued for, carried as the URI subjectAltName
// sextant://ROLE/REGION/NAME (REGION is "-" when the role has none, as for admin or a worker
// outside any region).
struct PeerIdentity {
  Role role = Role::kWorker;
  std::string region;  // empty: none
  std::string name;

  // The federated client id this identity may speak for: REGION/NAME (role client only).
  std::string ClientId() const { return region + "/" + name; }
  bool operator==(const PeerIdentity&) const = default;
};

// sextant://ROLE/REGION/NAME.
std::string IdentityUri(const PeerIdentity& identity);
// The identity in a sextant:// URI. InvalidArgument when it is not one, names an unknown role,
// or its region or name is not a valid id.
absl::StatusOr<PeerIdentity> ParseIdentityUri(absl::string_view uri);

// The identity in a PEM certificate's sextant:// URI subjectAltName. NotFound when the
// certificate carries none (an older certificate); InvalidArgument when it does not parse or
// carries more than one.
absl::StatusOr<PeerIdentity> IdentityFromCertificate(const std::string& cert_pem);

}  // namespace sextant

#endif  // SEXTANT_RPC_IDENTITY_H_
