#include "orchestrator/core/experiment_loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <system_error>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "aggregator/federation_plan.h"
#include "orchestrator/core/federated_trial_params.h"
#include "common/duration.h"
#include "common/ids.h"
#include "orchestrator/core/trial_command.h"
#include "orchestrator/core/warm_start.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/param_expression.h"
#include "tensors/safetensors.h"

namespace sextant {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Integer parameter bounds are stored as doubles; beyond 2^53 they would silently round.
constexpr int64_t kMaxExactInt = int64_t{1} << 53;

struct Pos {
  int line = 0;
  int col = 0;
};

Pos PosOf(const YAML::Node& node) {
  if (!node.IsDefined()) return {};
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0 || mark.column < 0) return {};
  return {mark.line + 1, mark.column + 1};
}

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

Pos KeyPos(const Field& f) {
  const Pos p = PosOf(f.key);
  return p.line > 0 ? p : PosOf(f.value);
}

// A null value's mark points at whatever token follows it, so errors about it go to its key.
Pos ValuePos(const Field& f) {
  if (!f.value.IsNull()) {
    const Pos p = PosOf(f.value);
    if (p.line > 0) return p;
  }
  return KeyPos(f);
}

std::string Join(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      return absl::StrCat("'", s.size() > 40 ? s.substr(0, 40) + "..." : s, "'");
    }
    default:
      return "no value";
  }
}

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The allowed key closest to a misspelt one, or "" when none is close.
absl::string_view Nearest(absl::string_view key, absl::Span<const absl::string_view> allowed) {
  absl::string_view best;
  int best_distance = key.size() >= 5 ? 2 : 1;
  for (absl::string_view a : allowed) {
    const int d = EditDistance(key, a);
    if (d <= best_distance && (best.empty() || d < best_distance)) {
      best = a;
      best_distance = d;
    }
  }
  return best;
}

// What users of other tuners write for our keys. Spelling distance alone maps Optuna's `low`
// to `log`, which is wrong in a way that costs more than no suggestion at all.
// The first entry for a key whose translation is allowed where it was written wins.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 12> kForeignKeys = {{
    {"low", "min"},                 // Optuna
    {"high", "max"},                // Optuna
    {"lower", "min"},               // Ray Tune
    {"upper", "max"},               // Ray Tune
    {"choices", "values"},          // Optuna
    {"q", "step"},                  // Ray Tune, Hyperopt
    {"direction", "goal"},          // Optuna, inside objective:
    {"direction", "objective"},     // Optuna, at the top level
    {"directions", "objectives"},   // Optuna
    {"n_trials", "max_trials"},     // Optuna
    {"n_jobs", "max_concurrent"},   // Optuna
    {"num_samples", "max_trials"},  // Ray Tune
}};

// Keys that other tuners write at the top level and Sextant keeps in a section.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 6> kSectionKeys = {{
    {"n_trials", "search.max_trials"},  // Optuna
    {"max_trials", "search.max_trials"},
    {"n_jobs", "search.max_concurrent"},  // Optuna
    {"max_concurrent", "search.max_concurrent"},
    {"sampler", "search.sampler"},
    {"seed", "search.seed"},
}};

// Where a top-level `key` belongs ("search.max_trials"), or "".
absl::string_view SectionOf(absl::string_view key) {
  for (const auto& [foreign, where] : kSectionKeys) {
    if (key == foreign) return where;
  }
  return "";
}

// How Sextant writes a value other tuners use (Optuna's and Hyperopt's distribution names for a
// parameter's type), or "".
absl::string_view ForeignValue(absl::string_view value) {
  static constexpr std::array<std::pair<absl::string_view, absl::string_view>, 6> kValues = {{
      {"loguniform", "type: float with log: true"},
      {"uniform", "type: float"},
      {"discrete_uniform", "type: float with step"},
      {"int_uniform", "type: int"},
      {"randint", "type: int"},
      {"choice", "type: categorical"},
  }};
  for (const auto& [foreign, ours] : kValues) {
    if (value == foreign) return ours;
  }
  return "";
}

// The allowed key another tuner calls `key`, else the allowed key closest in spelling, else "".
absl::string_view Suggestion(absl::string_view key, absl::Span<const absl::string_view> allowed) {
  for (const auto& [foreign, ours] : kForeignKeys) {
    if (key == foreign && std::find(allowed.begin(), allowed.end(), ours) != allowed.end()) {
      return ours;
    }
  }
  return Nearest(key, allowed);
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsExperimentName(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string FormatInt(int64_t v) { return absl::StrCat(v); }

// Collects errors and reads typed values out of Fields. Every reader reports its own error
// and returns nullopt (or an empty vector) when the value has the wrong type or range.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  void Error(Pos pos, absl::string_view path, absl::string_view message) {
    errors_.push_back({file_, pos.line, pos.col,
                       path.empty() ? std::string(message) : absl::StrCat(path, ": ", message)});
  }
  void KeyError(const Field& f, absl::string_view message) { Error(KeyPos(f), f.path, message); }
  void ValueError(const Field& f, absl::string_view message) {
    Error(ValuePos(f), f.path, message);
  }
  std::vector<LoadError>& errors() { return errors_; }

  // The entries of a mapping in document order; duplicate and non-scalar keys are reported
  // and left out.
  std::vector<Field> Entries(const Field& f) {
    std::vector<Field> out;
    if (!f.value.IsMap()) {
      ValueError(f, absl::StrCat("expected a mapping, got ", Describe(f.value)));
      return out;
    }
    std::set<std::string> seen;
    for (const auto& kv : f.value) {
      const YAML::Node& key = kv.first;
      if (!key.IsScalar()) {
        Error(PosOf(key), f.path, "keys must be plain strings");
        continue;
      }
      Field entry(Join(f.path, key.Scalar()), key, kv.second);
      if (!seen.insert(key.Scalar()).second) {
        KeyError(entry, "duplicate key");
        continue;
      }
      out.push_back(entry);
    }
    return out;
  }

  std::vector<Field> Elements(const Field& f) {
    std::vector<Field> out;
    if (!f.value.IsSequence()) {
      ValueError(f, absl::StrCat("expected a list, got ", Describe(f.value)));
      return out;
    }
    for (size_t i = 0; i < f.value.size(); ++i) {
      out.emplace_back(absl::StrCat(f.path, "[", i, "]"), YAML::Node(), f.value[i]);
    }
    return out;
  }

  std::optional<std::string> String(const Field& f) {
    if (f.value.IsScalar()) return f.value.Scalar();
    ValueError(f, absl::StrCat("expected a string, got ", Describe(f.value)));
    return std::nullopt;
  }

  std::optional<std::string> NonEmptyString(const Field& f) {
    std::optional<std::string> s = String(f);
    if (s && s->empty()) {
      ValueError(f, "must not be empty");
      return std::nullopt;
    }
    return s;
  }

  std::optional<double> Number(const Field& f) {
    double v = 0;
    if (f.value.IsScalar() && absl::SimpleAtod(f.value.Scalar(), &v) && std::isfinite(v)) {
      return v;
    }
    ValueError(f, absl::StrCat("expected a number, got ", Describe(f.value)));
    return std::nullopt;
  }

  // A number > lo (strict) or >= lo.
  std::optional<double> NumberAbove(const Field& f, double lo, bool strict) {
    std::optional<double> v = Number(f);
    if (v && (strict ? !(*v > lo) : !(*v >= lo))) {
      ValueError(f,
                 absl::StrCat("must be ", strict ? "> " : ">= ", lo, ", got ", f.value.Scalar()));
      return std::nullopt;
    }
    return v;
  }

  // An integer in [lo, hi]; "4.0" counts as 4, "2.5" does not.
  std::optional<int64_t> Integer(const Field& f, int64_t lo, int64_t hi) {
    std::optional<int64_t> v = ParseInteger(f);
    if (!v) return std::nullopt;
    if (*v < lo || *v > hi) {
      ValueError(f, *v < lo ? absl::StrCat("must be >= ", lo, ", got ", *v)
                            : absl::StrCat("must be <= ", hi, ", got ", *v));
      return std::nullopt;
    }
    return v;
  }

  std::optional<uint64_t> Unsigned(const Field& f) {
    uint64_t v = 0;
    if (f.value.IsScalar() && absl::SimpleAtoi(f.value.Scalar(), &v)) return v;
    ValueError(f, absl::StrCat("expected a non-negative integer, got ", Describe(f.value)));
    return std::nullopt;
  }

  std::optional<bool> Bool(const Field& f) {
    bool v = false;
    if (f.value.IsScalar() && YAML::convert<bool>::decode(f.value, v)) return v;
    ValueError(f, absl::StrCat("expected true or false, got ", Describe(f.value)));
    return std::nullopt;
  }

  std::optional<double> Duration(const Field& f) {
    std::optional<std::string> s = String(f);
    if (!s) return std::nullopt;
    absl::StatusOr<double> seconds = ParseDurationSeconds(*s);
    if (!seconds.ok()) {
      ValueError(f, seconds.status().message());
      return std::nullopt;
    }
    return *seconds;
  }

  // The index of the value among names.
  std::optional<size_t> Choice(const Field& f, std::span<const absl::string_view> names) {
    std::optional<std::string> s = String(f);
    if (!s) return std::nullopt;
    for (size_t i = 0; i < names.size(); ++i) {
      if (*s == names[i]) return i;
    }
    std::string message =
        absl::StrCat("unknown ", f.key.IsDefined() && f.key.IsScalar() ? f.key.Scalar() : "value",
                     " '", *s, "'; expected one of ", absl::StrJoin(names, ", "));
    if (absl::string_view ours = ForeignValue(*s); !ours.empty()) {
      absl::StrAppend(&message, " (for '", *s, "' write ", ours, ")");
    }
    ValueError(f, message);
    return std::nullopt;
  }

 private:
  std::optional<int64_t> ParseInteger(const Field& f) {
    if (f.value.IsScalar()) {
      int64_t i = 0;
      if (absl::SimpleAtoi(f.value.Scalar(), &i)) return i;
      double d = 0;
      if (absl::SimpleAtod(f.value.Scalar(), &d) && std::isfinite(d)) {
        if (d == std::floor(d) && std::fabs(d) <= static_cast<double>(kMaxExactInt)) {
          return static_cast<int64_t>(d);
        }
        ValueError(f, absl::StrCat("must be an integer, got ", f.value.Scalar()));
        return std::nullopt;
      }
    }
    ValueError(f, absl::StrCat("expected an integer, got ", Describe(f.value)));
    return std::nullopt;
  }

  std::string file_;
  std::vector<LoadError> errors_;
};

// One mapping whose keys come from a fixed set; unknown keys are reported with the allowed
// ones (and the closest match, when one is close).
class Section {
 public:
  Section(Reader& r, const Field& field, const std::vector<absl::string_view>& allowed)
      : r_(r), field_(field), ok_(field.value.IsMap()), entries_(r.Entries(field)) {
    for (const Field& e : entries_) {
      const std::string& key = e.key.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string message =
          absl::StrCat("unknown key; allowed keys: ", absl::StrJoin(allowed, ", "));
      if (absl::string_view where = SectionOf(key); !where.empty() && field_.path.empty()) {
        absl::StrAppend(&message, " (did you mean ", where, "? it belongs under ",
                        where.substr(0, where.find('.')), ":)");
      } else if (absl::string_view near = Suggestion(key, allowed); !near.empty()) {
        absl::StrAppend(&message, " (did you mean '", near, "'?)");
      }
      r_.KeyError(e, message);
    }
  }

  bool ok() const { return ok_; }
  const Field& field() const { return field_; }
  const std::vector<Field>& entries() const { return entries_; }

  const Field* Find(absl::string_view key) const {
    for (const Field& e : entries_) {
      if (e.key.Scalar() == key) return &e;
    }
    return nullptr;
  }

  // Reports the missing key at the section's own key.
  const Field* Require(absl::string_view key) const {
    const Field* f = Find(key);
    if (f == nullptr && ok_)
      r_.Error(KeyPos(field_), Join(field_.path, key), "required key is missing");
    return f;
  }

 private:
  Reader& r_;
  const Field& field_;
  bool ok_;
  std::vector<Field> entries_;
};

constexpr std::array<absl::string_view, 3> kParamTypes = {"float", "int", "categorical"};
constexpr std::array<absl::string_view, 2> kGoals = {"minimize", "maximize"};
constexpr std::array<absl::string_view, 6> kSamplers = {"random",   "grid", "sobol",
                                                        "bayesian", "tpe",  "nsga2"};
constexpr std::array<absl::string_view, 2> kAshaModes = {"promotion", "stopping"};
constexpr std::array<absl::string_view, 2> kSearchModes = {"commands", "ask_tell"};
constexpr std::array<absl::string_view, 5> kSchedulers = {"none", "asha", "hyperband", "bohb",
                                                          "median"};
constexpr std::array<absl::string_view, 4> kProviders = {"local", "slurm", "simulated", "static"};
constexpr std::array<absl::string_view, 3> kMarkets = {"spot", "on_demand", "reserved"};
constexpr std::array<absl::string_view, 3> kPoolHosts = {"any", "clients", "aggregator"};
// A pool's own provider (resources.provider's values but simulated, which runs every pool).
constexpr std::array<absl::string_view, 3> kPoolProviders = {"local", "slurm", "static"};
constexpr std::array<absl::string_view, 5> kAggregations = {"fedavg", "median", "trimmed_mean",
                                                            "krum", "multi_krum"};
constexpr std::array<absl::string_view, 5> kServerOptimizers = {"fedavg", "fedavgm", "fedadam",
                                                                "fedyogi", "fedadagrad"};
constexpr std::array<absl::string_view, 3> kPartitions = {"iid", "dirichlet", "shards"};
constexpr std::array<absl::string_view, 3> kUpdateCompressions = {"none", "fp16", "int8"};
constexpr std::array<absl::string_view, 2> kFederationModes = {"sync", "buffered"};
constexpr std::array<absl::string_view, 2> kStalenessWeightings = {"polynomial", "constant"};
constexpr std::array<absl::string_view, 3> kClientSelections = {"random", "fastest",
                                                                "power_of_choice"};
constexpr std::array<absl::string_view, 2> kFederatedData = {"fashion-mnist", "own"};
constexpr std::array<absl::string_view, 2> kDpNoise = {"central", "distributed"};

// A `when:` block waiting for every parameter to be known.
struct PendingWhen {
  PendingWhen(int i, const Field& f) : param(i), field(f) {}
  int param;
  Field field;
};

// A condition edge from one parameter to another, kept to look for cycles.
struct ConditionEdge {
  int from;
  int to;
  Pos pos;
  std::string path;
};

