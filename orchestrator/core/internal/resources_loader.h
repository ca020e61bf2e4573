#ifndef SEXTANT_ORCHESTRATOR_CORE_INTERNAL_RESOURCES_LOADER_H_
#define SEXTANT_ORCHESTRATOR_CORE_INTERNAL_RESOURCES_LOADER_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "orchestrator/core/internal/loader_support.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant::loader_internal {

// Loads an experiment file's `resources:` (provider, pools, catalog, placement, per-trial needs)
// and `simulate:` into the context's spec, and checks the pools against the catalog once the whole
// file is loaded; errors go to the context's reader. Not thread-safe; one per load. Holds
// references into the context, which must outlive it.
class ResourcesLoader {
 public:
  explicit ResourcesLoader(LoadContext& c) : r_(c.r), spec_(c.spec), kept_(c.kept), file_(c.file) {}

  // Fills spec.resources, with its defaults when `resources:` is absent.
  void LoadResources(const Section& root);

  // Fills spec.simulate from the `simulate:` entry f. Call after the parameters and the
  // federation are loaded: which keys apply, and the time expression, depend on them.
  void LoadSimulate(const Field& f);

  // Checks the pools against the catalog (resources.catalog, else the built-in one): their
  // regions, instances and offers, a federated run's placement of its participants, and
  // budget.max_cost against the cheapest first billing increment. Call once every other section
  // is loaded, after LoadResources.
  void CheckPoolsAgainstCatalog(const Section& root);

 private:
  // Positions of pool keys, for errors found once the catalog is known.
  struct PoolFields {
    std::optional<Field> region, instance, market, hosts, provider, self;
  };

  void LoadPool(const Field& f, std::set<std::string>& names, v1::Pool* pool);
  void LoadResourceOptions(const Section& s, v1::Resources* resources);
  void LoadTimeExpression(const Field& f, v1::Simulation* sim);
  void CheckPoolsHoldOneTrial(const Section& root, const FederatedPlacement& placement);
  void CheckFederatedPlacement(const Section& root, const Catalog& catalog);
  bool CheckFederatedProviders(const Section& root);

  Reader& r_;
  v1::ExperimentSpec& spec_;
  KeptFields& kept_;
  const std::string& file_;
  std::vector<PoolFields> pool_fields_;
  std::optional<Field> catalog_field_, provider_field_;
};

}  // namespace sextant::loader_internal

#endif  // SEXTANT_ORCHESTRATOR_CORE_INTERNAL_RESOURCES_LOADER_H_
