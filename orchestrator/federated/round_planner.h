#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_PLANNER_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/tier.h"
#include "orchestrator/federated/global_model.h"
#include "orchestrator/federated/selection_record.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The global tier's plan of each round: the global model's file for it, the clients sampled in
// each region and what each region's aggregator must close with, and the quantisation of a
// secure round, which int8 updates size from the last round's mean. Not thread-safe.
class RoundPlanner {
 public:
  // fed, model and selection (not owned) must outlive the planner and the plans it makes.
  // fed_dir receives the rounds' model files (global-N.f32).
  RoundPlanner(const v1::Federation& fed, std::string experiment_id, std::string fed_dir,
               GlobalModel* model, SelectionRecord* selection);

  // Writes round `round`'s model file and returns its plan for Tier::OpenRound: the clients
  // selection samples (recorded at event_time, for synchronous rounds), each region's slack at
  // the deadline or share of a buffer, and, with hide_region_sums, the regions' secure round.
  absl::StatusOr<RoundPlan> Plan(int64_t round, double event_time);

  // A round completed with this mean: secure int8 updates (without DP) size the next round's
  // tensor ranges from it.
  void Observe(absl::Span<const float> mean);

 private:
  // The quantisation of the next secure round. int8 updates go at 8 bits: under DP in the clip
  // that covers C and the noise; otherwise each tensor in its own range, sized from the last
  // round's mean update, so that the step follows the updates as they shrink. The first round
  // (and the first after a resume) has no mean to size ranges from and goes at 16 bits.
  SecAggQuantization Quantization() const;
  // Opens the regions' round `round` on secagg (every region takes part, with zeros when none
  // of its clients was sampled), before the round is published.
  absl::Status OpenRegionsRound(SecAggHub& secagg, int64_t round) const;

  const v1::Federation& fed_;
  const std::string experiment_id_, fed_dir_;
  GlobalModel* const model_;
  SelectionRecord* const selection_;
  std::vector<double> int8_ranges_;  // each tensor's range in the next round; empty: none yet
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_PLANNER_H_