// Fills an ExperimentSpec section by section. Not thread-safe; one per load.
// Walks the documents of a YAML text without building nodes, to find where yaml-cpp 0.7 stops
// making progress: on some malformed input (",&a [*a]") its LoadAll yields empty documents
// forever without consuming the offending character.
class DocumentProbe final : public YAML::EventHandler {
 public:
  // True when this document starts where the previous one did (the parser is stuck there).
  bool stuck() const { return stuck_; }
  const YAML::Mark& start() const { return start_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    stuck_ = started_ && mark.pos == start_.pos;
    started_ = true;
    start_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false, stuck_ = false;
  YAML::Mark start_;
};

// Error when yaml-cpp would loop on text (see DocumentProbe); its own exceptions pass through.
std::optional<YAML::Mark> StuckAt(const std::string& text) {
  std::stringstream in(text);
  YAML::Parser parser(in);
  DocumentProbe probe;
  while (parser.HandleNextDocument(probe)) {
    if (probe.stuck()) return probe.start();
  }
  return std::nullopt;
}

class Loader {
 public:
  explicit Loader(const std::string& file) : r_(file), file_(file) {}

  LoadResult Run(const std::string& yaml);

 private:
  void LoadRoot(const Field& root);
  void LoadName(const Section& root);
  void LoadObjective(const Section& root);
  void LoadOneObjective(const Field& f, v1::Objective* objective, bool with_reference);
  void LoadObjectives(const Field& f);
  void LoadConstraints(const Field& f);
  void CheckObjectivesAgainstSearch(const Section& root);
  void LoadParameters(const Section& root, bool may_be_empty);
  void LoadParameter(const Field& f, std::vector<PendingWhen>& whens);
  void LoadRange(const Section& s, v1::Parameter* p, bool integral);
  void LoadStep(const Field& f, v1::Parameter* p, bool integral);
  void LoadCategorical(const Section& s, v1::Parameter* p);
  void LoadConditions(const std::vector<PendingWhen>& whens);
  std::optional<std::string> ConditionValue(const v1::Parameter& target, const Field& f);
  void CheckConditionCycles(const std::vector<ConditionEdge>& edges);
  void LoadSearch(const Section& root);
  // search.mode and search.lease.
  void LoadSearchMode(const Section& s, v1::Search* search);
  // search.enqueue and search.warm_start.
  void LoadEnqueue(const Field& f, v1::Search* search);
  std::optional<ParamValue> EnqueuedValue(const ParamSpec& spec, const Field& f);
  void LoadWarmStart(const Field& f, v1::Search* search);
  void LoadAskTellTrial(const Field& f, v1::TrialSpec* trial);
  void CheckAskTell(const Section& root);
  void LoadFidelity(const Field& f, v1::Fidelity* fidelity);
  void LoadTrial(const Section& root);
  void LoadCommand(const Field& f, v1::TrialSpec* trial);
  void LoadBuiltin(const Field& f, v1::BuiltinTrainer* builtin);
  void LoadStringMap(const Field& f, bool env_names,
                     google::protobuf::Map<std::string, std::string>* out);
  void CheckReferences(const Field& f, const std::string& text);
  std::string WorkingDir(const std::string& given) const;
  void LoadBudget(const Section& root);
  void LoadStudyPrivacy(const Field& f);
  void CheckStudyPrivacy();
  void LoadResources(const Section& root);
  void LoadPool(const Field& f, std::set<std::string>& names, v1::Pool* pool);
  void LoadResourceOptions(const Section& s, v1::Resources* resources);
  void LoadSimulate(const Field& f);
  void LoadTimeExpression(const Field& f, v1::Simulation* sim);
  void CheckPoolsAgainstCatalog(const Section& root);
  void CheckPoolsHoldOneTrial(const Section& root, const FederatedPlacement& placement);
  void CheckFederatedPlacement(const Section& root, const Catalog& catalog);
  bool CheckFederatedProviders(const Section& root);
  void LoadFederation(const Field& f);
  int64_t LoadRegions(const Section& s, v1::Federation* fed);
  void LoadFederationOptions(const Section& s, v1::Federation* fed);
  void LoadReproducible(const Section& s, v1::Federation* fed, int64_t total_clients);
  void LoadRobustAndCommandOptions(const Section& s, v1::Federation* fed);
  void LoadBufferedMode(const Section& s, v1::Federation* fed);
  void CheckSecureRegions(const Section& s, const v1::Federation& fed);
  void LoadStragglers(const Field& f, v1::Federation* fed);
  void LoadDifferentialPrivacy(const Field& f, v1::Federation* fed);
  void LoadModel(const Field& f, v1::Federation* fed);
  void LoadData(const Section& s, v1::Federation* fed, int64_t total);
  void LoadDataDirs(const Field& f, v1::Federation* fed);
  // A non-empty string that is an id (common/ids.h): such names become file names and travel
  // between hosts. An error at f naming `what` otherwise.
  std::optional<std::string> IdString(const Field& f, const char* what) {
    std::optional<std::string> v = r_.NonEmptyString(f);
    if (v && !IsValidId(*v)) {
      r_.ValueError(f, absl::StrCat(QuotedId(*v), " is not ", what, ": at most ", kMaxIdBytes,
                                    " bytes of [A-Za-z0-9._-]"));
      return std::nullopt;
    }
    return v;
  }

  // Calls set(value) when the key is present and its value is valid.
  template <typename T, typename Read, typename Set>
  void IfPresent(const Section& s, absl::string_view key, Read read, Set set) {
    if (const Field* f = s.Find(key)) {
      if (std::optional<T> v = read(*f)) set(*v);
    }
  }

  Reader r_;
  std::string file_;
  v1::ExperimentSpec spec_;
  // Parameters whose min, max, step or values did not load: their stored domain is a
  // placeholder, so values checked against it (enqueue, when:) would only repeat the error in
  // other words.
  std::set<std::string> unranged_;
  // Positions of pool keys, for errors found once the catalog is known.
  struct PoolFields {
    std::optional<Field> region, instance, market, hosts, provider, self;
  };
  std::vector<PoolFields> pool_fields_;
  std::optional<Field> catalog_field_;
  std::optional<Field> max_cost_field_;
  // Keys checked once the whole file is loaded (the study's privacy and rounds as fidelity).
  std::optional<Field> max_epsilon_field_, privacy_field_, selection_field_;
  std::optional<Field> sampler_field_, scheduler_field_, max_trials_field_, warm_start_field_;
  std::optional<Field> fidelity_name_field_, fidelity_max_field_;
  std::vector<Field> parameter_fields_;  // parameters.NAME, in order
  std::optional<Field> provider_field_, global_region_field_;
  std::vector<Field> region_name_fields_;  // federation.regions[i].name, in order
};

LoadResult Loader::Run(const std::string& yaml) {
  LoadResult result;
  try {
    if (std::optional<YAML::Mark> at = StuckAt(yaml)) {
      r_.Error({at->line + 1, at->column + 1}, "",
               "invalid YAML: the parser cannot get past this point");
      result.errors = std::move(r_.errors());
      return result;
    }
    std::vector<YAML::Node> docs = YAML::LoadAll(yaml);
    if (docs.empty() || docs[0].IsNull()) {
      r_.Error({1, 1}, "", "the experiment file is empty");
    } else {
      for (size_t i = 1; i < docs.size(); ++i) {
        if (!docs[i].IsNull()) {
          r_.Error(PosOf(docs[i]), "", "only one YAML document is allowed per file");
        }
      }
      LoadRoot(Field("", YAML::Node(), docs[0]));
    }
  } catch (const YAML::DeepRecursion& e) {
    r_.Error({e.mark.line + 1, e.mark.column + 1}, "", "invalid YAML: nested too deeply");
  } catch (const YAML::Exception& e) {
    // ParserException carries the parser's position; others may not.
    r_.Error({e.mark.line + 1, e.mark.column + 1}, "", absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    r_.Error({}, "", absl::StrCat("internal error while loading: ", e.what()));
  } catch (...) {
    r_.Error({}, "", "internal error while loading: unknown exception");
  }
  result.errors = std::move(r_.errors());
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const LoadError& a, const LoadError& b) {
                     return std::tie(a.line, a.col) < std::tie(b.line, b.col);
                   });
  if (result.ok()) result.spec = std::move(spec_);
  return result;
}

void Loader::LoadRoot(const Field& root) {
  Section s(r_, root,
            {"name", "objective", "objectives", "constraints", "parameters", "search", "trial",
             "budget", "resources", "federation", "simulate", "privacy"});
  if (!s.ok()) return;
  spec_.set_source_path(file_);
  LoadName(s);
  LoadObjective(s);
  // Plain federated training (no search) has nothing to tune.
  LoadParameters(s, s.Find("federation") != nullptr && s.Find("search") == nullptr);
  LoadSearch(s);
  LoadTrial(s);
  LoadBudget(s);
  LoadResources(s);
  if (const Field* f = s.Find("federation")) LoadFederation(*f);
  if (const Field* f = s.Find("simulate")) LoadSimulate(*f);
  if (const Field* f = s.Find("privacy")) LoadStudyPrivacy(*f);
  CheckStudyPrivacy();
  CheckPoolsAgainstCatalog(s);
  CheckObjectivesAgainstSearch(s);
  if (spec_.search().mode() == v1::Search::ASK_TELL) CheckAskTell(s);
}

// An ask/tell run launches nothing: no instances, no federated rounds.
void Loader::CheckAskTell(const Section& root) {
  if (const Field* f = root.Find("federation")) {
    r_.KeyError(*f,
                "cannot be combined with search.mode: ask_tell (a federated run launches "
                "its clients)");
  }
  const Field* resources = root.Find("resources");
  if (resources == nullptr || !resources->value.IsMap()) return;
  for (const auto& kv : resources->value) {
    if (kv.first.IsScalar() && kv.first.Scalar() == "pools") {
      Field pools(Join(resources->path, "pools"), kv.first, kv.second);
      r_.KeyError(pools,
                  "search.mode is ask_tell: clients run the trials, so no instances are "
                  "launched; remove resources.pools");
    }
  }
}

void Loader::LoadName(const Section& root) {
  const Field* f = root.Require("name");
  if (f == nullptr) return;
  std::optional<std::string> name = r_.String(*f);
  if (!name) return;
  if (!IsExperimentName(*name)) {
    r_.ValueError(
        *f, absl::StrCat("invalid name '", *name, "'; use lowercase letters, digits, '_' and '-'"));
  } else if (name->size() > 64) {
    r_.ValueError(*f, absl::StrCat("too long (", name->size(), " characters; at most 64)"));
  }
  spec_.set_name(*name);
}

void Loader::LoadObjective(const Section& root) {
  const Field* several = root.Find("objectives");
  const Field* one = root.Find("objective");
  if (several != nullptr && one != nullptr) {
    r_.KeyError(*several, "give either objective (one) or objectives (2 to 4), not both");
    return;
  }
  if (several != nullptr) {
    LoadObjectives(*several);
  } else if (const Field* f = root.Require("objective")) {
    LoadOneObjective(*f, spec_.mutable_objective(), /*with_reference=*/false);
  }
  if (const Field* f = root.Find("constraints")) LoadConstraints(*f);
}

void Loader::LoadOneObjective(const Field& f, v1::Objective* objective, bool with_reference) {
  Section s(r_, f,
            with_reference ? std::vector<absl::string_view>{"metric", "goal", "reference"}
                           : std::vector<absl::string_view>{"metric", "goal", "target"});
  objective->set_goal(v1::Objective::MINIMIZE);
  if (!s.ok()) return;
  if (const Field* metric = s.Require("metric")) {
    if (auto v = r_.NonEmptyString(*metric)) objective->set_metric(*v);
  }
  IfPresent<size_t>(
      s, "goal",
      [&](const Field& g) -> std::optional<size_t> {
        // British spellings are accepted but not listed, so the error names each goal once.
        if (g.value.IsScalar() && g.value.Scalar() == "minimise") return 0;
        if (g.value.IsScalar() && g.value.Scalar() == "maximise") return 1;
        return r_.Choice(g, kGoals);
      },
      [&](size_t i) {
        objective->set_goal(i == 0 ? v1::Objective::MINIMIZE : v1::Objective::MAXIMIZE);
      });
  IfPresent<double>(
      s, "target", [&](const Field& t) { return r_.Number(t); },
      [&](double v) { objective->set_target(v); });
  IfPresent<double>(
      s, "reference", [&](const Field& t) { return r_.Number(t); },
      [&](double v) { objective->set_reference(v); });
}

void Loader::LoadObjectives(const Field& f) {
  std::vector<Field> entries = r_.Elements(f);
  if (!f.value.IsSequence()) return;
  if (entries.size() < 2 || entries.size() > 4) {
    r_.ValueError(f, absl::StrCat("needs 2 to 4 entries, got ", entries.size(),
                                  entries.size() == 1 ? " (for one, use objective:)" : ""));
    return;
  }
  std::map<std::string, std::string> seen;  // metric -> the entry's path
  for (const Field& e : entries) {
    v1::Objective* objective = spec_.add_objectives();
    LoadOneObjective(e, objective, /*with_reference=*/true);
    if (objective->metric().empty()) continue;
    auto [it, fresh] = seen.emplace(objective->metric(), e.path);
    if (!fresh) {
      r_.ValueError(e, absl::StrCat("metric '", objective->metric(), "' is already an objective (",
                                    it->second, ")"));
    }
  }
}

void Loader::LoadConstraints(const Field& f) {
  std::vector<Field> entries = r_.Elements(f);
  if (f.value.IsSequence() && entries.empty()) r_.ValueError(f, "empty list; leave the key out");
  for (const Field& e : entries) {
    v1::Constraint* c = spec_.add_constraints();
    Section s(r_, e, {"metric", "max", "min"});
    if (!s.ok()) continue;
    if (const Field* metric = s.Require("metric")) {
      if (auto v = r_.NonEmptyString(*metric)) c->set_metric(*v);
    }
    IfPresent<double>(
        s, "max", [&](const Field& x) { return r_.Number(x); }, [&](double v) { c->set_max(v); });
    IfPresent<double>(
        s, "min", [&](const Field& x) { return r_.Number(x); }, [&](double v) { c->set_min(v); });
    if (s.Find("max") == nullptr && s.Find("min") == nullptr) {
      r_.ValueError(e, "needs max or min (a bound the metric must keep)");
    } else if (c->has_max() && c->has_min() && !(c->min() <= c->max())) {
      r_.ValueError(*s.Find("min"), "must not exceed max");
    }
  }
}

