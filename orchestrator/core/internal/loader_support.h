// What the experiment loader's section loaders share (orchestrator/core/internal/*_loader.cc): the
// positions of values in the document, the reader that collects errors, mappings with a fixed set
// of keys, and the state one load carries from section to section. Not part of the loader's API.
#ifndef SEXTANT_ORCHESTRATOR_CORE_INTERNAL_LOADER_SUPPORT_H_
#define SEXTANT_ORCHESTRATOR_CORE_INTERNAL_LOADER_SUPPORT_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "orchestrator/core/experiment_loader.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant::loader_internal {

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Integer parameter bounds are stored as doubles; beyond 2^53 they would silently round.
inline constexpr int64_t kMaxExactInt = int64_t{1} << 53;

// A 1-based position in the document; {0, 0} when unknown.
struct Pos {
  int line = 0;
  int col = 0;
};

// Where node starts; {0, 0} for an undefined node or one without a mark.
Pos PosOf(const YAML::Node& node);

// A value in the document, the key it sits under (undefined for the root and for list
// elements) and its dotted path. Assignment is deleted because assigning one YAML::Node to
// another rebinds the document node it refers to.
struct Field {
  Field(std::string p, YAML::Node k, YAML::Node v)
      : path(std::move(p)), key(std::move(k)), value(std::move(v)) {}
  Field(const Field&) = default;
  Field& operator=(const Field&) = delete;

  std::string path;
  YAML::Node key;
  YAML::Node value;
};

// The position of f's key, or of its value when it has no key (a list element, the root).
Pos KeyPos(const Field& f);

// The position of f's value; its key's when the value is null, since a null value's mark
// points at whatever token follows it.
Pos ValuePos(const Field& f);

// "parent.key", or "key" when parent is empty.
std::string Join(absl::string_view parent, absl::string_view key);

// How an error names a value: "a mapping", "a list", "no value", or the scalar in quotes
// (cut to 40 characters).
std::string Describe(const YAML::Node& node);

// The allowed key closest in spelling to a misspelt one, or "" when none is close.
absl::string_view Nearest(absl::string_view key, absl::Span<const absl::string_view> allowed);

// True for [A-Za-z_][A-Za-z0-9_]*.
bool IsIdentifier(absl::string_view s);

// `given` resolved against the folder of the experiment file `file`: an absolute path as it
// is, "" as the folder itself ("." when file names none), and a relative path joined to the
// folder lexically (the filesystem is not touched).
std::string WorkingDir(const std::string& file, const std::string& given);

// Collects errors and reads typed values out of Fields. Every reader reports its own error
// and returns nullopt (or an empty vector) when the value has the wrong type or range.
// Not thread-safe; one per load.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  // Records "path: message" (message alone when path is empty) at pos.
  void Error(Pos pos, absl::string_view path, absl::string_view message);
  // Records an error at f's key, or at its value (see KeyPos, ValuePos).
  void KeyError(const Field& f, absl::string_view message);
  void ValueError(const Field& f, absl::string_view message);
  // Every error recorded so far, in the order recorded.
  std::vector<LoadError>& errors() { return errors_; }

  // The entries of a mapping in document order; duplicate and non-scalar keys are reported
  // and left out.
  std::vector<Field> Entries(const Field& f);
  // The elements of a list, each with the path "PATH[i]" and no key.
  std::vector<Field> Elements(const Field& f);

  // A scalar as text.
  std::optional<std::string> String(const Field& f);
  std::optional<std::string> NonEmptyString(const Field& f);
  // A non-empty string that is an id (common/ids.h): such names become file names and travel
  // between hosts. An error at f naming `what` otherwise.
  std::optional<std::string> IdString(const Field& f, const char* what);
  // A finite number.
  std::optional<double> Number(const Field& f);
  // A number > lo (strict) or >= lo.
  std::optional<double> NumberAbove(const Field& f, double lo, bool strict);
  // An integer in [lo, hi]; "4.0" counts as 4, "2.5" does not.
  std::optional<int64_t> Integer(const Field& f, int64_t lo, int64_t hi);
  std::optional<uint64_t> Unsigned(const Field& f);
  std::optional<bool> Bool(const Field& f);
  // A duration ("90s", "10m"; common/duration.h) in seconds.
  std::optional<double> Duration(const Field& f);
  // The index of the value among names.
  std::optional<size_t> Choice(const Field& f, std::span<const absl::string_view> names);

 private:
  std::optional<int64_t> ParseInteger(const Field& f);

  std::string file_;
  std::vector<LoadError> errors_;
};

// One mapping whose keys come from a fixed set; unknown keys are reported with the allowed
// ones (and the closest match, when one is close). Keeps references to r and field.
class Section {
 public:
  Section(Reader& r, const Field& field, const std::vector<absl::string_view>& allowed);

  // False when the field is not a mapping (reported): it has no entries.
  bool ok() const { return ok_; }
  const Field& field() const { return field_; }
  const std::vector<Field>& entries() const { return entries_; }

  // The entry for key, or null.
  const Field* Find(absl::string_view key) const;
  // The entry for key; null, with the missing key reported at the section's own key, when
  // there is none.
  const Field* Require(absl::string_view key) const;

 private:
  Reader& r_;
  const Field& field_;
  bool ok_;
  std::vector<Field> entries_;
};

// Calls set(value) when the key is present and read(field) gives a value.
template <typename T, typename Read, typename Set>
void IfPresent(const Section& s, absl::string_view key, Read read, Set set) {
  if (const Field* f = s.Find(key)) {
    if (std::optional<T> v = read(*f)) set(*v);
  }
}

// Keys one section loader keeps for a check another makes once the whole file is loaded.
// Each is absent (empty) when its key is.
struct KeptFields {
  std::optional<Field> max_cost;       // budget.max_cost
  std::optional<Field> global_region;  // federation.global_region
  std::vector<Field> region_names;     // federation.regions[i].name, in order
  std::vector<Field> parameters;       // parameters.NAME, in order
  std::optional<Field> sampler, scheduler, max_trials, warm_start;  // search.KEY
  std::optional<Field> fidelity_name, fidelity_max;                 // search.fidelity.name and .max
};

// The state of one load, which every section loader fills. Not thread-safe; one per load.
struct LoadContext {
  explicit LoadContext(const std::string& experiment_file)
      : r(experiment_file), file(experiment_file) {}
  LoadContext(const LoadContext&) = delete;
  LoadContext& operator=(const LoadContext&) = delete;

  Reader r;
  std::string file;         // the experiment file, as errors name it
  v1::ExperimentSpec spec;  // the result, section by section
  KeptFields kept;
};

}  // namespace sextant::loader_internal

#endif  // SEXTANT_ORCHESTRATOR_CORE_INTERNAL_LOADER_SUPPORT_H_
