#include "orchestrator/core/internal/federation_loader.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "aggregator/federation_plan.h"
#include "tensors/dtype.h"
#include "tensors/safetensors.h"

namespace sextant::loader_internal {
namespace {

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

}  // namespace

void FederationLoader::LoadFederation(const Field& f) {
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
    kept_.global_region.emplace(*g);
    if (std::optional<std::string> v = r_.IdString(*g, "a region name")) fed->set_global_region(*v);
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
void FederationLoader::LoadRobustAndCommandOptions(const Section& s, v1::Federation* fed) {
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
void FederationLoader::LoadDifferentialPrivacy(const Field& f, v1::Federation* fed) {
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
void FederationLoader::LoadModel(const Field& f, v1::Federation* fed) {
  Section s(r_, f, {"file"});
  if (!s.ok()) return;
  const Field* file = s.Require("file");
  if (file == nullptr) return;
  std::optional<std::string> given = r_.NonEmptyString(*file);
  if (!given) return;
  std::error_code ec;
  const std::string path =
      std::filesystem::absolute(WorkingDir(file_, *given), ec).lexically_normal().string();
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
void FederationLoader::LoadData(const Section& s, v1::Federation* fed, int64_t total) {
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
void FederationLoader::LoadDataDirs(const Field& f, v1::Federation* fed) {
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
              WorkingDir(file_, absl::StrReplaceAll(*given, {{"{region}", r.name()},
                                                             {"{index}", absl::StrCat(i)}})))
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
int64_t FederationLoader::LoadRegions(const Section& s, v1::Federation* fed) {
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
    if (name) kept_.region_names.push_back(*name);
    if (std::optional<std::string> v = name ? r_.IdString(*name, "a region name") : std::nullopt) {
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
void FederationLoader::LoadBufferedMode(const Section& s, v1::Federation* fed) {
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
  // A step applies buffer_size of the clients' updates, and the clients that start on each
  // version (clients_per_round, every client by default) train at once: the model takes
  // training / buffer_size steps for each update of every one training. The default server_lr
  // (buffer_size / training) moves it as far per such generation as one synchronous round of
  // them does (bench/federated/equal_updates).
  const int64_t training = ClientsPerRound(*fed);
  if (!s.Find("server_lr") && training > 0) {
    fed->set_server_lr(
        std::min(1.0, static_cast<double>(fed->buffer_size()) / static_cast<double>(training)));
  }
  const Field* mode = s.Find("mode");
  auto refuse = [&](const char* key, absl::string_view why) {
    if (const Field* x = s.Find(key)) {
      r_.ValueError(*x, absl::StrCat("does not apply to mode: buffered (", why, ")"));
    }
  };
  // clients_per_round: the clients that start on each model version (RegionVersionStarts).
  // (Reproducible rounds need buffer_size to be every client, and so this to be every client.)
  if (const Field* per = s.Find("clients_per_round"); per && training < fed->buffer_size()) {
    r_.ValueError(*per, absl::StrCat("under mode: buffered, clients_per_round is how many "
                                     "clients start training on each model version; ",
                                     training, " of them cannot fill a buffer of buffer_size ",
                                     fed->buffer_size(), " (raise it to at least ",
                                     fed->buffer_size(), ", or lower buffer_size)"));
  }
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
void FederationLoader::CheckSecureRegions(const Section& s, const v1::Federation& fed) {
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
void FederationLoader::LoadStragglers(const Field& f, v1::Federation* fed) {
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
void FederationLoader::LoadReproducible(const Section& s, v1::Federation* fed,
                                        int64_t total_clients) {
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

void FederationLoader::LoadFederationOptions(const Section& s, v1::Federation* fed) {
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

}  // namespace sextant::loader_internal