// Checks what depends on both the objectives and the search or resources blocks.
void Loader::CheckObjectivesAgainstSearch(const Section& root) {
  const int objectives = spec_.objectives_size();
  const v1::Search& search = spec_.search();
  const Field* search_field = root.Find("search");
  const Field* objectives_field = root.Find("objectives");
  // The search block's entry `key`, already checked by LoadSearch (null when absent).
  std::vector<std::unique_ptr<Field>> found;
  auto search_key = [&](absl::string_view key) -> const Field* {
    if (search_field == nullptr || !search_field->value.IsMap()) return nullptr;
    for (const auto& kv : search_field->value) {
      if (kv.first.IsScalar() && kv.first.Scalar() == key) {
        found.push_back(std::make_unique<Field>(Join(search_field->path, std::string(key)),
                                                kv.first, kv.second));
        return found.back().get();
      }
    }
    return nullptr;
  };
  if (search.sampler() == v1::Search::NSGA2 && objectives == 0) {
    if (const Field* f = search_key("sampler")) {
      r_.ValueError(*f,
                    "nsga2 needs several objectives (objectives:); for one, use bayesian or tpe");
    }
  }
  if (search.cost_aware()) {
    const Field* f = search_key("cost_aware");
    if (objectives > 0 && f != nullptr) {
      r_.ValueError(*f, "cost_aware is for one objective; with objectives:, make cost one of them");
    } else if (search.sampler() != v1::Search::BAYESIAN && f != nullptr) {
      r_.ValueError(*f, "cost_aware needs sampler: bayesian");
    }
  }
  if (objectives > 0 && search.scheduler() == v1::Search::MEDIAN) {
    if (const Field* f = search_key("scheduler")) {
      r_.ValueError(*f,
                    "median stopping compares one value; with objectives:, use asha, hyperband "
                    "or bohb (they rank by non-dominated rank and crowding distance)");
    }
  }
  const v1::Resources& res = spec_.resources();
  const bool unbilled = res.provider() == "local" && res.pools_size() == 0;
  if (unbilled && objectives_field != nullptr && spec_.federation().regions_size() == 0) {
    for (int i = 0; i < objectives; ++i) {
      if (spec_.objectives(i).metric() == "cost") {
        r_.ValueError(*objectives_field,
                      absl::StrCat("objectives[", i,
                                   "]: cost is always 0 under the local provider "
                                   "without pools (nothing is billed); add priced pools under "
                                   "resources:, or try it with sextant simulate"));
      }
    }
  }
}

void Loader::LoadParameters(const Section& root, bool may_be_empty) {
  const Field* f = may_be_empty ? root.Find("parameters") : root.Require("parameters");
  if (f == nullptr) return;
  std::vector<Field> entries;
  if (!f->value.IsNull()) entries = r_.Entries(*f);
  if (entries.empty() && !may_be_empty && (f->value.IsNull() || f->value.IsMap())) {
    r_.KeyError(*f, "the search space has no dimensions");
  }
  if (entries.size() > static_cast<size_t>(kMaxParameters)) {
    r_.KeyError(*f, absl::StrCat("too many parameters (", entries.size(), "; at most ",
                                 kMaxParameters, ")"));
    return;
  }
  std::vector<PendingWhen> whens;
  for (const Field& e : entries) LoadParameter(e, whens);
  LoadConditions(whens);
}

void Loader::LoadParameter(const Field& f, std::vector<PendingWhen>& whens) {
  parameter_fields_.push_back(f);
  const int index = spec_.parameters_size();
  v1::Parameter* p = spec_.add_parameters();
  p->set_name(f.key.Scalar());
  if (!IsIdentifier(p->name())) {
    r_.KeyError(f,
                "invalid parameter name; use letters, digits and '_', not starting with a digit");
  }
  Section s(r_, f, {"type", "min", "max", "step", "log", "values", "grid_points", "when"});
  if (!s.ok()) return;
  if (const Field* type = s.Require("type")) {
    if (std::optional<size_t> t = r_.Choice(*type, kParamTypes)) {
      p->set_type(static_cast<v1::Parameter::Type>(*t + 1));  // FLOAT, INT, CATEGORICAL
      if (p->type() == v1::Parameter::CATEGORICAL) {
        LoadCategorical(s, p);
      } else {
        LoadRange(s, p, p->type() == v1::Parameter::INT);
      }
    }
  }
  if (const Field* when = s.Find("when")) whens.emplace_back(index, *when);
}

void Loader::LoadRange(const Section& s, v1::Parameter* p, bool integral) {
  if (const Field* values = s.Find("values")) {
    r_.KeyError(*values, "only allowed with type: categorical");
  }
  auto read = [&](const Field& f) -> std::optional<double> {
    if (!integral) return r_.Number(f);
    std::optional<int64_t> i = r_.Integer(f, -kMaxExactInt, kMaxExactInt);
    return i ? std::optional<double>(static_cast<double>(*i)) : std::nullopt;
  };
  const Field* min = s.Require("min");
  const Field* max = s.Require("max");
  std::optional<double> lo, hi;
  if (min != nullptr) lo = read(*min);
  if (max != nullptr) hi = read(*max);
  p->set_min(lo.value_or(0));
  p->set_max(hi.value_or(0));
  if (!lo.has_value() || !hi.has_value()) unranged_.insert(p->name());
  if (lo.has_value() && hi.has_value() && !(p->min() < p->max())) {
    r_.ValueError(*min, absl::StrCat("must be less than max (min ", min->value.Scalar(), ", max ",
                                     max->value.Scalar(), ")"));
  }
  IfPresent<bool>(
      s, "log", [&](const Field& f) { return r_.Bool(f); },
      [&](bool log) {
        p->set_log(log);
        if (log && lo.has_value() && !(p->min() > 0))
          r_.ValueError(*min, "must be > 0 with log: true");
      });
  IfPresent<int64_t>(
      s, "grid_points", [&](const Field& f) { return r_.Integer(f, 2, kInt32Max); },
      [&](int64_t n) { p->set_grid_points(static_cast<int32_t>(n)); });
  if (const Field* step = s.Find("step")) LoadStep(*step, p, integral);
}

// (max - min) need not be a multiple of the step: values stop at the last step below max, as
// in Optuna and Katib.
void Loader::LoadStep(const Field& f, v1::Parameter* p, bool integral) {
  std::optional<double> step;
  if (integral) {
    if (std::optional<int64_t> i = r_.Integer(f, 1, kMaxExactInt)) step = static_cast<double>(*i);
  } else {
    step = r_.NumberAbove(f, 0, /*strict=*/true);
  }
  if (!step) {
    unranged_.insert(p->name());
    return;
  }
  p->set_step(*step);
  const bool moot = integral && *step == 1;
  if (p->log() && !moot) {
    r_.KeyError(f, "not allowed with log: true (a step spaces values evenly; drop one of them)");
  } else if (!unranged_.contains(p->name()) && p->min() < p->max() &&
             !(*step <= p->max() - p->min())) {
    r_.ValueError(f, absl::StrCat("must be at most max - min (",
                                  FormatParamValue(p->max() - p->min()), "), or only min is left"));
  }
}

void Loader::LoadCategorical(const Section& s, v1::Parameter* p) {
  for (absl::string_view key : {"min", "max", "step", "log", "grid_points"}) {
    if (const Field* f = s.Find(key)) {
      r_.KeyError(*f, "not allowed with type: categorical (only with float and int)");
    }
  }
  const Field* values = s.Require("values");
  if (values == nullptr || !values->value.IsSequence()) unranged_.insert(p->name());
  if (values == nullptr) return;
  std::vector<Field> elements = r_.Elements(*values);
  if (!values->value.IsSequence()) return;
  if (elements.empty()) {
    r_.ValueError(*values, "must not be empty");
  } else if (elements.size() == 1) {
    r_.ValueError(*values, "needs at least 2 values");
  }
  std::set<std::string> seen;
  for (const Field& e : elements) {
    std::optional<std::string> v = r_.String(e);
    if (!v) continue;
    if (!seen.insert(*v).second) {
      r_.ValueError(e, absl::StrCat("duplicate value '", *v, "'"));
      continue;
    }
    p->add_values(*v);
  }
}

void Loader::LoadConditions(const std::vector<PendingWhen>& whens) {
  std::map<std::string, int> index;
  for (int i = 0; i < spec_.parameters_size(); ++i) index.emplace(spec_.parameters(i).name(), i);
  std::vector<ConditionEdge> edges;
  for (const PendingWhen& w : whens) {
    v1::Parameter* p = spec_.mutable_parameters(w.param);
    for (const Field& e : r_.Entries(w.field)) {
      const std::string& other = e.key.Scalar();
      auto it = index.find(other);
      if (other == p->name()) {
        r_.KeyError(e, "a parameter cannot depend on itself");
      } else if (it == index.end()) {
        r_.KeyError(e, absl::StrCat("no parameter named '", other, "'"));
      } else if (std::optional<std::string> v = ConditionValue(spec_.parameters(it->second), e)) {
        (*p->mutable_when())[other] = *v;
        edges.push_back({w.param, it->second, KeyPos(e), e.path});
      }
    }
  }
  CheckConditionCycles(edges);
}

// Returns the value in the form samplers compare against (FormatParamValue's), or reports why
// the target parameter cannot take it.
std::optional<std::string> Loader::ConditionValue(const v1::Parameter& target, const Field& f) {
  if (target.type() == v1::Parameter::TYPE_UNSPECIFIED) return std::nullopt;  // reported
  if (target.type() == v1::Parameter::FLOAT) {
    r_.KeyError(f, absl::StrCat("'", target.name(),
                                "' is a float; a condition needs a categorical or int parameter"));
    return std::nullopt;
  }
  std::optional<std::string> v = r_.String(f);
  if (!v) return std::nullopt;
  if (target.type() == v1::Parameter::CATEGORICAL) {
    const auto& values = target.values();
    if (unranged_.contains(target.name())) return v;  // its values' error is reported
    if (std::find(values.begin(), values.end(), *v) != values.end()) return v;
    r_.ValueError(f, absl::StrCat("'", *v, "' is not one of ", target.name(), "'s values (",
                                  absl::StrJoin(values, ", "), ")"));
    return std::nullopt;
  }
  int64_t i = 0;
  double d = 0;
  bool integral = absl::SimpleAtoi(*v, &i);
  if (!integral && absl::SimpleAtod(*v, &d) && d == std::floor(d) &&
      std::fabs(d) <= static_cast<double>(kMaxExactInt)) {
    i = static_cast<int64_t>(d);
    integral = true;
  }
  if (integral && unranged_.contains(target.name())) return FormatInt(i);  // range reported
  const auto step = static_cast<int64_t>(std::max(1.0, target.step()));
  if (integral && i >= target.min() && i <= target.max()) {
    if ((i - static_cast<int64_t>(target.min())) % step == 0) return FormatInt(i);
    r_.ValueError(f, absl::StrCat("'", *v, "' is not one of ", target.name(), "'s values (",
                                  target.min(), " + k * ", step, ")"));
    return std::nullopt;
  }
  r_.ValueError(f, absl::StrCat("'", *v, "' is not an integer in ", target.name(), "'s range [",
                                target.min(), ", ", target.max(), "]"));
  return std::nullopt;
}

void Loader::CheckConditionCycles(const std::vector<ConditionEdge>& edges) {
  const int n = spec_.parameters_size();
  std::vector<std::vector<const ConditionEdge*>> out(n);
  for (const ConditionEdge& e : edges) out[e.from].push_back(&e);
  enum { kNew, kOnStack, kDone };
  std::vector<int> state(n, kNew);
  std::function<void(int)> visit = [&](int v) {
    state[v] = kOnStack;
    for (const ConditionEdge* e : out[v]) {
      if (state[e->to] == kOnStack) {
        r_.Error(e->pos, e->path, "conditions form a cycle");
      } else if (state[e->to] == kNew) {
        visit(e->to);
      }
    }
    state[v] = kDone;
  };
  for (int v = 0; v < n; ++v) {
    if (state[v] == kNew) visit(v);
  }
}

void Loader::LoadSearch(const Section& root) {
  v1::Search* search = spec_.mutable_search();
  search->set_sampler(v1::Search::RANDOM);
  search->set_scheduler(v1::Search::NONE);
  search->set_seed(0);
  search->set_max_trials(20);
  search->set_max_concurrent(1);
  const Field* f = root.Find("search");
  if (f == nullptr) return;
  Section s(r_, *f,
            {"sampler", "scheduler", "fidelity", "seed", "max_trials", "max_concurrent",
             "initial_design", "asha_mode", "cost_aware", "mode", "lease", "enqueue", "warm_start",
             "max_failed_trials", "max_failed_in_a_row"});
  if (!s.ok()) return;
  for (auto [key, field] : {std::pair{"sampler", &sampler_field_},
                            std::pair{"scheduler", &scheduler_field_},
                            std::pair{"max_trials", &max_trials_field_},
                            std::pair{"warm_start", &warm_start_field_}}) {
    if (const Field* x = s.Find(key)) field->emplace(*x);
  }
  IfPresent<size_t>(
      s, "sampler", [&](const Field& x) { return r_.Choice(x, kSamplers); },
      [&](size_t i) { search->set_sampler(static_cast<v1::Search::Sampler>(i + 1)); });
  IfPresent<size_t>(
      s, "scheduler", [&](const Field& x) { return r_.Choice(x, kSchedulers); },
      [&](size_t i) { search->set_scheduler(static_cast<v1::Search::Scheduler>(i + 1)); });
  IfPresent<uint64_t>(
      s, "seed", [&](const Field& x) { return r_.Unsigned(x); },
      [&](uint64_t v) { search->set_seed(v); });
  auto positive = [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); };
  IfPresent<int64_t>(s, "max_trials", positive, [&](int64_t v) { search->set_max_trials(v); });
  IfPresent<int64_t>(s, "max_concurrent", positive,
                     [&](int64_t v) { search->set_max_concurrent(v); });
  IfPresent<int64_t>(s, "initial_design", positive,
                     [&](int64_t v) { search->set_initial_design(v); });
  IfPresent<bool>(
      s, "cost_aware", [&](const Field& x) { return r_.Bool(x); },
      [&](bool v) { search->set_cost_aware(v); });
  search->set_asha_mode("promotion");
  IfPresent<size_t>(
      s, "asha_mode", [&](const Field& x) { return r_.Choice(x, kAshaModes); },
      [&](size_t i) { search->set_asha_mode(std::string(kAshaModes[i])); });
  LoadSearchMode(s, search);
  for (const char* key : {"max_failed_trials", "max_failed_in_a_row"}) {
    const Field* x = s.Find(key);
    if (x == nullptr) continue;
    if (search->mode() == v1::Search::ASK_TELL) {
      r_.KeyError(*x, "only with mode: commands (an ask/tell client decides what a failure means)");
    } else if (std::optional<int64_t> v = positive(*x)) {
      if (std::string(key) == "max_failed_trials") {
        search->set_max_failed_trials(*v);
      } else {
        search->set_max_failed_in_a_row(*v);
      }
    }
  }
  if (const Field* e = s.Find("enqueue")) LoadEnqueue(*e, search);
  if (const Field* w = s.Find("warm_start")) LoadWarmStart(*w, search);
  const Field* fidelity = s.Find("fidelity");
  if (fidelity != nullptr) {
    LoadFidelity(*fidelity, search->mutable_fidelity());
  } else if (search->scheduler() != v1::Search::NONE) {
    const Field* scheduler = s.Find("scheduler");
    r_.Error(ValuePos(*scheduler), Join(f->path, "fidelity"),
             absl::StrCat("required with scheduler: ", scheduler->value.Scalar()));
  }
}

