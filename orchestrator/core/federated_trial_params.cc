#include "orchestrator/core/federated_trial_params.h"

#include <array>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregator/federation_plan.h"

namespace sextant {
namespace {

constexpr std::array<const char*, 10> kNames = {
    "local_lr",    "client_lr", "local_epochs",      "local_batch_size", "server_lr",
    "proximal_mu", "mu",        "clients_per_round", "server_optimizer", "clip_norm"};

}  // namespace

std::string FederationHyperparameterNames() { return absl::StrJoin(kNames, ", "); }

bool IsFederationHyperparameter(const std::string& name) {
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

absl::Status ApplyFederatedTrialParams(
    v1::ExperimentSpec& spec,
    const std::function<std::optional<std::string>(const std::string&)>& value) {
  v1::Federation* f = spec.mutable_federation();
  for (const v1::Parameter& p : spec.parameters()) {
    std::optional<std::string> v = value(p.name());
    if (!v) continue;
    const std::string& n = p.name();
    if (!IsFederationHyperparameter(n)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", n,
                                                     "' is not a federation hyperparameter (",
                                                     FederationHyperparameterNames(), ")"));
    }
    if (n == "server_optimizer") {
      f->set_server_optimizer(*v);
      continue;
    }
    double x = 0;
    if (!absl::SimpleAtod(*v, &x)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", n, "='", *v, "'"));
    }
    if (n == "local_lr" || n == "client_lr") {
      f->set_local_lr(x);
    } else if (n == "local_epochs") {
      f->set_local_epochs(static_cast<int32_t>(x));
    } else if (n == "local_batch_size") {
      f->set_local_batch_size(static_cast<int32_t>(x));
    } else if (n == "server_lr") {
      f->set_server_lr(x);
    } else if (n == "proximal_mu" || n == "mu") {
      f->set_proximal_mu(x);
    } else if (n == "clients_per_round") {
      f->set_clients_per_round(x);
    } else if (n == "clip_norm") {
      if (!f->has_dp()) {
        return absl::InvalidArgumentError(
            "parameter clip_norm tunes federation.dp.clip_norm: "
            "add federation.dp");
      }
      f->mutable_dp()->set_clip_norm(x);
    }
  }
  spec.clear_parameters();
  if (f->secure_aggregation() && f->mode() != "buffered" && TotalClients(*f) > 0 &&
      RegionQuotas(*f).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter clients_per_round=", f->clients_per_round(), " gives ", ClientsPerRound(*f),
        " clients a round; secure aggregation samples at least 2 in each of the ",
        f->regions_size(), " regions (", 2 * f->regions_size(), ")"));
  }
  if (f->mode() == "buffered" && ClientsPerRound(*f) < f->buffer_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter clients_per_round=", f->clients_per_round(), " starts ", ClientsPerRound(*f),
        " clients on each model version, too few to fill a buffer of buffer_size ",
        f->buffer_size()));
  }
  return absl::OkStatus();
}

}  // namespace sextant
