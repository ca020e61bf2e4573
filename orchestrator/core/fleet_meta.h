// A run's meta "fleet": what its instances did, by pool, written by the live fleet, the
// simulator and a billed federated run, and read by `results` and by a resumed run.
#ifndef SEXTANT_ORCHESTRATOR_CORE_FLEET_META_H_
#define SEXTANT_ORCHESTRATOR_CORE_FLEET_META_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace sextant {

// One pool's counters for the results.
struct FleetPoolStats {
  std::string name, region, market;
  int launched = 0;
  int launch_failures = 0;
  int interruptions = 0;  // spot instances taken back
  int preemptions = 0;    // trials (or federated participants) running on them then
};

struct FleetMeta {
  std::string provider;
  double committed = 0;  // dollars owed when written
  int live_instances = 0;
  std::map<std::string, FleetPoolStats> pools;  // by name
};

// {"provider", "committed", "live_instances", "pools": {NAME: {"region", "market",
// "launched", "launch_failures", "interruptions", "preemptions"}}}.
std::string FleetMetaToJson(const FleetMeta& meta);
// The pools of a stored meta "fleet" (their name filled in); empty for text that is not one.
std::map<std::string, FleetPoolStats> PoolsFromFleetMeta(absl::string_view json);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_FLEET_META_H_
