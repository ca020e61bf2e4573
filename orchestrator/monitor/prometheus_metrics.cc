#include "orchestrator/monitor/prometheus_metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sextant/v1/trial.pb.h"

namespace sextant {
namespace {

std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.17g", v);
}

void Family(std::string* out, const std::string& name, const std::string& type,
            const std::string& help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void Sample(std::string* out, const std::string& name, const std::string& labels, double v) {
  absl::StrAppend(out, name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ", Value(v),
                  "\n");
}

}  // namespace

std::string RenderPrometheusText(const MetricsSnapshot& s) {
  std::string out;
  Family(&out, "sextant_run_info", "gauge", "The experiment being run (always 1).");
  Sample(&out, "sextant_run_info",
         absl::StrCat("experiment=\"", LabelValue(s.experiment), "\",metric=\"",
                      LabelValue(s.metric), "\",goal=\"", LabelValue(s.goal), "\""),
         1);
  Family(&out, "sextant_trials", "gauge", "Trials by state.");
  std::map<std::string, int> states = s.by_state;
  for (int st = v1::TrialState_MIN; st <= v1::TrialState_MAX; ++st) {
    if (st != v1::TRIAL_STATE_UNSPECIFIED) states.emplace(v1::TrialState_Name(st), 0);
  }
  for (const auto& [state, n] : states) {
    Sample(&out, "sextant_trials", absl::StrCat("state=\"", LabelValue(state), "\""), n);
  }
  Family(&out, "sextant_trials_max", "gauge",
         "The most trials the search creates (search.max_trials).");
  Sample(&out, "sextant_trials_max", "", s.max_trials);
  if (s.best_value) {
    Family(&out, "sextant_best_value", "gauge", "The best objective value so far.");
    Sample(&out, "sextant_best_value", "", *s.best_value);
    Family(&out, "sextant_best_trial", "gauge", "The id of the trial with the best value so far.");
    Sample(&out, "sextant_best_trial", "", static_cast<double>(s.best_trial));
  }
  if (s.front_size) {
    Family(&out, "sextant_pareto_front_size", "gauge",
           "Feasible completed trials on the Pareto front (several objectives).");
    Sample(&out, "sextant_pareto_front_size", "", static_cast<double>(*s.front_size));
  }
  if (s.hypervolume) {
    Family(&out, "sextant_hypervolume", "gauge",
           "The hypervolume of the Pareto front against the run's reference point.");
    Sample(&out, "sextant_hypervolume", "", *s.hypervolume);
  }
  Family(&out, "sextant_spend", "gauge", "Money spent so far.");
  Sample(&out, "sextant_spend", absl::StrCat("currency=\"", LabelValue(s.currency), "\""), s.spend);
  if (s.budget) {
    Family(&out, "sextant_budget", "gauge", "The budget (budget.max_cost).");
    Sample(&out, "sextant_budget", absl::StrCat("currency=\"", LabelValue(s.currency), "\""),
           *s.budget);
  }
  Family(&out, "sextant_workers", "gauge", "Worker processes alive.");
  Sample(&out, "sextant_workers", "", s.workers);
  Family(&out, "sextant_workers_busy", "gauge", "Workers running a trial.");
  Sample(&out, "sextant_workers_busy", "", s.busy_workers);
  Family(&out, "sextant_worker_utilisation", "gauge", "Busy workers as a fraction of those alive.");
  Sample(&out, "sextant_worker_utilisation", "",
         s.workers > 0 ? std::min(1.0, static_cast<double>(s.busy_workers) / s.workers) : 0);
  if (s.gpu_utilisation) {
    Family(&out, "sextant_gpu_utilisation", "gauge", "Mean GPU utilisation over workers, 0 to 1.");
    Sample(&out, "sextant_gpu_utilisation", "", *s.gpu_utilisation);
  }
  if (s.rounds_max) {
    Family(&out, "sextant_rounds_done", "gauge", "Federated rounds finished.");
    Sample(&out, "sextant_rounds_done", "", s.rounds_done);
    Family(&out, "sextant_rounds_max", "gauge", "Federated rounds configured (federation.rounds).");
    Sample(&out, "sextant_rounds_max", "", *s.rounds_max);
  }
  if (s.transfer_spend) {
    const std::string currency = absl::StrCat("currency=\"", LabelValue(s.currency), "\"");
    Family(&out, "sextant_spend_by_kind", "gauge",
           "Money spent so far on instances (compute) and on bytes between regions (transfer).");
    Sample(&out, "sextant_spend_by_kind", absl::StrCat(currency, ",kind=\"compute\""),
           s.spend - *s.transfer_spend);
    Sample(&out, "sextant_spend_by_kind", absl::StrCat(currency, ",kind=\"transfer\""),
           *s.transfer_spend);
  }
  if (s.participant_preemptions) {
    Family(&out, "sextant_participant_preemptions", "gauge",
           "Federated participants whose spot instance the market took back.");
    Sample(&out, "sextant_participant_preemptions", "", *s.participant_preemptions);
  }
  Family(&out, "sextant_elapsed_seconds", "gauge",
         "Seconds since this orchestrator started the run.");
  Sample(&out, "sextant_elapsed_seconds", "", s.elapsed_seconds);
  return out;
}

}  // namespace sextant