void Loader::LoadSearchMode(const Section& s, v1::Search* search) {
  search->set_mode(v1::Search::COMMANDS);
  IfPresent<size_t>(
      s, "mode", [&](const Field& x) { return r_.Choice(x, kSearchModes); },
      [&](size_t i) { search->set_mode(static_cast<v1::Search::Mode>(i + 1)); });
  const Field* lease = s.Find("lease");
  if (lease == nullptr) return;
  if (search->mode() != v1::Search::ASK_TELL) {
    r_.KeyError(*lease, "only with mode: ask_tell (workers' leases are set by --lease-timeout)");
  } else if (std::optional<double> v = r_.Duration(*lease); v && *v <= 0) {
    r_.ValueError(*lease, "must be a positive duration (e.g. 10m)");
  } else if (v) {
    search->set_lease_seconds(*v);
  }
}

// Each entry is one point of the space, checked as the samplers' points are (CheckParams).
void Loader::LoadEnqueue(const Field& f, v1::Search* search) {
  std::vector<Field> entries = r_.Elements(f);
  if (f.value.IsSequence() && entries.empty()) r_.ValueError(f, "empty list; leave the key out");
  if (static_cast<int64_t>(entries.size()) > search->max_trials()) {
    r_.ValueError(f, absl::StrCat(entries.size(), " configurations, but search.max_trials is ",
                                  search->max_trials(), " (enqueued configurations are trials)"));
  }
  const SearchSpace space = ToSearchSpace(spec_);
  std::vector<absl::string_view> names;
  for (const ParamSpec& p : space.params) names.push_back(p.name);
  for (const Field& e : entries) {
    if (!e.value.IsMap()) {
      r_.ValueError(
          e, absl::StrCat("expected a mapping of parameter values (e.g. {",
                          names.empty() ? "lr" : names[0], ": ...}), got ", Describe(e.value)));
      continue;
    }
    const std::vector<Field> values = r_.Entries(e);
    Params params;
    std::map<std::string, const Field*> at;
    std::set<std::string> bad;  // reported already
    for (const Field& v : values) {
      const std::string& name = v.key.Scalar();
      const int index = space.IndexOf(name);
      if (index < 0) {
        std::string message =
            absl::StrCat("unknown parameter; parameters: ", absl::StrJoin(names, ", "));
        if (absl::string_view near = Nearest(name, names); !near.empty()) {
          absl::StrAppend(&message, " (did you mean '", near, "'?)");
        }
        r_.KeyError(v, message);
        continue;
      }
      std::optional<ParamValue> value = EnqueuedValue(space.params[index], v);
      if (!value) {
        bad.insert(name);
        continue;
      }
      params[name] = *value;
      at.emplace(name, &v);
    }
    for (const ParamProblem& p : CheckParams(space, params)) {
      if (bad.contains(p.param) || p.kind == ParamProblem::Kind::kUnknown) continue;
      if (p.kind == ParamProblem::Kind::kOutside && unranged_.contains(p.param)) continue;
      if (p.kind == ParamProblem::Kind::kMissing) {
        r_.ValueError(e, absl::StrCat("no value for the parameter '", p.param, "'",
                                      space.params[space.IndexOf(p.param)].when.empty()
                                          ? ""
                                          : " (its when: conditions hold here)"));
      } else {
        r_.ValueError(*at.at(p.param), absl::string_view(p.message).substr(p.param.size() + 2));
      }
    }
    v1::EnqueuedTrial* trial = search->add_enqueue();
    for (const auto& [name, value] : params) {
      v1::ParamValue& out = (*trial->mutable_params())[name];
      if (const double* d = std::get_if<double>(&value)) {
        out.set_number(*d);
      } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
        out.set_integer(*i);
      } else {
        out.set_category(std::get<std::string>(value));
      }
    }
  }
}

// The value typed as the parameter takes it; its range is CheckParams's to judge.
std::optional<ParamValue> Loader::EnqueuedValue(const ParamSpec& spec, const Field& f) {
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat:
      if (std::optional<double> v = r_.Number(f)) return ParamValue(*v);
      return std::nullopt;
    case ParamSpec::Kind::kInt:
      if (std::optional<int64_t> v = r_.Integer(f, -kMaxExactInt, kMaxExactInt)) {
        return ParamValue(*v);
      }
      return std::nullopt;
    case ParamSpec::Kind::kCategorical:
      if (std::optional<std::string> v = r_.String(f)) return ParamValue(*v);
      return std::nullopt;
  }
  return std::nullopt;
}

// Relative run directories are joined to the experiment file's folder, as working_dir is.
// Each must exist and share the objectives (CheckWarmStartRun); its trials are read at start.
void Loader::LoadWarmStart(const Field& f, v1::Search* search) {
  Section s(r_, f, {"runs"});
  if (!s.ok()) return;
  const Field* runs = s.Require("runs");
  if (runs == nullptr) return;
  std::vector<Field> entries = r_.Elements(*runs);
  if (runs->value.IsSequence() && entries.empty()) {
    r_.ValueError(*runs, "empty list; leave warm_start out");
  }
  std::set<std::string> seen;
  for (const Field& e : entries) {
    std::optional<std::string> v = r_.NonEmptyString(e);
    if (!v) continue;
    const std::string dir = WorkingDir(*v);
    if (!seen.insert(std::filesystem::path(dir).lexically_normal().string()).second) {
      r_.ValueError(e, absl::StrCat(dir, " is listed twice"));
      continue;
    }
    if (absl::StatusOr<v1::ExperimentSpec> old = CheckWarmStartRun(dir, spec_); !old.ok()) {
      r_.ValueError(e, old.status().message());
      continue;
    }
    search->mutable_warm_start()->add_runs(dir);
  }
}

void Loader::LoadFidelity(const Field& f, v1::Fidelity* fidelity) {
  Section s(r_, f, {"name", "min", "max", "reduction_factor"});
  fidelity->set_reduction_factor(3);
  if (!s.ok()) return;
  if (const Field* name = s.Require("name")) {
    if (auto v = r_.NonEmptyString(*name)) fidelity->set_name(*v);
    fidelity_name_field_.emplace(*name);
  }
  const Field* min = s.Require("min");
  const Field* max = s.Require("max");
  if (max != nullptr) fidelity_max_field_.emplace(*max);
  std::optional<double> lo, hi;
  if (min != nullptr) lo = r_.NumberAbove(*min, 0, /*strict=*/true);
  if (max != nullptr) hi = r_.Number(*max);
  fidelity->set_min(lo.value_or(0));
  fidelity->set_max(hi.value_or(0));
  if (lo.has_value() && hi.has_value() && !(fidelity->min() < fidelity->max())) {
    r_.ValueError(*min, absl::StrCat("must be less than max (min ", min->value.Scalar(), ", max ",
                                     max->value.Scalar(), ")"));
  }
  IfPresent<double>(
      s, "reduction_factor", [&](const Field& x) { return r_.NumberAbove(x, 2, /*strict=*/false); },
      [&](double v) { fidelity->set_reduction_factor(v); });
}

// A plain federated run on a model of the user's own (federation.model) runs no built-in trainer
// and no trial command: its `trial` block is optional.
bool OwnModelRun(const Section& root) {
  const Field* fed = root.Find("federation");
  return fed != nullptr && root.Find("search") == nullptr && fed->value.IsMap() &&
         fed->value["model"];
}

void Loader::LoadTrial(const Section& root) {
  const bool ask_tell = spec_.search().mode() == v1::Search::ASK_TELL;
  const Field* f = ask_tell || OwnModelRun(root) ? root.Find("trial") : root.Require("trial");
  if (f == nullptr) return;
  v1::TrialSpec* trial = spec_.mutable_trial();
  trial->set_working_dir(WorkingDir(""));
  if (ask_tell) {
    LoadAskTellTrial(*f, trial);
    return;
  }
  Section s(r_, *f, {"command", "timeout", "env", "working_dir", "max_restarts", "builtin"});
  if (!s.ok()) return;
  const Field* command = s.Find("command");
  const Field* builtin = s.Find("builtin");
  if (command == nullptr && builtin == nullptr) {
    r_.Error(KeyPos(*f), Join(f->path, "command"), "required key is missing (or give builtin)");
  }
  if (command != nullptr && builtin != nullptr) {
    r_.KeyError(*builtin, "cannot be combined with trial.command; give one of them");
  }
  if (command != nullptr) LoadCommand(*command, trial);
  if (builtin != nullptr) LoadBuiltin(*builtin, trial->mutable_builtin());
  IfPresent<double>(
      s, "timeout", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { trial->set_timeout_seconds(v); });
  if (const Field* env = s.Find("env")) LoadStringMap(*env, true, trial->mutable_env());
  IfPresent<std::string>(
      s, "working_dir", [&](const Field& x) { return r_.NonEmptyString(x); },
      [&](const std::string& v) { trial->set_working_dir(WorkingDir(v)); });
  IfPresent<int64_t>(
      s, "max_restarts", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { trial->set_max_restarts(v); });
}

// Clients run ask/tell trials themselves: of the trial block only max_restarts (re-asks after a
// FAILED tell) means anything.
void Loader::LoadAskTellTrial(const Field& f, v1::TrialSpec* trial) {
  for (const Field& e : r_.Entries(f)) {
    const std::string& key = e.key.Scalar();
    if (key == "max_restarts") {
      if (auto v = r_.Integer(e, 0, kInt32Max)) trial->set_max_restarts(*v);
    } else {
      r_.KeyError(e, absl::StrCat("search.mode is ask_tell: clients run the trials, so trial.", key,
                                  " is not used; remove it (or use mode: commands)"));
    }
  }
}

void Loader::LoadCommand(const Field& f, v1::TrialSpec* trial) {
  std::vector<Field> args = r_.Elements(f);
  if (f.value.IsSequence() && args.empty()) r_.ValueError(f, "must not be empty");
  for (const Field& arg : args) {
    std::optional<std::string> v = r_.String(arg);
    if (!v) continue;
    CheckReferences(arg, *v);
    trial->add_command(*v);
  }
}

void Loader::LoadBuiltin(const Field& f, v1::BuiltinTrainer* builtin) {
  Section s(r_, f, {"model", "dataset", "epochs", "gpus", "args"});
  if (!s.ok()) return;
  auto one_of = [&](std::set<std::string> allowed) {
    return [this, allowed](const Field& x) -> std::optional<std::string> {
      std::optional<std::string> v = r_.NonEmptyString(x);
      if (v && !allowed.contains(*v)) {
        r_.ValueError(x, absl::StrCat("'", *v, "' is not one of: ", absl::StrJoin(allowed, ", ")));
        return std::nullopt;
      }
      return v;
    };
  };
  IfPresent<std::string>(s, "model", one_of({"mlp", "cnn"}),
                         [&](const std::string& v) { builtin->set_model(v); });
  IfPresent<std::string>(s, "dataset", one_of({"fashion-mnist", "synthetic"}),
                         [&](const std::string& v) { builtin->set_dataset(v); });
  IfPresent<int64_t>(
      s, "epochs", [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); },
      [&](int64_t v) { builtin->set_epochs(v); });
  IfPresent<int64_t>(
      s, "gpus", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { builtin->set_gpus(v); });
  if (const Field* args = s.Find("args")) {
    LoadStringMap(*args, false, builtin->mutable_args());
    for (const Field& e : r_.Entries(*args)) {
      if (!kBuiltinTrainerOptions.contains(e.key.Scalar())) {
        r_.KeyError(e, absl::StrCat("not an option of the built-in trainer; use one of: ",
                                    absl::StrJoin(kBuiltinTrainerOptions, ", ")));
      }
    }
  }
}

void Loader::LoadStringMap(const Field& f, bool env_names,
                           google::protobuf::Map<std::string, std::string>* out) {
  for (const Field& e : r_.Entries(f)) {
    if (env_names && !IsIdentifier(e.key.Scalar())) {
      r_.KeyError(e, "invalid environment variable name; use letters, digits and '_'");
    }
    std::optional<std::string> v = r_.String(e);
    if (!v) continue;
    CheckReferences(e, *v);
    (*out)[e.key.Scalar()] = *v;
  }
}

void Loader::CheckReferences(const Field& f, const std::string& text) {
  for (size_t pos = text.find("${"); pos != std::string::npos; pos = text.find("${", pos)) {
    const size_t end = text.find('}', pos + 2);
    if (end == std::string::npos) {
      r_.ValueError(f, "unterminated '${' (write ${name})");
      return;
    }
    const std::string name = text.substr(pos + 2, end - pos - 2);
    const auto& params = spec_.parameters();
    const bool found = std::any_of(params.begin(), params.end(),
                                   [&](const v1::Parameter& p) { return p.name() == name; });
    if (!found && absl::StartsWith(name, "SEXTANT_")) {
      // ${...} is substituted by Sextant before the command runs, with parameters only; the
      // trial's own variables are set in its environment, where only a shell expands them.
      r_.ValueError(
          f, absl::StrCat("'${", name,
                          "}' names no parameter (${...} takes parameters only). Sextant sets "
                          "SEXTANT_TRIAL_ID, SEXTANT_ATTEMPT, SEXTANT_EXPERIMENT, "
                          "SEXTANT_CHECKPOINT_DIR, SEXTANT_PARAMS and SEXTANT_PARAM_<NAME> in the "
                          "trial's environment: read them there, in a command through a shell, "
                          "e.g. [sh, -c, 'python3 train.py --tag $",
                          name, "']"));
    } else if (!found) {
      std::vector<std::string> declared;
      for (const v1::Parameter& p : params) declared.push_back(p.name());
      r_.ValueError(f,
                    absl::StrCat("'${", name, "}' names no parameter (declared: ",
                                 declared.empty() ? "none" : absl::StrJoin(declared, ", "), ")"));
    }
    pos = end + 1;
  }
}

