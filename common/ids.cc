#include "common/ids.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

bool IdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string ClientId(absl::string_view region, int index) {
  return absl::StrCat(region, "/", index);
}

std::string QuotedId(absl::string_view id) {
  std::string out = absl::CHexEscape(id.substr(0, 32));
  if (id.size() > 32) out += "...";
  return absl::StrCat("'", out, "'");
}

bool IsValidId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes ||
      !absl::ascii_isalnum(static_cast<unsigned char>(id[0]))) {
    return false;
  }
  for (char c : id) {
    if (!IdChar(c)) return false;
  }
  return true;
}

absl::Status CheckId(absl::string_view field, absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", id.size(), " bytes; at most ", kMaxIdBytes, " allowed"));
  }
  if (!absl::ascii_isalnum(static_cast<unsigned char>(id[0]))) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", QuotedId(id), " must start with a letter or digit"));
  }
  for (char c : id) {
    if (!IdChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(field, " ", QuotedId(id), " holds '",
                                                     absl::CHexEscape(std::string(1, c)),
                                                     "'; ids are [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckClientId(absl::string_view field, absl::string_view id) {
  if (id.size() > kMaxIdBytes) return CheckId(field, id);
  const size_t slash = id.find('/');
  if (slash == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", QuotedId(id), " is not REGION/NAME"));
  }
  if (absl::Status s = CheckId(absl::StrCat(field, "'s region"), id.substr(0, slash)); !s.ok()) {
    return s;
  }
  return CheckId(absl::StrCat(field, "'s name"), id.substr(slash + 1));
}

uint64_t HashId(absl::string_view id) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace sextant
