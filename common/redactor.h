#ifndef SEXTANT_COMMON_REDACTOR_H_
#define SEXTANT_COMMON_REDACTOR_H_

#include <map>
#include <string>
#include <vector>

namespace sextant {

// Replaces secret values in text before it is logged, stored as an event or a trial error, or
// shown by `results` and reports. A value is secret when its variable's name contains TOKEN,
// SECRET, PASSWORD, PASSWD, CREDENTIAL or KEY (any case), e.g. WANDB_API_KEY, HF_TOKEN.
// Values shorter than 4 characters are left alone (they would match everywhere).
// Immutable after construction; thread-safe.
class Redactor {
 public:
  static constexpr const char* kMask = "[REDACTED]";

  Redactor() = default;
  // Collects the secret values among name -> value pairs.
  explicit Redactor(const std::map<std::string, std::string>& variables);
  // The secrets of the process environment plus those of extra (e.g. the trial's env).
  static Redactor FromEnvironment(const std::map<std::string, std::string>& extra = {});

  // True when a variable of this name holds a secret.
  static bool IsSecretName(const std::string& name);
  // text with every secret value replaced by kMask.
  std::string Apply(const std::string& text) const;
  bool empty() const { return secrets_.empty(); }

 private:
  std::vector<std::string> secrets_;  // longest first, so that no secret is half-masked
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_REDACTOR_H_
