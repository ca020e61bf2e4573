#include "orchestrator/cost/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"

namespace sextant {
namespace {

// Kept as text so that docs/cost.md, `Catalog::DefaultYaml()` and `Catalog::Default()` agree.
constexpr const char* kDefaultCatalog =
    R"yaml(# Sextant's built-in price catalog (USD). Spot is 70% and reserved 35% off on-demand.
regions: [us-east-1, eu-west-1, ap-south-1, cn-east-1, cn-west-1]
instances:
  gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}
  gpu.4x: {gpus: 4, gpu_memory_gb: 80, cpus: 64}
  gpu.8x: {gpus: 8, gpu_memory_gb: 80, cpus: 128}
  cpu.small: {gpus: 0, gpu_memory_gb: 0, cpus: 4}
billing: {increment: 1s, minimum: 60s}
reservation: 1h
offers:
  - {region: us-east-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.4}
  - {region: us-east-1, instance: gpu.1x, market: reserved, price_per_hour: 1.56}
  - {region: us-east-1, instance: gpu.1x, market: spot, price_per_hour: 0.72,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: us-east-1, instance: gpu.4x, market: on_demand, price_per_hour: 9.6}
  - {region: us-east-1, instance: gpu.4x, market: reserved, price_per_hour: 6.24}
  - {region: us-east-1, instance: gpu.4x, market: spot, price_per_hour: 2.88,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: us-east-1, instance: gpu.8x, market: on_demand, price_per_hour: 19.2}
  - {region: us-east-1, instance: gpu.8x, market: reserved, price_per_hour: 12.48}
  - {region: us-east-1, instance: gpu.8x, market: spot, price_per_hour: 5.76,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: us-east-1, instance: cpu.small, market: on_demand, price_per_hour: 0.2}
  - {region: us-east-1, instance: cpu.small, market: reserved, price_per_hour: 0.13}
  - {region: us-east-1, instance: cpu.small, market: spot, price_per_hour: 0.06,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: eu-west-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.64}
  - {region: eu-west-1, instance: gpu.1x, market: reserved, price_per_hour: 1.716}
  - {region: eu-west-1, instance: gpu.1x, market: spot, price_per_hour: 0.792,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: eu-west-1, instance: gpu.4x, market: on_demand, price_per_hour: 10.56}
  - {region: eu-west-1, instance: gpu.4x, market: reserved, price_per_hour: 6.864}
  - {region: eu-west-1, instance: gpu.4x, market: spot, price_per_hour: 3.168,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: eu-west-1, instance: gpu.8x, market: on_demand, price_per_hour: 21.12}
  - {region: eu-west-1, instance: gpu.8x, market: reserved, price_per_hour: 13.728}
  - {region: eu-west-1, instance: gpu.8x, market: spot, price_per_hour: 6.336,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: eu-west-1, instance: cpu.small, market: on_demand, price_per_hour: 0.22}
  - {region: eu-west-1, instance: cpu.small, market: reserved, price_per_hour: 0.143}
  - {region: eu-west-1, instance: cpu.small, market: spot, price_per_hour: 0.066,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: ap-south-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.16}
  - {region: ap-south-1, instance: gpu.1x, market: reserved, price_per_hour: 1.404}
  - {region: ap-south-1, instance: gpu.1x, market: spot, price_per_hour: 0.648,
     interruption: {rate_per_day: 0.1, notice: 30s, notice_probability: 0.9}}
  - {region: ap-south-1, instance: gpu.4x, market: on_demand, price_per_hour: 8.64}
  - {region: ap-south-1, instance: gpu.4x, market: reserved, price_per_hour: 5.616}
  - {region: ap-south-1, instance: gpu.4x, market: spot, price_per_hour: 2.592,
     interruption: {rate_per_day: 0.1, notice: 30s, notice_probability: 0.9}}
  - {region: ap-south-1, instance: gpu.8x, market: on_demand, price_per_hour: 17.28}
  - {region: ap-south-1, instance: gpu.8x, market: reserved, price_per_hour: 11.232}
  - {region: ap-south-1, instance: gpu.8x, market: spot, price_per_hour: 5.184,
     interruption: {rate_per_day: 0.1, notice: 30s, notice_probability: 0.9}}
  - {region: ap-south-1, instance: cpu.small, market: on_demand, price_per_hour: 0.18}
  - {region: ap-south-1, instance: cpu.small, market: reserved, price_per_hour: 0.117}
  - {region: ap-south-1, instance: cpu.small, market: spot, price_per_hour: 0.054,
     interruption: {rate_per_day: 0.1, notice: 30s, notice_probability: 0.9}}
  - {region: cn-east-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.04}
  - {region: cn-east-1, instance: gpu.1x, market: reserved, price_per_hour: 1.326}
  - {region: cn-east-1, instance: gpu.1x, market: spot, price_per_hour: 0.612,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: cn-east-1, instance: gpu.4x, market: on_demand, price_per_hour: 8.16}
  - {region: cn-east-1, instance: gpu.4x, market: reserved, price_per_hour: 5.304}
  - {region: cn-east-1, instance: gpu.4x, market: spot, price_per_hour: 2.448,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: cn-east-1, instance: gpu.8x, market: on_demand, price_per_hour: 16.32}
  - {region: cn-east-1, instance: gpu.8x, market: reserved, price_per_hour: 10.608}
  - {region: cn-east-1, instance: gpu.8x, market: spot, price_per_hour: 4.896,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: cn-east-1, instance: cpu.small, market: on_demand, price_per_hour: 0.17}
  - {region: cn-east-1, instance: cpu.small, market: reserved, price_per_hour: 0.1105}
  - {region: cn-east-1, instance: cpu.small, market: spot, price_per_hour: 0.051,
     interruption: {rate_per_day: 0.05, notice: 120s, notice_probability: 0.95}}
  - {region: cn-west-1, instance: gpu.1x, market: on_demand, price_per_hour: 1.92}
  - {region: cn-west-1, instance: gpu.1x, market: reserved, price_per_hour: 1.248}
  - {region: cn-west-1, instance: gpu.1x, market: spot, price_per_hour: 0.576,
     interruption: {rate_per_day: 0.08, notice: 60s, notice_probability: 0.9}}
  - {region: cn-west-1, instance: gpu.4x, market: on_demand, price_per_hour: 7.68}
  - {region: cn-west-1, instance: gpu.4x, market: reserved, price_per_hour: 4.992}
  - {region: cn-west-1, instance: gpu.4x, market: spot, price_per_hour: 2.304,
     interruption: {rate_per_day: 0.08, notice: 60s, notice_probability: 0.9}}
  - {region: cn-west-1, instance: gpu.8x, market: on_demand, price_per_hour: 15.36}
  - {region: cn-west-1, instance: gpu.8x, market: reserved, price_per_hour: 9.984}
  - {region: cn-west-1, instance: gpu.8x, market: spot, price_per_hour: 4.608,
     interruption: {rate_per_day: 0.08, notice: 60s, notice_probability: 0.9}}
  - {region: cn-west-1, instance: cpu.small, market: on_demand, price_per_hour: 0.16}
  - {region: cn-west-1, instance: cpu.small, market: reserved, price_per_hour: 0.104}
  - {region: cn-west-1, instance: cpu.small, market: spot, price_per_hour: 0.048,
     interruption: {rate_per_day: 0.08, notice: 60s, notice_probability: 0.9}}
# Bytes sent from one region to another, per GB (10^9 bytes); within a region they are free.
# To and from hosts outside every region (`internet`, e.g. an orchestrator on premises): the
# regions' egress, and their ingress (free).
transfer:
  between_regions_per_gb: 0.02
  to_internet_per_gb: 0.09
  from_internet_per_gb: 0
  pairs:
    - {between: [us-east-1, ap-south-1], per_gb: 0.086}
    - {between: [eu-west-1, ap-south-1], per_gb: 0.086}
    - {between: [cn-east-1, cn-west-1], per_gb: 0.05}
    - {between: [cn-east-1, us-east-1], per_gb: 0.12}
    - {between: [cn-east-1, eu-west-1], per_gb: 0.12}
    - {between: [cn-east-1, ap-south-1], per_gb: 0.12}
    - {between: [cn-west-1, us-east-1], per_gb: 0.12}
    - {between: [cn-west-1, eu-west-1], per_gb: 0.12}
    - {between: [cn-west-1, ap-south-1], per_gb: 0.12}
)yaml";

