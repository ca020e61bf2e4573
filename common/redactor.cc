#include "common/redactor.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

extern char** environ;

namespace sextant {

Redactor::Redactor(const std::map<std::string, std::string>& variables) {
  for (const auto& [name, value] : variables) {
    if (IsSecretName(name) && value.size() >= 4) secrets_.push_back(value);
  }
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  secrets_.erase(std::unique(secrets_.begin(), secrets_.end()), secrets_.end());
}

Redactor Redactor::FromEnvironment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> all = extra;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    all.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return Redactor(all);
}

bool Redactor::IsSecretName(const std::string& name) {
  std::string upper = absl::AsciiStrToUpper(name);
  for (const char* word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string Redactor::Apply(const std::string& text) const {
  if (secrets_.empty()) return text;
  std::string out = text;
  for (const std::string& s : secrets_) absl::StrReplaceAll({{s, kMask}}, &out);
  return out;
}

size_t Redactor::PartialSecretAtEnd(std::string_view text) const {
  size_t longest = 0;
  for (const std::string& s : secrets_) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > longest; --n) {
      if (text.substr(text.size() - n) == std::string_view(s).substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

std::string StreamRedactor::Feed(std::string_view data) {
  if (redactor_ == nullptr || redactor_->empty()) return std::string(data);
  pending_.append(data);
  std::string masked = redactor_->Apply(pending_);
  const size_t keep = redactor_->PartialSecretAtEnd(masked);
  pending_ = masked.substr(masked.size() - keep);
  masked.resize(masked.size() - keep);
  return masked;
}

std::string StreamRedactor::Finish() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return redactor_ == nullptr ? rest : redactor_->Apply(rest);
}

}  // namespace sextant
