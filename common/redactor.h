#ifndef SEXTANT_COMMON_REDACTOR_H_
#define SEXTANT_COMMON_REDACTOR_H_

#include <map>
#include <string>
#include <string_view>
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
  // The length of the longest end of text that is the beginning of a secret (and shorter than
  // it): what may still become a secret when more text follows. 0 when none.
  size_t PartialSecretAtEnd(std::string_view text) const;

 private:
  std::vector<std::string> secrets_;  // longest first, so that no secret is half-masked
};

// Masks the secrets of a byte stream that arrives in pieces (a trial's output, on its way to a
// log file): a secret split across two pieces is masked all the same. Holds back at most the
// longest secret's length, and only while the text could still become one.
// Not thread-safe; one per stream.
class StreamRedactor {
 public:
  // redactor must outlive this.
  explicit StreamRedactor(const Redactor* redactor) : redactor_(redactor) {}

  // What may be written now of everything fed so far, masked; the end that could begin a
  // secret is kept for the next call.
  std::string Feed(std::string_view data);
  // What is still held back, masked. Call once at the end of the stream.
  std::string Finish();

 private:
  const Redactor* redactor_;
  std::string pending_;
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_REDACTOR_H_