// Reads typed values out of the YAML tree, recording every problem with its position.
class CatalogReader {
 public:
  explicit CatalogReader(std::vector<CatalogError>* errors) : errors_(errors) {}

  void Error(const YAML::Node& at, const std::string& path, const std::string& message) {
    int line = 0, col = 0;
    if (at.IsDefined() && at.Mark().line >= 0) {
      line = at.Mark().line + 1;
      col = at.Mark().column + 1;
    }
    errors_->push_back({line, col, path.empty() ? message : absl::StrCat(path, ": ", message)});
  }

  // True when every key of `node` (a mapping) is allowed; reports the others.
  bool Keys(const YAML::Node& node, const std::string& path, std::set<std::string> allowed) {
    if (!node.IsMap()) {
      Error(node, path, "expected a mapping");
      return false;
    }
    bool ok = true;
    for (const auto& kv : node) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!allowed.count(key)) {
        Error(kv.first, absl::StrCat(path, path.empty() ? "" : ".", key),
              absl::StrCat(
                  "unknown key; allowed keys: ",
                  absl::StrJoin(std::vector<std::string>(allowed.begin(), allowed.end()), ", ")));
        ok = false;
      }
    }
    return ok;
  }

  std::optional<double> Number(const YAML::Node& node, const std::string& path) {
    double v = 0;
    if (node.IsScalar() && absl::SimpleAtod(node.Scalar(), &v) && std::isfinite(v)) return v;
    Error(node, path, "expected a number");
    return std::nullopt;
  }

  std::optional<double> Positive(const YAML::Node& node, const std::string& path) {
    std::optional<double> v = Number(node, path);
    if (v && !(*v > 0)) {
      Error(node, path, absl::StrCat("must be > 0, got ", node.Scalar()));
      return std::nullopt;
    }
    return v;
  }

  std::optional<double> Duration(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      Error(node, path, "expected a duration such as 60s");
      return std::nullopt;
    }
    auto v = ParseDurationSeconds(node.Scalar());
    if (!v.ok()) {
      Error(node, path, std::string(v.status().message()));
      return std::nullopt;
    }
    return *v;
  }

  std::optional<double> PositiveDuration(const YAML::Node& node, const std::string& path) {
    std::optional<double> v = Duration(node, path);
    if (v && *v <= 0) {
      Error(node, path, "must be > 0");
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::string> Text(const YAML::Node& node, const std::string& path) {
    if (node.IsScalar() && !node.Scalar().empty()) return node.Scalar();
    Error(node, path, "expected a non-empty string");
    return std::nullopt;
  }

 private:
  std::vector<CatalogError>* errors_;
};

std::optional<Market> ParseMarket(const std::string& s) {
  if (s == "spot") return Market::kSpot;
  if (s == "on_demand") return Market::kOnDemand;
  if (s == "reserved") return Market::kReserved;
  return std::nullopt;
}

// What every offer starts from: the catalog's billing and reservation term.
struct OfferDefaults {
  BillingTerms billing;
  double reservation_seconds = 3600;
};

OfferDefaults ReadOfferDefaults(CatalogReader& r, const YAML::Node& root) {
  OfferDefaults d;
  if (YAML::Node b = root["billing"]) {
    if (r.Keys(b, "billing", {"increment", "minimum"})) {
      if (b["increment"]) {
        if (auto v = r.PositiveDuration(b["increment"], "billing.increment")) {
          d.billing.increment_seconds = *v;
        }
      }
      if (b["minimum"]) {
        if (auto v = r.Duration(b["minimum"], "billing.minimum")) d.billing.minimum_seconds = *v;
      }
    }
  }
  if (YAML::Node res = root["reservation"]) {
    if (auto v = r.PositiveDuration(res, "reservation")) d.reservation_seconds = *v;
  }
  return d;
}

std::vector<std::string> ReadRegions(CatalogReader& r, const YAML::Node& root) {
  std::vector<std::string> out;
  YAML::Node regions = root["regions"];
  if (!regions || !regions.IsSequence() || regions.size() == 0) {
    r.Error(regions ? regions : root, "regions", "expected a non-empty list of region names");
    return out;
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    if (auto v = r.Text(regions[i], absl::StrCat("regions[", i, "]"))) {
      if (*v == kInternet)
        r.Error(regions[i], "regions",
                "'internet' is not a region: it names hosts outside every region "
                "(transfer.to_internet_per_gb and from_internet_per_gb price it)");
      else if (std::find(out.begin(), out.end(), *v) != out.end())
        r.Error(regions[i], "regions", absl::StrCat("duplicate region '", *v, "'"));
      else
        out.push_back(*v);
    }
  }
  return out;
}

std::vector<InstanceType> ReadInstances(CatalogReader& r, const YAML::Node& root) {
  std::vector<InstanceType> out;
  YAML::Node instances = root["instances"];
  if (!instances || !instances.IsMap() || instances.size() == 0) {
    r.Error(instances ? instances : root, "instances",
            "expected a non-empty mapping of instance types");
    return out;
  }
  for (const auto& kv : instances) {
    std::string path = absl::StrCat("instances.", kv.first.Scalar());
    if (!r.Keys(kv.second, path, {"gpus", "gpu_memory_gb", "cpus"})) continue;
    InstanceType t;
    t.name = kv.first.Scalar();
    if (auto v = kv.second["gpus"] ? r.Number(kv.second["gpus"], path + ".gpus") : 0.0)
      t.gpus = static_cast<int>(*v);
    if (auto v = kv.second["gpu_memory_gb"]
                     ? r.Number(kv.second["gpu_memory_gb"], path + ".gpu_memory_gb")
                     : 0.0)
      t.gpu_memory_gb = *v;
    if (auto v = kv.second["cpus"] ? r.Number(kv.second["cpus"], path + ".cpus") : 0.0)
      t.cpus = static_cast<int>(*v);
    if (t.gpus < 0 || t.cpus < 0 || t.gpu_memory_gb < 0)
      r.Error(kv.second, path, "counts must be >= 0");
    out.push_back(t);
  }
  return out;
}

// An offer's price, into billing->price_per_second.
void ReadPrice(CatalogReader& r, const YAML::Node& o, const std::string& path,
               BillingTerms* billing) {
  if (o["price_per_hour"] && o["price_per_second"]) {
    r.Error(o, path, "give price_per_hour or price_per_second, not both");
  } else if (o["price_per_hour"]) {
    if (auto v = r.Positive(o["price_per_hour"], path + ".price_per_hour"))
      billing->price_per_second = *v / 3600;
  } else if (o["price_per_second"]) {
    if (auto v = r.Positive(o["price_per_second"], path + ".price_per_second"))
      billing->price_per_second = *v;
  } else {
    r.Error(o, path, "needs price_per_hour or price_per_second");
  }
}

// An offer's own increment, minimum and reservation, over the catalog's.
void ReadTerms(CatalogReader& r, const YAML::Node& o, const std::string& path, Offer* offer) {
  if (o["increment"]) {
    if (auto v = r.PositiveDuration(o["increment"], path + ".increment")) {
      offer->billing.increment_seconds = *v;
    }
  }
  if (o["minimum"]) {
    if (auto v = r.Duration(o["minimum"], path + ".minimum")) offer->billing.minimum_seconds = *v;
  }
  if (o["reservation"]) {
    if (auto v = r.PositiveDuration(o["reservation"], path + ".reservation")) {
      offer->reservation_seconds = *v;
    }
  }
}

void ReadInterruption(CatalogReader& r, const YAML::Node& in, const std::string& ip, Offer* offer) {
  if (offer->market != Market::kSpot) r.Error(in, ip, "only spot offers are interrupted");
  if (!r.Keys(in, ip, {"rate_per_day", "notice", "notice_probability"})) return;
  InterruptionModel& m = offer->interruption;
  if (in["rate_per_day"]) {
    if (auto v = r.Number(in["rate_per_day"], ip + ".rate_per_day")) {
      if (*v < 0)
        r.Error(in["rate_per_day"], ip + ".rate_per_day", "must be >= 0");
      else
        m.rate_per_day = *v;
    }
  }
  if (in["notice"]) {
    if (auto v = r.Duration(in["notice"], ip + ".notice")) m.notice_seconds = *v;
  }
  if (in["notice_probability"]) {
    if (auto v = r.Number(in["notice_probability"], ip + ".notice_probability")) {
      if (*v < 0 || *v > 1)
        r.Error(in["notice_probability"], ip + ".notice_probability", "must be in [0, 1]");
      else
        m.notice_probability = *v;
    }
  }
}

// One entry of `offers`, checked against the regions and instance types of `c`. Nothing when
// it cannot be placed: no region, instance or market, or an unknown market.
std::optional<Offer> ReadOffer(CatalogReader& r, const YAML::Node& o, const std::string& path,
                               const Catalog& c, const OfferDefaults& defaults) {
  if (!r.Keys(o, path,
              {"region", "instance", "market", "price_per_hour", "price_per_second", "increment",
               "minimum", "interruption", "reservation"})) {
    return std::nullopt;
  }
  auto region = o["region"] ? r.Text(o["region"], path + ".region") : std::nullopt;
  auto instance = o["instance"] ? r.Text(o["instance"], path + ".instance") : std::nullopt;
  auto market_text = o["market"] ? r.Text(o["market"], path + ".market") : std::nullopt;
  if (!region || !instance || !market_text) {
    if (!o["region"] || !o["instance"] || !o["market"])
      r.Error(o, path, "needs region, instance and market");
    return std::nullopt;
  }
  if (!c.HasRegion(*region))
    r.Error(o["region"], path + ".region", absl::StrCat("unknown region '", *region, "'"));
  if (!c.FindInstance(*instance))
    r.Error(o["instance"], path + ".instance",
            absl::StrCat("unknown instance type '", *instance, "'"));
  std::optional<Market> market = ParseMarket(*market_text);
  if (!market) {
    r.Error(o["market"], path + ".market",
            absl::StrCat("unknown market '", *market_text,
                         "'; expected one of spot, on_demand, reserved"));
    return std::nullopt;
  }
  Offer offer;
  offer.billing = defaults.billing;
  offer.reservation_seconds = defaults.reservation_seconds;
  offer.region = *region;
  offer.instance = *instance;
  offer.market = *market;
  ReadPrice(r, o, path, &offer.billing);
  ReadTerms(r, o, path, &offer);
  if (YAML::Node in = o["interruption"]) ReadInterruption(r, in, path + ".interruption", &offer);
  return offer;
}

// The `offers` list; each offer may appear once per region, instance and market.
std::vector<Offer> ReadOffers(CatalogReader& r, const YAML::Node& root, const Catalog& c,
                              const OfferDefaults& defaults) {
  YAML::Node offers = root["offers"];
  if (!offers || !offers.IsSequence() || offers.size() == 0) {
    r.Error(offers ? offers : root, "offers", "expected a non-empty list of offers");
    return {};
  }
  std::vector<Offer> out;
  std::set<std::tuple<std::string, std::string, int>> seen;
  for (size_t i = 0; i < offers.size(); ++i) {
    const YAML::Node o = offers[i];
    const std::string path = absl::StrCat("offers[", i, "]");
    std::optional<Offer> offer = ReadOffer(r, o, path, c, defaults);
    if (!offer) continue;
    if (!seen.insert({offer->region, offer->instance, static_cast<int>(offer->market)}).second) {
      r.Error(o, path,
              absl::StrCat("duplicate offer for ", offer->region, " ", offer->instance, " ",
                           MarketName(offer->market)));
    }
    out.push_back(*offer);
  }
  return out;
}

// transfer: {between_regions_per_gb: X, to_internet_per_gb: Y, from_internet_per_gb: Z,
//            pairs: [{between: [A, B], per_gb: W}, ...]}.
void ReadTransfer(CatalogReader& r, const YAML::Node& root, const std::vector<std::string>& regions,
                  TransferPrices* prices) {
  const YAML::Node t = root["transfer"];
  if (!t) return;
  if (!t.IsMap()) {
    r.Error(t, "transfer",
            "must be a mapping of between_regions_per_gb, to_internet_per_gb, "
            "from_internet_per_gb and pairs");
    return;
  }
  if (!r.Keys(t, "transfer",
              {"between_regions_per_gb", "to_internet_per_gb", "from_internet_per_gb", "pairs"})) {
    return;
  }
  auto price = [&](const char* key) -> std::optional<double> {
    if (!t[key]) return std::nullopt;
    const std::string path = absl::StrCat("transfer.", key);
    std::optional<double> v = r.Number(t[key], path);
    if (v && *v < 0) {
      r.Error(t[key], path, absl::StrCat("must be >= 0, got ", *v));
      return std::nullopt;
    }
    return v;
  };
  prices->between_regions = price("between_regions_per_gb");
  prices->to_internet = price("to_internet_per_gb");
  prices->from_internet = price("from_internet_per_gb").value_or(0);
  std::map<std::pair<std::string, std::string>, double>* pairs = &prices->pairs;
  const YAML::Node list = t["pairs"];
  if (!list) return;
  if (!list.IsSequence()) {
    r.Error(list, "transfer.pairs", "must be a list of {between: [A, B], per_gb: X}");
    return;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = absl::StrCat("transfer.pairs[", i, "]");
    const YAML::Node p = list[i];
    if (!p.IsMap() || !r.Keys(p, path, {"between", "per_gb"})) {
      if (!p.IsMap()) r.Error(p, path, "must be {between: [A, B], per_gb: X}");
      continue;
    }
    const YAML::Node between = p["between"];
    if (!between || !between.IsSequence() || between.size() != 2) {
      r.Error(between ? between : p, path + ".between", "must name two regions: [A, B]");
      continue;
    }
    std::optional<std::string> a = r.Text(between[0], path + ".between[0]");
    std::optional<std::string> b = r.Text(between[1], path + ".between[1]");
    std::optional<double> price =
        p["per_gb"] ? r.Number(p["per_gb"], path + ".per_gb") : std::nullopt;
    if (!p["per_gb"]) r.Error(p, path + ".per_gb", "is required");
    if (!a || !b || !price) continue;
    bool known = true;
    for (const auto& [name, node] : {std::pair{*a, between[0]}, std::pair{*b, between[1]}}) {
      if (std::find(regions.begin(), regions.end(), name) == regions.end()) {
        r.Error(node, path + ".between", absl::StrCat("unknown region '", name, "'"));
        known = false;
      }
    }
    if (*a == *b) {
      r.Error(between, path + ".between", "names one region twice; within a region bytes are free");
    } else if (*price < 0) {
      r.Error(p["per_gb"], path + ".per_gb", absl::StrCat("must be >= 0, got ", *price));
    } else if (known && !pairs->emplace(std::minmax(*a, *b), *price).second) {
      r.Error(between, path + ".between", absl::StrCat("duplicate pair ", *a, " - ", *b));
    }
  }
}

}  // namespace

