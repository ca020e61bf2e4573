#include "orchestrator/core/internal/resources_loader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <map>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregator/federation_plan.h"
#include "orchestrator/cost/param_expression.h"

namespace sextant::loader_internal {
namespace {

constexpr std::array<absl::string_view, 4> kProviders = {"local", "slurm", "simulated", "static"};
constexpr std::array<absl::string_view, 3> kMarkets = {"spot", "on_demand", "reserved"};
constexpr std::array<absl::string_view, 3> kPoolHosts = {"any", "clients", "aggregator"};
// A pool's own provider (resources.provider's values but simulated, which runs every pool).
constexpr std::array<absl::string_view, 3> kPoolProviders = {"local", "slurm", "static"};

}  // namespace

void ResourcesLoader::LoadResources(const Section& root) {
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

void ResourcesLoader::LoadPool(const Field& f, std::set<std::string>& names, v1::Pool* pool) {
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
    if (auto v = r_.IdString(*name, "a pool name")) {
      if (!names.insert(*v).second) r_.ValueError(*name, absl::StrCat("duplicate pool '", *v, "'"));
      pool->set_name(*v);
    }
  }
  auto text = [&](const Field& x) { return r_.NonEmptyString(x); };
  IfPresent<std::string>(
      s, "region", [&](const Field& x) { return r_.IdString(x, "a region name"); },
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

void ResourcesLoader::LoadResourceOptions(const Section& s, v1::Resources* resources) {
  resources->mutable_placement()->set_policy("spot_first");
  resources->mutable_placement()->set_preemption_cooldown_seconds(600);
  resources->mutable_per_trial()->set_checkpoints(true);
  resources->set_idle_timeout_seconds(300);
  if (const Field* c = s.Find("catalog")) {
    if (auto v = r_.NonEmptyString(*c)) {
      resources->set_catalog(WorkingDir(file_, *v));
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
void ResourcesLoader::LoadTimeExpression(const Field& f, v1::Simulation* sim) {
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

void ResourcesLoader::LoadSimulate(const Field& f) {
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
void ResourcesLoader::CheckPoolsAgainstCatalog(const Section& root) {
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
    if (kept_.max_cost) {
      r_.ValueError(*kept_.max_cost,
                    absl::StrCat("max_cost ", spec_.budget().max_cost(),
                                 " is less than one billing increment of the cheapest pool (",
                                 cheapest, ")"));
    }
  }
}

// A federated search places every trial's participants on its pools: each pool's max_instances
// must hold what one trial places there.
void ResourcesLoader::CheckPoolsHoldOneTrial(const Section& root,
                                             const FederatedPlacement& placement) {
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
bool ResourcesLoader::CheckFederatedProviders(const Section& root) {
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
void ResourcesLoader::CheckFederatedPlacement(const Section& root, const Catalog& catalog) {
  const v1::Resources& res = spec_.resources();
  const v1::Federation& fed = spec_.federation();
  const bool run = spec_.parameters_size() == 0;
  if (res.pools_size() == 0) {
    if (kept_.global_region) {
      r_.ValueError(*kept_.global_region,
                    "prices transfer from the participants' pools; add resources.pools");
    }
    if (run && kept_.max_cost) {
      r_.ValueError(*kept_.max_cost,
                    "a federated run is billed for the instances of resources.pools; add pools "
                    "that host each region's clients and aggregator");
    }
    return;
  }
  if (!CheckFederatedProviders(root)) return;
  // No region loaded: the federation's own error says why; there is nothing to place.
  if (fed.regions_size() == 0) return;
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
    if (i >= static_cast<int>(kept_.region_names.size())) continue;
    const char* missing = !clients && !aggregator ? "its clients and its aggregator"
                          : !clients              ? "its clients"
                                                  : "its aggregator";
    r_.ValueError(
        kept_.region_names[i],
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
  if (kept_.global_region && global != kInternet && !catalog.HasRegion(global)) {
    r_.ValueError(*kept_.global_region,
                  absl::StrCat("unknown region '", global, "' (the catalog has ",
                               absl::StrJoin(catalog.regions(), ", "),
                               "; `internet` for an orchestrator outside them)"));
    return;
  }
  for (int i = 0; i < fed.regions_size() && i < static_cast<int>(kept_.region_names.size()); ++i) {
    const std::string& name = fed.regions(i).name();
    if (!catalog.HasRegion(name) ||
        (catalog.TransferPricePerGb(global, name) && catalog.TransferPricePerGb(name, global))) {
      continue;
    }
    r_.ValueError(kept_.global_region ? *kept_.global_region : kept_.region_names[i],
                  MissingTransferPrice(global, name));
  }
  absl::StatusOr<FederatedPlacement> placement = FederatedPlacement::Create(spec_, catalog);
  if (placement.ok() && !run) CheckPoolsHoldOneTrial(root, *placement);
  if (placement.ok() && kept_.max_cost && spec_.budget().has_max_cost() &&
      spec_.budget().max_cost() < placement->FirstIncrements()) {
    r_.ValueError(
        *kept_.max_cost,
        absl::StrCat("max_cost ", spec_.budget().max_cost(),
                     " is less than one round's cost: starting the federation's ",
                     TotalClients(fed) + fed.regions_size(), " participants costs at least ",
                     placement->FirstIncrements(), " (each pool's first billing increment)"));
  }
}

}  // namespace sextant::loader_internal
