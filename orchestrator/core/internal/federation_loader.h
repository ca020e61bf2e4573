#ifndef SEXTANT_ORCHESTRATOR_CORE_INTERNAL_FEDERATION_LOADER_H_
#define SEXTANT_ORCHESTRATOR_CORE_INTERNAL_FEDERATION_LOADER_H_

#include <cstdint>
#include <string>

#include "orchestrator/core/internal/loader_support.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant::loader_internal {

// Loads an experiment file's `federation:` block into the context's spec; errors go to its reader.
// Not thread-safe; one per load. Holds references into the context, which must outlive it.
class FederationLoader {
 public:
  explicit FederationLoader(LoadContext& c)
      : r_(c.r), spec_(c.spec), kept_(c.kept), file_(c.file) {}

  // Fills spec.federation from the `federation:` entry f, with its defaults, and keeps
  // federation.global_region and each region's name in kept. Call after the search is loaded:
  // a search by rounds makes rounds reproducible by default.
  void LoadFederation(const Field& f);

 private:
  // Returns the total number of clients, or 0 when the regions are missing or invalid.
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

  Reader& r_;
  v1::ExperimentSpec& spec_;
  KeptFields& kept_;
  const std::string& file_;
};

}  // namespace sextant::loader_internal

#endif  // SEXTANT_ORCHESTRATOR_CORE_INTERNAL_FEDERATION_LOADER_H_
