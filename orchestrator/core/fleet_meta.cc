#include "orchestrator/core/fleet_meta.h"

#include "nlohmann/json.hpp"

namespace sextant {

std::string FleetMetaToJson(const FleetMeta& meta) {
  nlohmann::json pools = nlohmann::json::object();
  for (const auto& [name, p] : meta.pools) {
    pools[name] = {{"region", p.region},
                   {"market", p.market},
                   {"launched", p.launched},
                   {"launch_failures", p.launch_failures},
                   {"interruptions", p.interruptions},
                   {"preemptions", p.preemptions}};
  }
  return nlohmann::json({{"provider", meta.provider},
                         {"committed", meta.committed},
                         {"live_instances", meta.live_instances},
                         {"pools", pools}})
      .dump();
}

std::map<std::string, FleetPoolStats> PoolsFromFleetMeta(absl::string_view json) {
  std::map<std::string, FleetPoolStats> out;
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object() || !doc.contains("pools") || !doc["pools"].is_object()) return out;
  for (const auto& [name, p] : doc["pools"].items()) {
    if (!p.is_object()) continue;
    FleetPoolStats& st = out[name];
    st.name = name;
    st.region = p.value("region", "");
    st.market = p.value("market", "");
    st.launched = p.value("launched", 0);
    st.launch_failures = p.value("launch_failures", 0);
    st.interruptions = p.value("interruptions", 0);
    st.preemptions = p.value("preemptions", 0);
  }
  return out;
}

}  // namespace sextant