std::string Loader::WorkingDir(const std::string& given) const {
  if (!given.empty() && given[0] == '/') return given;
  const size_t slash = file_.rfind('/');
  const std::string folder =
      slash == std::string::npos ? "." : file_.substr(0, std::max<size_t>(slash, 1));
  if (given.empty()) return folder;
  return folder == "." ? given : absl::StrCat(folder, folder == "/" ? "" : "/", given);
}

void Loader::LoadBudget(const Section& root) {
  v1::Budget* budget = spec_.mutable_budget();
  budget->set_currency("USD");
  const Field* f = root.Find("budget");
  if (f == nullptr) return;
  Section s(r_, *f, {"max_cost", "max_wall_time", "currency", "max_epsilon"});
  if (!s.ok()) return;
  if (const Field* mc = s.Find("max_cost")) max_cost_field_.emplace(*mc);
  if (const Field* me = s.Find("max_epsilon")) max_epsilon_field_.emplace(*me);
  IfPresent<double>(
      s, "max_epsilon", [&](const Field& x) { return r_.NumberAbove(x, 0, true); },
      [&](double v) { budget->set_max_epsilon(v); });
  IfPresent<double>(
      s, "max_cost", [&](const Field& x) { return r_.NumberAbove(x, 0, true); },
      [&](double v) { budget->set_max_cost(v); });
  IfPresent<double>(
      s, "max_wall_time", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { budget->set_max_wall_time_seconds(v); });
  IfPresent<std::string>(
      s, "currency", [&](const Field& x) { return r_.NonEmptyString(x); },
      [&](const std::string& v) { budget->set_currency(v); });
}

constexpr std::array<absl::string_view, 2> kSelections = {"composition", "random_stopping"};
constexpr std::array<absl::string_view, 2> kStoppingDistributions = {"truncated_negative_binomial",
                                                                     "poisson"};

void Loader::LoadStudyPrivacy(const Field& f) {
  privacy_field_.emplace(f);
  v1::StudyPrivacy* p = spec_.mutable_privacy();
  p->set_selection("composition");
  Section s(r_, f, {"selection", "distribution", "mean_trials", "eta"});
  if (!s.ok()) return;
  if (const Field* x = s.Find("selection")) {
    selection_field_.emplace(*x);
    if (std::optional<size_t> i = r_.Choice(*x, kSelections)) {
      p->set_selection(std::string(kSelections[*i]));
    }
  }
  const bool stopping = p->selection() == "random_stopping";
  for (const char* key : {"distribution", "mean_trials", "eta"}) {
    if (const Field* x = s.Find(key); x != nullptr && !stopping) {
      r_.KeyError(*x, "only with selection: random_stopping (composition draws nothing)");
    }
  }
  if (!stopping) return;
  p->set_distribution("truncated_negative_binomial");
  p->set_mean_trials(10);
  p->set_eta(1);
  IfPresent<size_t>(
      s, "distribution", [&](const Field& x) { return r_.Choice(x, kStoppingDistributions); },
      [&](size_t i) { p->set_distribution(std::string(kStoppingDistributions[i])); });
  if (const Field* x = s.Find("mean_trials")) {
    std::optional<double> v = r_.Number(*x);
    if (v && !(*v > 1 && *v <= 1e6)) {
      r_.ValueError(*x, "the expected number of trials must be above 1 (and at most 1e6)");
    } else if (v) {
      p->set_mean_trials(*v);
    }
  }
  if (const Field* x = s.Find("eta")) {
    std::optional<double> v = r_.Number(*x);
    if (p->distribution() == "poisson") {
      r_.KeyError(*x, "only with distribution: truncated_negative_binomial (its shape)");
    } else if (v && !(*v > -1 && *v <= 1e3)) {
      r_.ValueError(*x, "the shape must be above -1 (1: geometric, 0: logarithmic)");
    } else if (v) {
      p->set_eta(*v);
    }
  }
}

// The study's privacy (budget.max_epsilon, privacy:) holds only for a federated search with DP,
// random stopping only where no configuration depends on an earlier result, and rounds as a
// fidelity only for federated trials.
void Loader::CheckStudyPrivacy() {
  // A federated search tunes the federation block: every parameter must be one of its keys.
  if (spec_.has_federation()) {
    for (const Field& p : parameter_fields_) {
      const std::string& name = p.key.Scalar();
      if (!IsFederationHyperparameter(name)) {
        r_.KeyError(p, absl::StrCat("a federated search tunes the federation block: '", name,
                                    "' is not one of its hyperparameters (",
                                    FederationHyperparameterNames(), ")"));
      } else if (name == "clip_norm" && !spec_.federation().has_dp()) {
        r_.KeyError(p, "clip_norm tunes federation.dp.clip_norm: add federation.dp");
      }
    }
  }
  const bool federated = spec_.has_federation();
  const bool search = federated && spec_.parameters_size() > 0;
  const bool dp = federated && spec_.federation().has_dp();
  auto why_not = [&](const char* what) -> std::string {
    if (!federated) {
      return absl::StrCat(what, " needs a federated search with differential privacy (a ",
                          "federation: block with dp:, and parameters: to tune)");
    }
    if (!dp) return absl::StrCat(what, " needs differential privacy: add federation.dp");
    if (!search) {
      return absl::StrCat(what, " is the privacy of a tuning study (parameters: to tune); a ",
                          "single federated run stops at federation.dp.target_epsilon");
    }
    return "";
  };
  if (max_epsilon_field_) {
    if (std::string why = why_not("a cap on the study's epsilon"); !why.empty()) {
      r_.ValueError(*max_epsilon_field_, why);
    }
  }
  if (privacy_field_) {
    if (std::string why = why_not("the study's privacy account"); !why.empty()) {
      r_.KeyError(*privacy_field_, why);
    }
  }
  if (spec_.privacy().selection() == "random_stopping" && selection_field_) {
    const v1::Search& s = spec_.search();
    const bool fixed = s.sampler() == v1::Search::RANDOM || s.sampler() == v1::Search::GRID ||
                       s.sampler() == v1::Search::SOBOL;
    const std::string rule =
        "random_stopping holds only when no configuration depends on an earlier trial's result "
        "(sampler random, sobol or grid, no scheduler, no warm start)";
    if (!fixed) {
      const Field& at = sampler_field_ ? *sampler_field_ : *selection_field_;
      r_.ValueError(at, absl::StrCat(rule, "; sampler ",
                                     sampler_field_ ? sampler_field_->value.Scalar() : "",
                                     " adapts to the results"));
    }
    if (s.scheduler() != v1::Search::NONE && scheduler_field_) {
      r_.ValueError(*scheduler_field_, absl::StrCat(rule, "; a scheduler stops trials by them"));
    }
    if (warm_start_field_) {
      r_.KeyError(*warm_start_field_, absl::StrCat(rule, "; a warm start seeds the sampler"));
    }
    if (spec_.objectives_size() > 1) {
      r_.ValueError(*selection_field_,
                    "random_stopping releases the one best trial; with several objectives there "
                    "is a front, not one best (use composition)");
    }
    if (max_trials_field_) {
      r_.KeyError(*max_trials_field_,
                  "random_stopping draws the number of trials (privacy.mean_trials on average); "
                  "a fixed max_trials would void its guarantee");
    }
  }
  if (fidelity_name_field_ && spec_.search().fidelity().name() == "rounds") {
    if (!federated) {
      r_.ValueError(*fidelity_name_field_,
                    "rounds is the fidelity of federated trials; it needs a federation: block");
    } else if (fidelity_max_field_ && spec_.search().fidelity().max() > spec_.federation().rounds()) {
      r_.ValueError(*fidelity_max_field_,
                    absl::StrCat("a rung of ", spec_.search().fidelity().max(),
                                 " rounds is above federation.rounds (",
                                 spec_.federation().rounds(), ")"));
    }
  }
}

void Loader::LoadResources(const Section& root) {
  v1::Resources* resources = spec_.mutable_resources();
  resources->set_provider("local");
  const Field* f = root.Find("resources");
  if (f == nullptr) return;
  Section s(r_, *f, {"provider", "pools", "catalog", "placement", "per_trial", "idle_timeout"});
  if (!s.ok()) return;
  if (const Field* x = s.Find("provider")) provider_field_.emplace(*x);
  IfPresent<size_t>(
      s, "provider", [&](const Field& x) { return r_.Choice(x, kProviders); },
      [&](size_t i) { resources->set_provider(std::string(kProviders[i])); });
  LoadResourceOptions(s, resources);
  if (const Field* pools = s.Find("pools")) {
    std::set<std::string> names;
    for (const Field& e : r_.Elements(*pools)) LoadPool(e, names, resources->add_pools());
  }
  if (resources->provider() != "simulated") return;
  for (const PoolFields& pf : pool_fields_) {
    if (pf.provider) {
      r_.ValueError(*pf.provider,
                    "resources.provider simulated runs every pool in virtual time; a pool's own "
                    "provider applies to `sextant run`");
    }
  }
}

void Loader::LoadPool(const Field& f, std::set<std::string>& names, v1::Pool* pool) {
  pool->set_market(v1::Pool::ON_DEMAND);
  pool->set_min_instances(0);
  pool->set_max_instances(1);
  Section s(r_, f,
            {"name", "region", "instance", "market", "min_instances", "max_instances", "hosts",
             "provider"});
  if (!s.ok()) return;
  PoolFields& pf = pool_fields_.emplace_back();
  pf.self.emplace(f);
  if (const Field* x = s.Find("region")) pf.region.emplace(*x);
  if (const Field* x = s.Find("instance")) pf.instance.emplace(*x);
  if (const Field* x = s.Find("market")) pf.market.emplace(*x);
  if (const Field* x = s.Find("hosts")) pf.hosts.emplace(*x);
  if (const Field* x = s.Find("provider")) pf.provider.emplace(*x);
  IfPresent<size_t>(
      s, "provider", [&](const Field& x) { return r_.Choice(x, kPoolProviders); },
      [&](size_t i) { pool->set_provider(std::string(kPoolProviders[i])); });
  pool->set_hosts("any");
  IfPresent<size_t>(
      s, "hosts", [&](const Field& x) { return r_.Choice(x, kPoolHosts); },
      [&](size_t i) { pool->set_hosts(std::string(kPoolHosts[i])); });
  if (const Field* name = s.Require("name")) {
    if (auto v = IdString(*name, "a pool name")) {
      if (!names.insert(*v).second) r_.ValueError(*name, absl::StrCat("duplicate pool '", *v, "'"));
      pool->set_name(*v);
    }
  }
  auto text = [&](const Field& x) { return r_.NonEmptyString(x); };
  IfPresent<std::string>(
      s, "region", [&](const Field& x) { return IdString(x, "a region name"); },
      [&](const std::string& v) { pool->set_region(v); });
  IfPresent<std::string>(s, "instance", text, [&](const std::string& v) { pool->set_instance(v); });
  IfPresent<size_t>(
      s, "market", [&](const Field& x) { return r_.Choice(x, kMarkets); },
      [&](size_t i) { pool->set_market(static_cast<v1::Pool::Market>(i + 1)); });
  IfPresent<int64_t>(
      s, "max_instances", [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); },
      [&](int64_t v) { pool->set_max_instances(v); });
  const Field* min = s.Find("min_instances");
  if (min == nullptr) return;
  if (std::optional<int64_t> lo = r_.Integer(*min, 0, kInt32Max)) {
    pool->set_min_instances(*lo);
    if (pool->min_instances() > pool->max_instances()) {
      r_.ValueError(*min, absl::StrCat("must be <= max_instances (", pool->max_instances(),
                                       "), got ", pool->min_instances()));
    }
  }
}

void Loader::LoadResourceOptions(const Section& s, v1::Resources* resources) {
  resources->mutable_placement()->set_policy("spot_first");
  resources->mutable_placement()->set_preemption_cooldown_seconds(600);
  resources->mutable_per_trial()->set_checkpoints(true);
  resources->set_idle_timeout_seconds(300);
  if (const Field* c = s.Find("catalog")) {
    if (auto v = r_.NonEmptyString(*c)) {
      resources->set_catalog(WorkingDir(*v));
      catalog_field_.emplace(*c);
    }
  }
  IfPresent<double>(
      s, "idle_timeout", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { resources->set_idle_timeout_seconds(v); });
  if (const Field* p = s.Find("placement")) {
    Section ps(r_, *p, {"policy", "preemption_cooldown"});
    static constexpr std::array<absl::string_view, 4> kPolicies = {"cheapest", "spot_first",
                                                                   "on_demand", "mixed"};
    IfPresent<size_t>(
        ps, "policy", [&](const Field& x) { return r_.Choice(x, kPolicies); },
        [&](size_t i) { resources->mutable_placement()->set_policy(std::string(kPolicies[i])); });
    IfPresent<double>(
        ps, "preemption_cooldown", [&](const Field& x) { return r_.Duration(x); },
        [&](double v) { resources->mutable_placement()->set_preemption_cooldown_seconds(v); });
  }
  if (const Field* t = s.Find("per_trial")) {
    Section ts(r_, *t, {"gpus", "gpu_memory_gb", "cpus", "checkpoints"});
    v1::TrialResources* need = resources->mutable_per_trial();
    IfPresent<int64_t>(
        ts, "gpus", [&](const Field& x) { return r_.Integer(x, 0, 1024); },
        [&](int64_t v) { need->set_gpus(v); });
    IfPresent<double>(
        ts, "gpu_memory_gb", [&](const Field& x) { return r_.NumberAbove(x, 0, false); },
        [&](double v) { need->set_gpu_memory_gb(v); });
    IfPresent<int64_t>(
        ts, "cpus", [&](const Field& x) { return r_.Integer(x, 0, 1 << 20); },
        [&](int64_t v) { need->set_cpus(v); });
    IfPresent<bool>(
        ts, "checkpoints", [&](const Field& x) { return r_.Bool(x); },
        [&](bool v) { need->set_checkpoints(v); });
  }
}

