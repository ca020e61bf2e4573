// Ids that peers and files name (clients, regions, workers, experiments, pools, certificate
// names): bounded and plain, so that they are safe as map keys, in messages and as file names.
#ifndef SEXTANT_COMMON_IDS_H_
#define SEXTANT_COMMON_IDS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sextant {

// The longest id a peer may send (client, worker, region, experiment ids; names in certificates).
inline constexpr size_t kMaxIdBytes = 128;

// True when id is 1 to kMaxIdBytes bytes of [A-Za-z0-9._-] starting with a letter or digit (so
// never ".", "..", a hidden file name or something that reads as a flag).
bool IsValidId(absl::string_view id);
// OK, or InvalidArgument naming `field` and why (empty, too long, or the first bad character).
// The offending id is quoted only up to 32 bytes, so a hostile one is not echoed whole.
absl::Status CheckId(absl::string_view field, absl::string_view id);
// A federated client's id, REGION/NAME: each part a valid id, at most kMaxIdBytes in all.
// InvalidArgument as CheckId otherwise.
absl::Status CheckClientId(absl::string_view field, absl::string_view id);

// The id of client `index` (0-based) of `region`: "REGION/INDEX".
std::string ClientId(absl::string_view region, int index);

// An untrusted id for a message: quoted, at most 32 bytes of it, anything unprintable escaped.
std::string QuotedId(absl::string_view id);

// The 64-bit FNV-1a hash of id: the same in every build and on every host (std::hash is not),
// for seeds that participants derive from ids on their own.
uint64_t HashId(absl::string_view id);

}  // namespace sextant

#endif  // SEXTANT_COMMON_IDS_H_
