#ifndef SEXTANT_ORCHESTRATOR_COST_CATALOG_H_
#define SEXTANT_ORCHESTRATOR_COST_CATALOG_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sextant {

// The three ways to buy an instance.
enum class Market { kSpot, kOnDemand, kReserved };

// "spot", "on_demand" or "reserved".
const char* MarketName(Market market);

// An instance type: what one instance offers a trial.
struct InstanceType {
  std::string name;  // e.g. "gpu.4x"
  int gpus = 0;
  double gpu_memory_gb = 0;  // per GPU
  int cpus = 0;
};

// When spot capacity is taken back: a Poisson process per instance, with an optional notice.
struct InterruptionModel {
  double rate_per_day = 0;        // expected interruptions per instance-day; default 0
  double notice_seconds = 120;    // warning before the instance goes; default 120
  double notice_probability = 1;  // chance that the warning arrives at all; default 1
};

// How an instance is billed: per second, rounded up to `increment_seconds`, never less than
// `minimum_seconds` in all.
struct BillingTerms {
  double price_per_second = 0;
  double increment_seconds = 1;  // default 1
  double minimum_seconds = 60;   // default 60
};

// The seconds billed for an instance that ran `seconds` (>= 0): rounded up to the increment,
// and at least the minimum. Exact for whole-second inputs.
double BilledSeconds(double seconds, const BillingTerms& terms);

// One thing that can be bought: an instance type in a region on a market.
struct Offer {
  std::string region;
  std::string instance;
  Market market = Market::kOnDemand;
  BillingTerms billing;
  InterruptionModel interruption;     // spot only
  double reservation_seconds = 3600;  // reserved only: the term paid whole; default 1 h
};

// Where a catalog problem is; line and col are 1-based (0 when unknown).
struct CatalogError {
  int line = 0;
  int col = 0;
  std::string message;  // names the key, e.g. "offers[2].price_per_hour: must be > 0, got 0"
};

// Hosts outside every region of the catalog (an orchestrator on premises): a name no catalog
// region may take, priced by transfer.to_internet_per_gb and from_internet_per_gb.
inline constexpr absl::string_view kInternet = "internet";

// The catalog's transfer prices, dollars per GB (10^9 bytes).
struct TransferPrices {
  std::optional<double> between_regions;  // any two regions no pair names
  std::optional<double> to_internet;      // a region's egress to kInternet
  double from_internet = 0;               // a region's ingress from kInternet
  std::map<std::pair<std::string, std::string>, double> pairs;  // (lesser, greater)
};

// Regions x instance types x markets, with prices. A plain value; thread-compatible.
class Catalog {
 public:
  // Parses catalog YAML (see docs/cost.md). On errors the returned catalog is
  // empty and *errors holds every problem found: unknown keys, a zero or negative price, a
  // duplicate offer, an offer naming an undeclared instance type, a bad market or duration.
  static Catalog Parse(const std::string& yaml, std::vector<CatalogError>* errors);

  // The built-in catalog (documented in docs/cost.md): us-east-1, eu-west-1, ap-south-1 x
  // gpu.1x, gpu.4x, gpu.8x, cpu.small x spot (70% off on-demand), on_demand, reserved (35%
  // off), per-second billing with a 60 s minimum.
  static Catalog Default();

  // The YAML text of Default(), a starting point for a custom catalog.
  static const char* DefaultYaml();

  // The offer, or null when the catalog has none.
  const Offer* Find(absl::string_view region, absl::string_view instance, Market market) const;
  // The instance type, or null.
  const InstanceType* FindInstance(absl::string_view name) const;
  bool HasRegion(absl::string_view region) const;
  // Dollars per GB (10^9 bytes) sent from one region to another: 0 within a region, the
  // pair's price either way (transfer.pairs), else transfer.between_regions_per_gb; to
  // kInternet transfer.to_internet_per_gb, from it transfer.from_internet_per_gb (default 0).
  // nullopt when the catalog prices none of these.
  std::optional<double> TransferPricePerGb(absl::string_view from, absl::string_view to) const;

  const std::vector<std::string>& regions() const { return regions_; }
  const std::vector<InstanceType>& instances() const { return instances_; }
  const std::vector<Offer>& offers() const { return offers_; }
  // What-if runs (`sextant simulate`): every spot offer gets the given parts of its
  // interruption model replaced; unset parts are kept.
  void OverrideSpotInterruptions(std::optional<double> rate_per_day,
                                 std::optional<double> notice_seconds,
                                 std::optional<double> notice_probability) {
    for (Offer& o : offers_) {
      if (o.market != Market::kSpot) continue;
      if (rate_per_day) o.interruption.rate_per_day = *rate_per_day;
      if (notice_seconds) o.interruption.notice_seconds = *notice_seconds;
      if (notice_probability) o.interruption.notice_probability = *notice_probability;
    }
  }

 private:
  std::vector<std::string> regions_;
  std::vector<InstanceType> instances_;
  std::vector<Offer> offers_;
  TransferPrices transfer_;
};

// The catalog an experiment names (resources.catalog, already resolved against the experiment
// file's folder): the built-in one when `path` is empty, else the file at `path` (read up to
// its first 4 MiB) parsed. `sextant validate`, `run` and `simulate` all load it through here.
// FailedPrecondition "cannot read catalog PATH: REASON" when the file cannot be opened.
// InvalidArgument "PATH:LINE:COL: MESSAGE" (the first problem) when it does not parse; every
// problem is then appended to *errors.
absl::StatusOr<Catalog> LoadCatalog(const std::string& path, std::vector<CatalogError>* errors);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_CATALOG_H_