// A time per unit that depends on the parameters: it must parse over the numeric parameters
// and be a positive, finite number of seconds at the corners and the centre of the space.
void Loader::LoadTimeExpression(const Field& f, v1::Simulation* sim) {
  std::optional<std::string> text = r_.NonEmptyString(f);
  if (!text) return;
  std::vector<std::string> names;
  std::map<std::string, double> lo, hi, mid;
  for (const v1::Parameter& p : spec_.parameters()) {
    if (p.type() == v1::Parameter::CATEGORICAL) continue;
    names.push_back(p.name());
    lo[p.name()] = p.min();
    hi[p.name()] = p.max();
    mid[p.name()] = (p.min() + p.max()) / 2;
  }
  absl::StatusOr<std::unique_ptr<ParamExpression>> e = ParamExpression::Parse(*text, names);
  if (!e.ok()) {
    r_.ValueError(f, absl::StrCat(e.status().message(), " (it may use the numeric parameters: ",
                                  absl::StrJoin(names, ", "), ")"));
    return;
  }
  for (const auto* at : {&lo, &mid, &hi}) {
    const double v = (*e)->Evaluate(*at);
    if (!(v > 0) || !std::isfinite(v)) {
      r_.ValueError(
          f, absl::StrCat("must be a positive number of seconds everywhere in the space; at ",
                          at == &lo   ? "every parameter's min"
                          : at == &hi ? "every parameter's max"
                                      : "the centre",
                          " it is ", v));
      return;
    }
  }
  sim->set_seconds_per_unit_expression(*text);
}

void Loader::LoadSimulate(const Field& f) {
  Section s(r_, f,
            {"seconds_per_unit", "seconds_per_unit_expression", "seconds_per_trial",
             "attempt_overhead", "objective", "noise", "checkpoint_every", "checkpoint_time",
             "boot_time", "seed", "tick", "client_seconds", "link_mbps"});
  if (!s.ok()) return;
  v1::Simulation* sim = spec_.mutable_simulate();
  // A plain federated run is forecast by rounds; a search is simulated by trials. Each kind's
  // keys are refused in the other, never ignored.
  const bool federated = spec_.has_federation() && spec_.parameters_size() == 0;
  for (const char* key : {"seconds_per_unit", "seconds_per_unit_expression", "seconds_per_trial",
                          "attempt_overhead", "objective", "noise", "checkpoint_every",
                          "checkpoint_time", "tick", "client_seconds", "link_mbps"}) {
    const bool rounds_key =
        absl::string_view(key) == "client_seconds" || absl::string_view(key) == "link_mbps";
    const Field* x = s.Find(key);
    if (x == nullptr || rounds_key == federated) continue;
    r_.KeyError(*x, rounds_key ? "applies to a plain federated run's forecast, not to a search"
                               : "does not apply to a plain federated run (its forecast takes "
                                 "client_seconds, link_mbps, boot_time and seed)");
  }
  auto duration = [&](const Field& x) { return r_.Duration(x); };
  auto positive_duration = [&](const Field& x) -> std::optional<double> {
    std::optional<double> v = r_.Duration(x);
    if (v && *v <= 0) {
      r_.ValueError(x, "must be > 0");
      return std::nullopt;
    }
    return v;
  };
  IfPresent<double>(s, "seconds_per_unit", positive_duration,
                    [&](double v) { sim->set_seconds_per_unit(v); });
  IfPresent<double>(s, "seconds_per_trial", positive_duration,
                    [&](double v) { sim->set_seconds_per_trial(v); });
  sim->set_client_seconds(5);
  sim->set_link_mbps(100);
  IfPresent<double>(s, "client_seconds", positive_duration,
                    [&](double v) { sim->set_client_seconds(v); });
  IfPresent<double>(
      s, "link_mbps", [&](const Field& x) { return r_.NumberAbove(x, 0, false); },
      [&](double v) { sim->set_link_mbps(v); });
  if (const Field* x = s.Find("seconds_per_unit_expression")) LoadTimeExpression(*x, sim);
  IfPresent<double>(s, "attempt_overhead", duration,
                    [&](double v) { sim->set_attempt_overhead_seconds(v); });
  IfPresent<double>(s, "checkpoint_time", duration,
                    [&](double v) { sim->set_checkpoint_seconds(v); });
  IfPresent<double>(s, "boot_time", duration, [&](double v) { sim->set_boot_seconds(v); });
  IfPresent<double>(s, "tick", positive_duration, [&](double v) { sim->set_tick_seconds(v); });
  static constexpr std::array<absl::string_view, 2> kObjectives = {"branin", "curve"};
  IfPresent<size_t>(
      s, "objective", [&](const Field& x) { return r_.Choice(x, kObjectives); },
      [&](size_t i) { sim->set_objective(std::string(kObjectives[i])); });
  IfPresent<double>(
      s, "noise", [&](const Field& x) { return r_.NumberAbove(x, 0, false); },
      [&](double v) { sim->set_noise(v); });
  IfPresent<double>(
      s, "checkpoint_every", [&](const Field& x) { return r_.NumberAbove(x, 0, true); },
      [&](double v) { sim->set_checkpoint_every(v); });
  IfPresent<uint64_t>(
      s, "seed", [&](const Field& x) { return r_.Unsigned(x); },
      [&](uint64_t v) { sim->set_seed(v); });
  if (sim->objective() == "branin") {
    for (const char* name : {"x0", "x1"}) {
      const auto& ps = spec_.parameters();
      bool found = std::any_of(ps.begin(), ps.end(), [&](const v1::Parameter& p) {
        return p.name() == name && p.type() != v1::Parameter::CATEGORICAL;
      });
      if (!found) {
        r_.ValueError(*s.Find("objective"),
                      absl::StrCat("objective branin needs numeric parameters x0 and x1 (", name,
                                   " is missing)"));
        break;
      }
    }
  }
}

// Pools name catalog entries; an experiment that names none is checked only for its shape.
// Long because each pool key gets its own positioned error.
void Loader::CheckPoolsAgainstCatalog(const Section& root) {
  const v1::Resources& res = spec_.resources();
  std::vector<CatalogError> errors;
  absl::StatusOr<Catalog> loaded = LoadCatalog(res.catalog(), &errors);
  for (const CatalogError& e : errors) {
    r_.errors().push_back({res.catalog(), e.line, e.col, e.message});
  }
  if (!loaded.ok()) {
    r_.ValueError(*catalog_field_,
                  errors.empty() ? std::string(loaded.status().message())
                                 : absl::StrCat("the catalog ", res.catalog(), " has errors"));
    return;
  }
  const Catalog& catalog = *loaded;
  const std::string catalog_name = res.catalog().empty() ? "the built-in catalog" : res.catalog();
  double cheapest = -1;
  for (int i = 0; i < res.pools_size() && i < static_cast<int>(pool_fields_.size()); ++i) {
    const v1::Pool& pool = res.pools(i);
    const PoolFields& pf = pool_fields_[i];
    if (!pf.region || !pf.instance) continue;  // only a simulated or live provider needs them
    bool ok = true;
    if (!pool.region().empty() && !catalog.HasRegion(pool.region())) {
      r_.ValueError(*pf.region, absl::StrCat("unknown region '", pool.region(), "' (", catalog_name,
                                             " has ", absl::StrJoin(catalog.regions(), ", "), ")"));
      ok = false;
    }
    if (!pool.instance().empty() && !catalog.FindInstance(pool.instance())) {
      std::vector<std::string> names;
      for (const InstanceType& t : catalog.instances()) names.push_back(t.name);
      r_.ValueError(*pf.instance,
                    absl::StrCat("unknown instance type '", pool.instance(), "' (", catalog_name,
                                 " has ", absl::StrJoin(names, ", "), ")"));
      ok = false;
    }
    if (!ok || pool.region().empty() || pool.instance().empty()) continue;
    const Market market = pool.market() == v1::Pool::SPOT       ? Market::kSpot
                          : pool.market() == v1::Pool::RESERVED ? Market::kReserved
                                                                : Market::kOnDemand;
    const Offer* offer = catalog.Find(pool.region(), pool.instance(), market);
    if (offer == nullptr) {
      r_.ValueError(pf.market ? *pf.market : *pf.instance,
                    absl::StrCat(catalog_name, " sells no ", MarketName(market), " ",
                                 pool.instance(), " in ", pool.region()));
      continue;
    }
    const double first = offer->billing.price_per_second *
                         std::max(offer->billing.minimum_seconds, offer->billing.increment_seconds);
    if (cheapest < 0 || first < cheapest) cheapest = first;
    const v1::TrialResources& need = res.per_trial();
    const InstanceType* type = catalog.FindInstance(pool.instance());
    if (type->gpus < need.gpus() || type->cpus < need.cpus() ||
        (need.gpus() > 0 && type->gpu_memory_gb < need.gpu_memory_gb())) {
      r_.ValueError(*pf.instance, absl::StrCat("instance type ", pool.instance(),
                                               " cannot hold one trial (resources.per_trial)"));
    }
  }
  if (spec_.has_federation()) {
    CheckFederatedPlacement(root, catalog);
  } else {
    for (const PoolFields& pf : pool_fields_) {
      if (pf.hosts) r_.ValueError(*pf.hosts, "applies to a federated run's participants");
    }
  }
  if (cheapest > 0 && spec_.budget().has_max_cost() && spec_.budget().max_cost() < cheapest) {
    if (max_cost_field_) {
      r_.ValueError(*max_cost_field_,
                    absl::StrCat("max_cost ", spec_.budget().max_cost(),
                                 " is less than one billing increment of the cheapest pool (",
                                 cheapest, ")"));
    }
  }
}

// A federated search places every trial's participants on its pools: each pool's max_instances
// must hold what one trial places there.
void Loader::CheckPoolsHoldOneTrial(const Section& root, const FederatedPlacement& placement) {
  const v1::Resources& res = spec_.resources();
  if (FederatedTrialsAtOnce(spec_, placement) > 0) return;
  for (int i = 0; i < res.pools_size() && i < static_cast<int>(pool_fields_.size()); ++i) {
    auto used = placement.instances().find(res.pools(i).name());
    if (used == placement.instances().end() || used->second <= res.pools(i).max_instances()) {
      continue;
    }
    r_.ValueError(pool_fields_[i].self ? *pool_fields_[i].self : *root.Find("resources"),
                  absl::StrCat("max_instances ", res.pools(i).max_instances(),
                               " cannot hold one trial's ", used->second,
                               " participants placed on this pool (each federated trial "
                               "places all its participants)"));
  }
}

// Each pool's provider (its own, else resources.provider) can place a federated run's
// participants: local or slurm launch them, static pools host participants started by hand
// (`--join`), in a plain run only, and a region's pools all launch or are all static. False
// (with the errors) otherwise.
bool Loader::CheckFederatedProviders(const Section& root) {
  const v1::Resources& res = spec_.resources();
  const bool search = spec_.parameters_size() > 0;
  auto where = [&](int i) -> const Field& {
    if (i < static_cast<int>(pool_fields_.size()) && pool_fields_[i].provider) {
      return *pool_fields_[i].provider;
    }
    return provider_field_ ? *provider_field_ : *root.Find("resources");
  };
  bool ok = true;
  std::map<std::string, std::pair<int, int>> static_pools;  // region -> (static, launching)
  for (int i = 0; i < res.pools_size(); ++i) {
    const std::string& provider = PoolProvider(res, res.pools(i));
    if (provider == "simulated" || (search && provider == "static")) {
      r_.ValueError(where(i),
                    absl::StrCat("a federated ", search ? "search" : "run",
                                 " places its participants with the local or the slurm provider",
                                 search ? "" : " (static: started by hand)", ", not ", provider,
                                 search ? " (each trial starts its own participants)" : ""));
      ok = false;
      continue;
    }
    auto& [fixed, launching] = static_pools[res.pools(i).region()];
    ++(provider == "static" ? fixed : launching);
  }
  for (const auto& [region, counts] : static_pools) {
    if (counts.first == 0 || counts.second == 0) continue;
    for (int i = 0; i < res.pools_size(); ++i) {
      if (res.pools(i).region() != region || PoolProvider(res, res.pools(i)) != "static") continue;
      r_.ValueError(where(i), absl::StrCat("region '", region, "' has static and launching pools: ",
                                           "a region's participants are all started by hand "
                                           "(static) or all launched"));
      ok = false;
      break;
    }
  }
  return ok;
}

// A federated run's resources place every participant: each region's clients and aggregator on
// pools in that region (pool.region is the region's name), the global tier in
// federation.global_region; the catalog must price each region's transfer to it. In a federated
// search each trial's participants are placed so, and the pools must hold at least one trial's.
// Keys that would be ignored (pools of no region, a budget or a global region with nothing to
// bill) are errors.
void Loader::CheckFederatedPlacement(const Section& root, const Catalog& catalog) {
  const v1::Resources& res = spec_.resources();
  const v1::Federation& fed = spec_.federation();
  const bool run = spec_.parameters_size() == 0;
  if (res.pools_size() == 0) {
    if (global_region_field_) {
      r_.ValueError(*global_region_field_,
                    "prices transfer from the participants' pools; add resources.pools");
    }
    if (run && max_cost_field_) {
      r_.ValueError(*max_cost_field_,
                    "a federated run is billed for the instances of resources.pools; add pools "
                    "that host each region's clients and aggregator");
    }
    return;
  }
  if (!CheckFederatedProviders(root)) return;
  std::set<std::string> regions;
  for (int i = 0; i < fed.regions_size(); ++i) {
    const std::string& name = fed.regions(i).name();
    regions.insert(name);
    bool clients = false, aggregator = false;
    std::vector<std::string> here;
    for (const v1::Pool& p : res.pools()) {
      if (p.region() != name) continue;
      here.push_back(p.name());
      clients = clients || PoolHosts(p, /*aggregator=*/false);
      aggregator = aggregator || PoolHosts(p, /*aggregator=*/true);
    }
    if (clients && aggregator) continue;
    if (i >= static_cast<int>(region_name_fields_.size())) continue;
    const char* missing = !clients && !aggregator ? "its clients and its aggregator"
                          : !clients              ? "its clients"
                                                  : "its aggregator";
    r_.ValueError(
        region_name_fields_[i],
        absl::StrCat("region '", name, "' has no pool that can host ", missing,
                     here.empty() ? " (no pool of resources.pools is in region '" : " (its pools: ",
                     here.empty() ? name + "'" : absl::StrJoin(here, ", "),
                     "); a client never runs outside its region"));
  }
  for (size_t i = 0; i < pool_fields_.size() && i < static_cast<size_t>(res.pools_size()); ++i) {
    const v1::Pool& p = res.pools(static_cast<int>(i));
    if (!regions.contains(p.region()) && pool_fields_[i].region) {
      r_.ValueError(*pool_fields_[i].region,
                    absl::StrCat("'", p.region(), "' is not a region of the federation (",
                                 absl::StrJoin(regions, ", "), "): the pool would host nobody"));
    }
  }
  const std::string global =
      fed.global_region().empty() ? fed.regions(0).name() : fed.global_region();
  if (global_region_field_ && global != kInternet && !catalog.HasRegion(global)) {
    r_.ValueError(*global_region_field_,
                  absl::StrCat("unknown region '", global, "' (the catalog has ",
                               absl::StrJoin(catalog.regions(), ", "),
                               "; `internet` for an orchestrator outside them)"));
    return;
  }
  for (int i = 0; i < fed.regions_size() && i < static_cast<int>(region_name_fields_.size()); ++i) {
    const std::string& name = fed.regions(i).name();
    if (!catalog.HasRegion(name) || (catalog.TransferPricePerGb(global, name) &&
                                     catalog.TransferPricePerGb(name, global))) {
      continue;
    }
    r_.ValueError(global_region_field_ ? *global_region_field_ : region_name_fields_[i],
                  MissingTransferPrice(global, name));
  }
  absl::StatusOr<FederatedPlacement> placement = FederatedPlacement::Create(spec_, catalog);
  if (placement.ok() && !run) CheckPoolsHoldOneTrial(root, *placement);
  if (placement.ok() && max_cost_field_ && spec_.budget().has_max_cost() &&
      spec_.budget().max_cost() < placement->FirstIncrements()) {
    r_.ValueError(
        *max_cost_field_,
        absl::StrCat("max_cost ", spec_.budget().max_cost(),
                     " is less than one round's cost: starting the federation's ",
                     TotalClients(fed) + fed.regions_size(), " participants costs at least ",
                     placement->FirstIncrements(), " (each pool's first billing increment)"));
  }
}

