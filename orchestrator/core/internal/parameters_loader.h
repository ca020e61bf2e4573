#ifndef SEXTANT_ORCHESTRATOR_CORE_INTERNAL_PARAMETERS_LOADER_H_
#define SEXTANT_ORCHESTRATOR_CORE_INTERNAL_PARAMETERS_LOADER_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/core/internal/loader_support.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/search_space.h"

namespace sextant::loader_internal {

// Loads an experiment file's `parameters:` (the search space and its `when:` conditions) and
// `search:` (whose enqueued points and fidelity are checked against that space) into the context's
// spec; errors go to its reader. Not thread-safe; one per load. Holds references into the context,
// which must outlive it.
class ParametersLoader {
 public:
  explicit ParametersLoader(LoadContext& c)
      : r_(c.r), spec_(c.spec), kept_(c.kept), file_(c.file) {}

  // Fills spec.parameters in declaration order and keeps each entry in kept.parameters.
  // `parameters:` is required, with at least one entry, unless may_be_empty.
  void LoadParameters(const Section& root, bool may_be_empty);

  // Fills spec.search, with its defaults when `search:` is absent, and keeps search.sampler,
  // scheduler, max_trials, warm_start and the fidelity's name and max in kept. Call after
  // LoadParameters: enqueued points are checked against the loaded space.
  void LoadSearch(const Section& root);

 private:
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

  void LoadParameter(const Field& f, std::vector<PendingWhen>& whens);
  void LoadRange(const Section& s, v1::Parameter* p, bool integral);
  void LoadStep(const Field& f, v1::Parameter* p, bool integral);
  void LoadCategorical(const Section& s, v1::Parameter* p);
  void LoadConditions(const std::vector<PendingWhen>& whens);
  std::optional<std::string> ConditionValue(const v1::Parameter& target, const Field& f);
  void CheckConditionCycles(const std::vector<ConditionEdge>& edges);
  // search.mode and search.lease.
  void LoadSearchMode(const Section& s, v1::Search* search);
  // search.enqueue and search.warm_start.
  void LoadEnqueue(const Field& f, v1::Search* search);
  std::optional<ParamValue> EnqueuedValue(const ParamSpec& spec, const Field& f);
  void LoadWarmStart(const Field& f, v1::Search* search);
  void LoadFidelity(const Field& f, v1::Fidelity* fidelity);

  Reader& r_;
  v1::ExperimentSpec& spec_;
  KeptFields& kept_;
  const std::string& file_;
  // Parameters whose min, max, step or values did not load: their stored domain is a
  // placeholder, so values checked against it (enqueue, when:) would only repeat the error in
  // other words.
  std::set<std::string> unranged_;
};

}  // namespace sextant::loader_internal

#endif  // SEXTANT_ORCHESTRATOR_CORE_INTERNAL_PARAMETERS_LOADER_H_