const char* MarketName(Market market) {
  switch (market) {
    case Market::kSpot:
      return "spot";
    case Market::kReserved:
      return "reserved";
    default:
      return "on_demand";
  }
}

double BilledSeconds(double seconds, const BillingTerms& terms) {
  double s = std::max(0.0, seconds);
  double inc = terms.increment_seconds > 0 ? terms.increment_seconds : 1;
  // A tiny tolerance keeps 120.0000000001 (float noise) from costing a whole extra increment.
  double rounded = std::ceil(s / inc - 1e-9) * inc;
  return std::max(rounded, terms.minimum_seconds);
}

Catalog Catalog::Parse(const std::string& yaml, std::vector<CatalogError>* errors) {
  const size_t before = errors->size();
  CatalogReader r(errors);
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    errors->push_back({e.mark.line + 1, e.mark.column + 1, absl::StrCat("invalid YAML: ", e.msg)});
    return Catalog();
  }
  if (!r.Keys(root, "", {"regions", "instances", "offers", "billing", "reservation", "transfer"})) {
    return Catalog();
  }
  const OfferDefaults defaults = ReadOfferDefaults(r, root);
  Catalog c;
  c.regions_ = ReadRegions(r, root);
  c.instances_ = ReadInstances(r, root);
  c.offers_ = ReadOffers(r, root, c, defaults);
  ReadTransfer(r, root, c.regions_, &c.transfer_);
  if (errors->size() != before) return Catalog();
  return c;
}