void Loader::LoadFederation(const Field& f) {
  v1::Federation* fed = spec_.mutable_federation();
  fed->set_rounds(10);
  fed->set_clients_per_round(1);
  fed->set_local_epochs(1);
  fed->set_local_batch_size(32);
  fed->set_local_lr(0.01);
  fed->set_aggregation("fedavg");
  fed->set_server_optimizer("fedavg");
  fed->set_server_lr(1);
  fed->set_min_clients(1);
  fed->set_eval_every(1);
  fed->set_partition("iid");
  fed->set_dirichlet_alpha(0.5);
  fed->set_secure_aggregation(true);
  fed->set_trim_fraction(0.1);
  fed->set_byzantine_clients(1);
  fed->set_update_compression("none");
  Section s(r_, f,
            {"regions",
             "rounds",
             "clients_per_round",
             "local_epochs",
             "local_batch_size",
             "local_lr",
             "proximal_mu",
             "aggregation",
             "server_optimizer",
             "server_lr",
             "min_clients",
             "max_failed_rounds",
             "round_deadline",
             "eval_every",
             "partition",
             "dirichlet_alpha",
             "secure_aggregation",
             "seed",
             "examples_per_client",
             "validation_examples",
             "trim_fraction",
             "byzantine_clients",
             "krum_selected",
             "client_command",
             "dp",
             "hide_region_sums",
             "update_compression",
             "mode",
             "buffer_size",
             "max_staleness",
             "staleness_weighting",
             "stragglers",
             "client_selection",
             "model",
             "data",
             "data_dir",
             "evaluate_command",
             "global_region",
             "reproducible"});
  if (!s.ok()) return;
  if (const Field* g = s.Find("global_region")) {
    global_region_field_.emplace(*g);
    if (std::optional<std::string> v = IdString(*g, "a region name")) fed->set_global_region(*v);
  }
  const int64_t total = LoadRegions(s, fed);
  LoadFederationOptions(s, fed);
  LoadRobustAndCommandOptions(s, fed);
  if (const Field* dp = s.Find("dp")) LoadDifferentialPrivacy(*dp, fed);
  LoadBufferedMode(s, fed);
  LoadReproducible(s, fed, total);
  if (total > 0) CheckSecureRegions(s, *fed);
  if (const Field* st = s.Find("stragglers")) LoadStragglers(*st, fed);
  if (const Field* model = s.Find("model")) LoadModel(*model, fed);
  LoadData(s, fed, total);
  if (total <= 0) return;
  if (const Field* min = s.Find("min_clients"); min && fed->min_clients() > total) {
    r_.ValueError(*min, absl::StrCat("must be <= the total number of clients (", total, "), got ",
                                     fed->min_clients()));
  }
  if (const Field* per = s.Find("clients_per_round"); per && fed->clients_per_round() > total) {
    r_.ValueError(*per, absl::StrCat("must be <= the total number of clients (", total, "), got ",
                                     per->value.Scalar()));
  } else if (per && fed->secure_aggregation() && fed->mode() != "buffered" &&
             RegionQuotas(*fed).empty()) {
    r_.ValueError(
        *per,
        absl::StrCat("secure aggregation samples at least 2 clients in each region, so a "
                     "round needs at least ",
                     2 * fed->regions_size(), " clients (2 x ", fed->regions_size(), " regions); ",
                     per->value.Scalar(), " gives ", ClientsPerRound(*fed), " of the ", total,
                     " (raise clients_per_round, or set secure_aggregation: false; it "
                     "defaults to true)"));
  }
}

// Robust rules need each client's update in the clear, which secure aggregation hides.
void Loader::LoadRobustAndCommandOptions(const Section& s, v1::Federation* fed) {
  IfPresent<double>(
      s, "trim_fraction",
      [&](const Field& x) -> std::optional<double> {
        std::optional<double> v = r_.NumberAbove(x, 0, false);
        if (v && *v >= 0.5) {
          r_.ValueError(x, absl::StrCat("must be < 0.5 (a fraction cut at each end), got ", *v));
          return std::nullopt;
        }
        return v;
      },
      [&](double v) { fed->set_trim_fraction(v); });
  IfPresent<int64_t>(
      s, "byzantine_clients", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { fed->set_byzantine_clients(v); });
  IfPresent<int64_t>(
      s, "krum_selected", [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); },
      [&](int64_t v) { fed->set_krum_selected(v); });
  if (const Field* c = s.Find("client_command")) {
    std::vector<Field> args = r_.Elements(*c);
    if (c->value.IsSequence() && args.empty()) r_.ValueError(*c, "must not be empty");
    for (const Field& arg : args) {
      if (std::optional<std::string> v = r_.String(arg)) fed->add_client_command(*v);
    }
  }
  if (fed->hide_region_sums() && (!fed->secure_aggregation() || fed->regions_size() < 2)) {
    r_.ValueError(
        *s.Find("hide_region_sums"),
        !fed->secure_aggregation()
            ? "needs secure_aggregation: true (the regions' sums are masked sums of "
              "securely aggregated clients)"
            : "needs at least 2 regions (with one region the total is that region's sum)");
  }
  // A later slice maps the quantised values into the SecAgg ring; until then, plaintext only.
  // Secure aggregation sums integers in a ring: int8 maps there (8-bit levels), fp16 does not.
  if (fed->update_compression() == "fp16" && fed->secure_aggregation()) {
    r_.ValueError(*s.Find("update_compression"),
                  "'fp16' is a floating-point encoding, and secure aggregation sums integers in a "
                  "ring; use update_compression: int8 (8-bit levels in the ring), or set "
                  "secure_aggregation: false (secure_aggregation defaults to true)");
  }
  const bool robust = fed->aggregation() != "fedavg";
  if (robust && fed->secure_aggregation()) {
    const Field* at = s.Find("aggregation");
    r_.ValueError(
        *at,
        absl::StrCat("'", fed->aggregation(),
                     "' needs each client's update in the clear, which secure "
                     "aggregation hides; use aggregation: fedavg, or set secure_aggregation: false "
                     "(secure_aggregation defaults to true)"));
  }
}

// federation.dp: sigma and C are required; distributed noise needs secure aggregation (otherwise
// the aggregator sees each client's weakly noised update) and a robust rule has another
// sensitivity than the clipped mean the accountant assumes.
void Loader::LoadDifferentialPrivacy(const Field& f, v1::Federation* fed) {
  v1::DifferentialPrivacy* dp = fed->mutable_dp();
  dp->set_delta(1e-5);
  dp->set_noise("central");
  Section s(r_, f, {"noise_multiplier", "clip_norm", "delta", "target_epsilon", "noise"});
  if (!s.ok()) return;
  auto positive = [&](const Field& x) { return r_.NumberAbove(x, 0, true); };
  if (const Field* x = s.Require("noise_multiplier")) {
    if (std::optional<double> v = positive(*x)) dp->set_noise_multiplier(*v);
  }
  if (const Field* x = s.Require("clip_norm")) {
    if (std::optional<double> v = positive(*x)) dp->set_clip_norm(*v);
  }
  IfPresent<double>(
      s, "delta",
      [&](const Field& x) -> std::optional<double> {
        std::optional<double> v = positive(x);
        if (v && *v >= 1) {
          r_.ValueError(x, absl::StrCat("must be < 1 (a probability), got ", *v));
          return std::nullopt;
        }
        return v;
      },
      [&](double v) { dp->set_delta(v); });
  IfPresent<double>(s, "target_epsilon", positive, [&](double v) { dp->set_target_epsilon(v); });
  IfPresent<size_t>(
      s, "noise", [&](const Field& x) { return r_.Choice(x, kDpNoise); },
      [&](size_t i) { dp->set_noise(std::string(kDpNoise[i])); });
  if (dp->noise() == "distributed" && !fed->secure_aggregation()) {
    r_.ValueError(*s.Find("noise"),
                  "distributed noise needs secure_aggregation: true (otherwise "
                  "the aggregator sees each client's update with only its share "
                  "of the noise); use noise: central");
  }
  if (fed->aggregation() != "fedavg") {
    r_.ValueError(f, absl::StrCat("differential privacy needs aggregation: fedavg (the "
                                  "accountant assumes a clipped mean, not '",
                                  fed->aggregation(), "')"));
  }
}

// federation.model: {file: PATH}, the user's own model as safetensors. Only the header is read
// here (a model may be many gigabytes); it is checked against the file's size, and the layout
// travels in the spec. Only a command client can train a model the built-in trainer does not
// know.
void Loader::LoadModel(const Field& f, v1::Federation* fed) {
  Section s(r_, f, {"file"});
  if (!s.ok()) return;
  const Field* file = s.Require("file");
  if (file == nullptr) return;
  std::optional<std::string> given = r_.NonEmptyString(*file);
  if (!given) return;
  std::error_code ec;
  const std::string path =
      std::filesystem::absolute(WorkingDir(*given), ec).lexically_normal().string();
  absl::StatusOr<TensorFile> layout = ReadSafetensorsLayout(path);
  if (!layout.ok()) {
    r_.ValueError(*file, layout.status().message());
    return;
  }
  if (fed->client_command().empty()) {
    r_.ValueError(*file,
                  "a model of your own needs federation.client_command (the built-in trainer "
                  "trains only its own model)");
  }
  fed->set_model_file(path);
  for (const Tensor& t : layout->tensors) {
    v1::TensorLayout* l = fed->add_model_layout();
    l->set_name(t.name);
    l->set_dtype(std::string(DTypeName(t.dtype)));
    for (int64_t d : t.shape) l->add_shape(d);
  }
}

// federation.data (fashion-mnist | own), data_dir and evaluate_command. With data: own Sextant
// partitions nothing, so the Fashion-MNIST keys do not apply, only a command can read the data,
// and the model must be the user's: the built-in model is scored on Fashion-MNIST.
void Loader::LoadData(const Section& s, v1::Federation* fed, int64_t total) {
  fed->set_data("fashion-mnist");
  // A model key whose file is refused has its own error: these checks take it as given.
  const bool own_model = s.Find("model") != nullptr;
  IfPresent<size_t>(
      s, "data", [&](const Field& x) { return r_.Choice(x, kFederatedData); },
      [&](size_t i) { fed->set_data(std::string(kFederatedData[i])); });
  if (const Field* c = s.Find("evaluate_command")) {
    std::vector<Field> args = r_.Elements(*c);
    if (c->value.IsSequence() && args.empty()) r_.ValueError(*c, "must not be empty");
    for (const Field& arg : args) {
      if (std::optional<std::string> v = r_.String(arg)) fed->add_evaluate_command(*v);
    }
    if (!args.empty() && !own_model) {
      r_.ValueError(*c,
                    "needs a model of your own (federation.model.file); the built-in model is "
                    "scored by the built-in evaluator on Fashion-MNIST");
    }
  }
  const Field* data = s.Find("data");
  const Field* dir = s.Find("data_dir");
  if (fed->data() != "own") {
    if (dir != nullptr) r_.KeyError(*dir, "applies to data: own (each client's own data)");
    return;
  }
  for (const char* key : {"partition", "dirichlet_alpha", "validation_examples"}) {
    if (const Field* x = s.Find(key)) {
      r_.KeyError(*x, "applies to data: fashion-mnist; with data: own Sextant partitions nothing");
    }
  }
  if (fed->client_command().empty()) {
    r_.ValueError(*data,
                  "own needs federation.client_command: Sextant partitions nothing, and each "
                  "client's command reads its own data");
  }
  if (!own_model) {
    r_.ValueError(*data,
                  "own needs a model of your own (federation.model.file): the built-in model is "
                  "scored on Fashion-MNIST");
  }
  if (dir != nullptr && total > 0) LoadDataDirs(*dir, fed);
}

// federation.data_dir: a folder template relative to the experiment file, with {region} and
// {index} standing for each client's region and index; every client's folder must exist and
// differ from the others'.
void Loader::LoadDataDirs(const Field& f, v1::Federation* fed) {
  std::optional<std::string> given = r_.NonEmptyString(f);
  if (!given) return;
  for (size_t at = given->find('{'); at != std::string::npos; at = given->find('{', at + 1)) {
    if (given->compare(at, 8, "{region}") != 0 && given->compare(at, 7, "{index}") != 0) {
      r_.ValueError(f, absl::StrCat("'", given->substr(at, given->find('}', at) - at + 1),
                                    "' is not a placeholder; use {region} and {index}"));
      return;
    }
  }
  std::map<std::string, std::string> seen;                // folder -> the client that has it
  std::vector<std::pair<std::string, std::string>> dirs;  // (client, folder) in global order
  for (const v1::FederatedRegion& r : fed->regions()) {
    for (int i = 0; i < r.clients(); ++i) {
      const std::string client = absl::StrCat(r.name(), "/", i);
      const std::string path =
          std::filesystem::absolute(
              WorkingDir(absl::StrReplaceAll(
                  *given, {{"{region}", r.name()}, {"{index}", absl::StrCat(i)}})))
              .lexically_normal()
              .string();
      if (auto [it, fresh] = seen.emplace(path, client); !fresh) {
        r_.ValueError(
            f, absl::StrCat("gives clients ", it->second, " and ", client, " the same folder ",
                            path, "; put {index} (and {region}) in it"));
        return;
      }
      dirs.emplace_back(client, path);
    }
  }
  for (const auto& [client, path] : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      r_.ValueError(f, absl::StrCat("client ", client, "'s data folder ", path, " does not exist"));
      return;
    }
    fed->add_client_data_dirs(path);
  }
}

