#include "orchestrator/core/study_privacy.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <utility>

#include "aggregator/federation_plan.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"

namespace sextant {

namespace {
bool TunesSampling(const v1::ExperimentSpec& spec) {
  for (const v1::Parameter& p : spec.parameters()) {
    if (p.name() == "clients_per_round") return true;
  }
  return false;
}
}  // namespace

TrialPrivacy PlannedTrialPrivacy(const v1::ExperimentSpec& spec) {
  v1::Federation f = spec.federation();
  double q = DpAccountantOptions(f).sampling_rate;
  for (const v1::Parameter& p : spec.parameters()) {
    if (p.name() != "clients_per_round") continue;
    std::vector<double> values;
    if (p.type() == v1::Parameter::CATEGORICAL) {
      for (const std::string& v : p.values()) values.push_back(std::atof(v.c_str()));
    } else {
      values.push_back(p.max());
    }
    for (double v : values) {
      f.set_clients_per_round(v);
      q = std::max(q, DpAccountantOptions(f).sampling_rate);
    }
  }
  return {q, spec.federation().dp().noise_multiplier(), spec.federation().rounds()};
}

std::optional<RandomStopping> RandomStoppingOf(const v1::ExperimentSpec& spec) {
  const v1::StudyPrivacy& p = spec.privacy();
  if (p.selection() != "random_stopping") return std::nullopt;
  RandomStopping r;
  const double mean = p.mean_trials() > 1 ? p.mean_trials() : 10;
  if (p.distribution() == "poisson") {
    r.distribution = RandomStopping::Distribution::kPoisson;
    r.mean = mean;
    return r;
  }
  r.eta = p.eta();
  absl::StatusOr<double> gamma = GammaForMeanTrials(r.eta, mean);
  if (!gamma.ok()) return std::nullopt;  // the loader refuses such values
  r.gamma = *gamma;
  return r;
}

int64_t DrawStudyTrials(const RandomStopping& r, uint64_t seed) {
  // A stream of its own: the samplers' streams start from the same seed.
  std::seed_seq seq{seed, uint64_t{0x5354'4f50}};  // "STOP"
  std::mt19937_64 random(seq);
  return DrawTrials(r, random);
}

std::optional<TrialPrivacy> SpentByTrialRun(const std::string& trial_run_dir) {
  const std::string db = RunDir::DbPath(trial_run_dir);
  if (!std::filesystem::exists(db)) return std::nullopt;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, false, /*read_only=*/true);
  if (!store.ok()) return std::nullopt;
  absl::StatusOr<std::optional<std::string>> meta = (*store)->GetMeta("privacy");
  if (!meta.ok() || !*meta) return std::nullopt;
  const nlohmann::json p = nlohmann::json::parse(**meta, nullptr, false);
  if (!p.is_object()) return std::nullopt;
  return TrialPrivacy{p.value("sampling_rate", 1.0), p.value("noise_multiplier", 0.0),
                      p.value("rounds", int64_t{0})};
}

int DeleteUnreleasedModels(const std::string& run_dir, int64_t best_trial, int64_t trials) {
  int deleted = 0;
  for (int64_t id = 1; id <= trials; ++id) {
    if (id == best_trial) continue;
    const std::string dir = RunDir::FederatedTrialDir(run_dir, id);
    bool any = false;
    for (const char* sub : {"/model", "/artifacts", "/federation"}) {
      std::error_code ec;
      any = std::filesystem::remove_all(dir + sub, ec) > 0 || any;
    }
    if (any) ++deleted;
  }
  return deleted;
}

StudyPrivacyBudget::StudyPrivacyBudget(const v1::ExperimentSpec& spec, std::string run_dir)
    : run_dir_(std::move(run_dir)),
      max_epsilon_(spec.budget().max_epsilon()),
      max_trials_(spec.search().max_trials()),
      planned_(PlannedTrialPrivacy(spec)),
      // Integer orders once any trial may sample its clients (fractional ones need q = 1).
      orders_(DefaultRdpOrders(planned_.sampling_rate < 1 || TunesSampling(spec))),
      delta_(DpAccountantOptions(spec.federation()).delta) {}

int64_t StudyPrivacyBudget::CreateLimit(int64_t created,
                                        const std::function<bool(int64_t)>& ended) {
  for (int64_t id = 1; id <= created; ++id) {
    if (!ended_.contains(id) && ended(id)) {
      // What its run spent, once; a run that left no record never finished a DP round.
      ended_.emplace(id, SpentByTrialRun(RunDir::FederatedTrialDir(run_dir_, id))
                             .value_or(TrialPrivacy{}));
    }
  }
  if (created == last_created_ && ended_.size() == last_ended_) return last_limit_;
  StudyPrivacyAccount account(orders_, delta_);
  const std::vector<double> planned = account.TrialRdp(planned_);
  for (int64_t id = 1; id <= created; ++id) {
    auto done = ended_.find(id);
    if (done != ended_.end()) {
      account.Add(done->second);
    } else {
      account.AddRdp(planned, planned_.rounds);
    }
  }
  committed_ = account.Epsilon();
  with_next_ = account.EpsilonWith(planned_);
  last_created_ = created;
  last_ended_ = ended_.size();
  last_limit_ = created + account.TrialsThatFit(planned_, max_epsilon_,
                                                std::max<int64_t>(0, max_trials_ - created));
  return last_limit_;
}

}  // namespace sextant
