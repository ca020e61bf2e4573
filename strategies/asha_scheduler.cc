#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "strategies/internal/rung_ladder.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

class AshaScheduler final : public Scheduler {
 public:
  explicit AshaScheduler(AshaOptions options)
      : options_(std::move(options)),
        ladder_(internal::AshaRungs(options_.fidelity), options_.fidelity.reduction_factor) {}

  Job NextJob(bool new_allowed) override {
    if (options_.promotion) {
      if (auto promotion = ladder_.FindPromotion()) {
        return Job::Promote(promotion->trial, promotion->target);
      }
    }
    if (new_allowed) {
      return Job::New(options_.promotion ? ladder_.rungs().front() : options_.fidelity.max);
    }
    // Rung contents change only through reports of running trials, so with nothing running no
    // paused trial can ever become promotable.
    return ladder_.AnyRunning() ? Job::Wait() : Job::Done();
  }

  void OnStart(int64_t trial, const Job& job) override {
    if (job.kind == Job::Kind::kPromote) {
      ladder_.StartPromoted(trial);
    } else {
      ladder_.StartNew(trial, job.target);
    }
  }

  Decision OnReportValues(int64_t trial, double fidelity, absl::Span<const double> values,
                          bool feasible) override {
    const std::vector<int> recorded = ladder_.Record(trial, fidelity, values, feasible);
    if (!options_.promotion) return StoppingDecision(recorded, trial, values, feasible);
    return internal::PromotionModeDecision(ladder_, trial, fidelity, options_.fidelity.name);
  }

  void OnEnd(int64_t trial, bool reached_target) override { ladder_.End(trial, reached_target); }

  std::map<int64_t, std::vector<double>> ValuesAtBestFidelity(int min_count) const override {
    std::map<double, std::map<int64_t, std::vector<double>>> by_fidelity;
    ladder_.CollectValues(&by_fidelity);
    return internal::AtBestFidelity(by_fidelity, min_count);
  }

  std::string Describe() const override {
    return absl::StrCat("ASHA (", options_.promotion ? "promotion" : "stopping", " mode), eta ",
                        options_.fidelity.reduction_factor, ", rungs at ", options_.fidelity.name,
                        " ", internal::FormatFidelities(ladder_.rungs()));
  }

 private:
  // Stopping mode: the trial goes on unless, at a rung below the top that it just reached, it
  // is outside the top 1/eta of the entries recorded there (its own included).
  Decision StoppingDecision(const std::vector<int>& recorded, int64_t trial,
                            absl::Span<const double> values, bool feasible) const {
    for (int rung : recorded) {
      if (rung == ladder_.top_rung() || !ladder_.OutsideTop(rung, trial)) continue;
      const std::string where = absl::StrCat("rung ", rung, " (", options_.fidelity.name, " ",
                                             ladder_.rungs()[rung], "): ");
      const std::string top = absl::StrCat("top-1/", options_.fidelity.reduction_factor);
      if (ladder_.objectives() == 1 && feasible && !values.empty()) {
        return Decision::Stop(absl::StrCat(where, "value ", values.front(), " is worse than the ",
                                           top, " cutoff ", *ladder_.Cutoff(rung), " of ",
                                           ladder_.RecordedAt(rung), " trials"));
      }
      std::string why = feasible ? "" : "infeasible, ";
      if (ladder_.objectives() > 1) {
        absl::StrAppend(&why, "non-dominated rank ", ladder_.ParetoRank(rung, trial), ", ");
      }
      return Decision::Stop(absl::StrCat(where, why, "not in the ", top, " of ",
                                         ladder_.RecordedAt(rung), " trials"));
    }
    return Decision::Continue();
  }

  AshaOptions options_;
  internal::RungLadder ladder_;
};

}  // namespace

std::unique_ptr<Scheduler> NewAshaScheduler(AshaOptions options) {
  return std::make_unique<AshaScheduler>(std::move(options));
}

}  // namespace sextant