// Returns the total number of clients, or 0 when the regions are missing or invalid.
int64_t Loader::LoadRegions(const Section& s, v1::Federation* fed) {
  const Field* regions = s.Find("regions");
  if (regions == nullptr) {
    r_.Error(KeyPos(s.field()), Join(s.field().path, "regions"),
             "required key is missing (at least one region with clients)");
    return 0;
  }
  std::vector<Field> elements = r_.Elements(*regions);
  if (regions->value.IsSequence() && elements.empty()) {
    r_.ValueError(*regions, "needs at least one region");
  }
  int64_t total = 0;
  bool valid = !elements.empty();
  std::set<std::string> names;
  for (const Field& e : elements) {
    v1::FederatedRegion* region = fed->add_regions();
    Section rs(r_, e, {"name", "clients"});
    valid = valid && rs.ok();
    if (!rs.ok()) continue;
    const Field* name = rs.Require("name");
    if (name) region_name_fields_.push_back(*name);
    if (std::optional<std::string> v = name ? IdString(*name, "a region name") : std::nullopt) {
      if (!names.insert(*v).second)
        r_.ValueError(*name, absl::StrCat("duplicate region '", *v, "'"));
      region->set_name(*v);
    }
    const Field* clients = rs.Require("clients");
    std::optional<int64_t> n = clients ? r_.Integer(*clients, 1, kInt32Max) : std::nullopt;
    valid = valid && n.has_value();
    if (n) region->set_clients(*n);
    total += n.value_or(0);
  }
  return valid ? total : 0;
}

// federation.mode: buffered (FedBuff), plaintext or secure FedAvg: the keys that shape
// synchronous rounds, or that need a round's fixed set of clients, are refused by name.
void Loader::LoadBufferedMode(const Section& s, v1::Federation* fed) {
  fed->set_mode("sync");
  IfPresent<size_t>(
      s, "mode", [&](const Field& x) { return r_.Choice(x, kFederationModes); },
      [&](size_t i) { fed->set_mode(std::string(kFederationModes[i])); });
  const bool buffered = fed->mode() == "buffered";
  fed->set_client_selection("random");
  IfPresent<size_t>(
      s, "client_selection", [&](const Field& x) { return r_.Choice(x, kClientSelections); },
      [&](size_t i) { fed->set_client_selection(std::string(kClientSelections[i])); });
  if (const Field* x = s.Find("client_selection"); x && fed->client_selection() != "random") {
    if (buffered) {
      r_.ValueError(*x, "applies to synchronous rounds; with mode: buffered every client trains");
    } else if (fed->hide_region_sums()) {
      r_.ValueError(*x, absl::StrCat("'", fed->client_selection(),
                                     "' needs each client's delivery time, which the regions' "
                                     "masked sums (hide_region_sums) do not carry"));
    }
  }
  for (const char* key : {"buffer_size", "max_staleness", "staleness_weighting"}) {
    if (const Field* x = s.Find(key); x && !buffered) {
      r_.ValueError(*x, "applies to mode: buffered only");
    }
  }
  if (!buffered) return;
  int64_t clients = 0;
  for (const v1::FederatedRegion& r : fed->regions()) clients += r.clients();
  fed->set_buffer_size(static_cast<int32_t>(std::max<int64_t>(1, (clients + 1) / 2)));
  fed->set_max_staleness(4);
  fed->set_staleness_weighting("polynomial");
  IfPresent<int64_t>(
      s, "buffer_size", [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); },
      [&](int64_t v) { fed->set_buffer_size(v); });
  IfPresent<int64_t>(
      s, "max_staleness", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { fed->set_max_staleness(v); });
  IfPresent<size_t>(
      s, "staleness_weighting", [&](const Field& x) { return r_.Choice(x, kStalenessWeightings); },
      [&](size_t i) { fed->set_staleness_weighting(std::string(kStalenessWeightings[i])); });
  // A step applies buffer_size of the clients' updates, and every client trains continuously:
  // the model takes clients / buffer_size steps for each update of every client. The default
  // server_lr (buffer_size / clients) moves it as far per such generation as one synchronous
  // round of every client does (bench/federated/equal_updates).
  if (!s.Find("server_lr") && clients > 0) {
    fed->set_server_lr(std::min(1.0, static_cast<double>(fed->buffer_size()) /
                                         static_cast<double>(clients)));
  }
  const Field* mode = s.Find("mode");
  auto refuse = [&](const char* key, absl::string_view why) {
    if (const Field* x = s.Find(key)) {
      r_.ValueError(*x, absl::StrCat("does not apply to mode: buffered (", why, ")"));
    }
  };
  refuse("clients_per_round", "every client trains continuously");
  refuse("round_deadline", "a server step waits for buffer_size updates, not a deadline");
  refuse("min_clients", "use buffer_size");
  refuse("max_failed_rounds", "a failed client's update is only missing from its buffer");
  if (fed->secure_aggregation() && fed->hide_region_sums()) {
    refuse("hide_region_sums", "the regions push their buffers as they fill, not in one round");
  } else if (fed->secure_aggregation() && fed->buffer_size() < 2 * fed->regions_size()) {
    // Each region's buffer is one SecAgg instance: one client alone would be its own sum.
    const Field* x = s.Find("buffer_size");
    r_.ValueError(x ? *x : *mode,
                  absl::StrCat("secure buffered rounds need buffer_size >= 2 per region (",
                               2 * fed->regions_size(),
                               " here): each region's share of a buffer "
                               "is one secure-aggregation instance of at least 2 clients"));
  } else if (fed->aggregation() != "fedavg") {
    r_.ValueError(*mode, "buffered rounds fold a weighted mean; use aggregation: fedavg");
  } else if (fed->has_dp()) {
    r_.ValueError(*mode, "buffered rounds do not account differential privacy yet; remove dp");
  }
}

// Secure aggregation masks a region's sum among its clients: the sum of one client is that
// client's update, which its aggregator would then see in the clear. Reported at the region's
// clients (the loader has already checked that each region is a mapping with them).
void Loader::CheckSecureRegions(const Section& s, const v1::Federation& fed) {
  if (!fed.secure_aggregation()) return;
  std::vector<Field> regions = r_.Elements(*s.Find("regions"));
  for (size_t i = 0; i < regions.size() && i < static_cast<size_t>(fed.regions_size()); ++i) {
    const v1::FederatedRegion& region = fed.regions(static_cast<int>(i));
    if (region.clients() >= 2) continue;
    const YAML::Node& value = regions[i].value;
    const Field clients(Join(regions[i].path, "clients"), YAML::Node(), value["clients"]);
    r_.ValueError(clients,
                  absl::StrCat("secure aggregation needs at least 2 clients in every region; "
                               "region '",
                               region.name(), "' has ", region.clients(),
                               ", whose sum would be its one client's update in the clear (add a "
                               "client, or set secure_aggregation: false; it defaults to true)"));
  }
}

// federation.stragglers: {clients: [REGION/INDEX, ...], slowdown: X}.
void Loader::LoadStragglers(const Field& f, v1::Federation* fed) {
  v1::Stragglers* st = fed->mutable_stragglers();
  Section s(r_, f, {"clients", "slowdown"});
  if (!s.ok()) return;
  if (const Field* x = s.Require("slowdown")) {
    if (std::optional<double> v = r_.NumberAbove(*x, 1, false)) st->set_slowdown(*v);
  }
  if (const Field* c = s.Require("clients")) {
    for (const Field& e : r_.Elements(*c)) {
      std::optional<std::string> id = r_.String(e);
      if (!id) continue;
      const size_t slash = id->rfind('/');
      bool known = false;
      int index = -1;
      if (slash != std::string::npos && absl::SimpleAtoi(id->substr(slash + 1), &index)) {
        for (const v1::FederatedRegion& r : fed->regions()) {
          known = known || (r.name() == id->substr(0, slash) && index >= 0 && index < r.clients());
        }
      }
      if (!known) {
        r_.ValueError(e,
                      absl::StrCat("'", *id, "' is not a client of the federation (REGION/INDEX, ",
                                   "INDEX from 0)"));
        continue;
      }
      st->add_clients(*id);
    }
  }
}

// federation.reproducible. Buffered rounds are reproducible only in lockstep, every client's
// update in every step: with fewer, which updates a step takes depends on timing. A search by
// rounds pauses and resumes trials, so there it defaults to true where it can hold.
void Loader::LoadReproducible(const Section& s, v1::Federation* fed, int64_t total_clients) {
  const bool lockstep = fed->mode() != "buffered" || fed->buffer_size() == total_clients;
  fed->set_reproducible(spec_.search().fidelity().name() == "rounds" && lockstep);
  IfPresent<bool>(
      s, "reproducible", [&](const Field& x) { return r_.Bool(x); },
      [&](bool v) { fed->set_reproducible(v); });
  if (fed->reproducible() && !lockstep) {
    r_.ValueError(*s.Find("reproducible"),
                  absl::StrCat("buffered rounds are reproducible only when every step takes "
                               "every client's update (buffer_size: ",
                               total_clients, "); with buffer_size ", fed->buffer_size(),
                               " which updates a step takes depends on timing"));
  }
}

void Loader::LoadFederationOptions(const Section& s, v1::Federation* fed) {
  auto count = [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); };
  auto positive = [&](const Field& x) { return r_.NumberAbove(x, 0, true); };
  IfPresent<int64_t>(s, "rounds", count, [&](int64_t v) { fed->set_rounds(v); });
  IfPresent<double>(s, "clients_per_round", positive,
                    [&](double v) { fed->set_clients_per_round(v); });
  IfPresent<int64_t>(s, "local_epochs", count, [&](int64_t v) { fed->set_local_epochs(v); });
  IfPresent<int64_t>(s, "local_batch_size", count,
                     [&](int64_t v) { fed->set_local_batch_size(v); });
  IfPresent<double>(s, "local_lr", positive, [&](double v) { fed->set_local_lr(v); });
  IfPresent<double>(
      s, "proximal_mu", [&](const Field& x) { return r_.NumberAbove(x, 0, false); },
      [&](double v) { fed->set_proximal_mu(v); });
  IfPresent<size_t>(
      s, "aggregation", [&](const Field& x) { return r_.Choice(x, kAggregations); },
      [&](size_t i) { fed->set_aggregation(std::string(kAggregations[i])); });
  IfPresent<size_t>(
      s, "server_optimizer", [&](const Field& x) { return r_.Choice(x, kServerOptimizers); },
      [&](size_t i) { fed->set_server_optimizer(std::string(kServerOptimizers[i])); });
  IfPresent<double>(s, "server_lr", positive, [&](double v) { fed->set_server_lr(v); });
  IfPresent<int64_t>(s, "min_clients", count, [&](int64_t v) { fed->set_min_clients(v); });
  IfPresent<int64_t>(s, "max_failed_rounds", count,
                     [&](int64_t v) { fed->set_max_failed_rounds(v); });
  IfPresent<double>(
      s, "round_deadline", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { fed->set_round_deadline_seconds(v); });
  IfPresent<int64_t>(s, "eval_every", count, [&](int64_t v) { fed->set_eval_every(v); });
  IfPresent<size_t>(
      s, "partition", [&](const Field& x) { return r_.Choice(x, kPartitions); },
      [&](size_t i) { fed->set_partition(std::string(kPartitions[i])); });
  IfPresent<double>(s, "dirichlet_alpha", positive, [&](double v) { fed->set_dirichlet_alpha(v); });
  IfPresent<bool>(
      s, "secure_aggregation", [&](const Field& x) { return r_.Bool(x); },
      [&](bool v) { fed->set_secure_aggregation(v); });
  IfPresent<bool>(
      s, "hide_region_sums", [&](const Field& x) { return r_.Bool(x); },
      [&](bool v) { fed->set_hide_region_sums(v); });
  IfPresent<size_t>(
      s, "update_compression", [&](const Field& x) { return r_.Choice(x, kUpdateCompressions); },
      [&](size_t i) { fed->set_update_compression(std::string(kUpdateCompressions[i])); });
  IfPresent<int64_t>(
      s, "seed", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { fed->set_seed(static_cast<uint64_t>(v)); });
  IfPresent<int64_t>(s, "examples_per_client", count,
                     [&](int64_t v) { fed->set_examples_per_client(v); });
  IfPresent<int64_t>(
      s, "validation_examples", [&](const Field& x) { return r_.Integer(x, 1, 30000); },
      [&](int64_t v) { fed->set_validation_examples(v); });
}

}  // namespace

std::string LoadError::ToString() const {
  return absl::StrCat(file, ":", line, ":", col, ": ", message);
}

LoadResult LoadExperimentFromString(const std::string& yaml, const std::string& file) {
  return Loader(file).Run(yaml);
}

LoadResult LoadExperimentFile(const std::string& path) {
  auto fail = [&](std::string message) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, std::move(message)});
    return result;
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return fail(absl::StrCat("cannot read: ", std::generic_category().message(errno)));
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
    if (static_cast<int64_t>(text.size()) > kMaxExperimentFileBytes) {
      std::fclose(f);
      return fail(absl::StrCat("cannot read: larger than ", kMaxExperimentFileBytes, " bytes"));
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return fail(absl::StrCat("cannot read: ", std::generic_category().message(err)));
  return LoadExperimentFromString(text, path);
}

SearchSpace ToSearchSpace(const v1::ExperimentSpec& spec) {
  SearchSpace space;
  for (const v1::Parameter& p : spec.parameters()) {
    ParamSpec ps;
    ps.name = p.name();
    switch (p.type()) {
      case v1::Parameter::INT:
        ps.kind = ParamSpec::Kind::kInt;
        break;
      case v1::Parameter::CATEGORICAL:
        ps.kind = ParamSpec::Kind::kCategorical;
        break;
      default:
        ps.kind = ParamSpec::Kind::kFloat;
        break;
    }
    ps.min = p.min();
    ps.max = p.max();
    ps.log = p.log();
    ps.values.assign(p.values().begin(), p.values().end());
    ps.grid_points = p.grid_points();
    ps.step = p.step();
    ps.when.insert(p.when().begin(), p.when().end());
    space.params.push_back(std::move(ps));
  }
  return space;
}

}  // namespace sextant