Catalog Catalog::Default() {
  std::vector<CatalogError> errors;
  return Parse(kDefaultCatalog, &errors);
}

const char* Catalog::DefaultYaml() { return kDefaultCatalog; }

const Offer* Catalog::Find(absl::string_view region, absl::string_view instance,
                           Market market) const {
  for (const Offer& o : offers_) {
    if (o.region == region && o.instance == instance && o.market == market) return &o;
  }
  return nullptr;
}

const InstanceType* Catalog::FindInstance(absl::string_view name) const {
  for (const InstanceType& t : instances_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::optional<double> Catalog::TransferPricePerGb(absl::string_view from,
                                                  absl::string_view to) const {
  if (from == to) return 0.0;
  if (to == kInternet) return transfer_.to_internet;
  if (from == kInternet) return transfer_.from_internet;
  const std::pair<std::string, std::string> key =
      from < to ? std::pair(std::string(from), std::string(to))
                : std::pair(std::string(to), std::string(from));
  if (auto it = transfer_.pairs.find(key); it != transfer_.pairs.end()) return it->second;
  return transfer_.between_regions;
}

bool Catalog::HasRegion(absl::string_view region) const {
  return std::find(regions_.begin(), regions_.end(), region) != regions_.end();
}

absl::StatusOr<Catalog> LoadCatalog(const std::string& path, std::vector<CatalogError>* errors) {
  if (path.empty()) return Catalog::Default();
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (fp == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read catalog ", path, ": ", std::generic_category().message(errno)));
  }
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), fp)) > 0 && text.size() < (4u << 20))
    text.append(buf, n);
  std::fclose(fp);
  const size_t before = errors->size();
  Catalog catalog = Catalog::Parse(text, errors);
  if (errors->size() == before) return catalog;
  const CatalogError& first = (*errors)[before];
  return absl::InvalidArgumentError(
      absl::StrCat(path, ":", first.line, ":", first.col, ": ", first.message));
}

}  // namespace sextant
