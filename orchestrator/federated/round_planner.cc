#include "orchestrator/federated/round_planner.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_plan.h"
#include "aggregator/tier_settings.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "federation/secagg_config.h"
#include "federation/secure_quantizer.h"
#include "tensors/tensor_file.h"

namespace sextant {
namespace {

// Secure int8 updates: a tensor's range is this many times the largest |value| of its last mean
// update (a client's own update reaches past the mean), and never below kInt8MinRange.
constexpr double kInt8RangeHeadroom = 4;
constexpr double kInt8MinRange = 1e-6;

}  // namespace

RoundPlanner::RoundPlanner(const v1::Federation& fed, std::string experiment_id,
                           std::string fed_dir, GlobalModel* model, SelectionRecord* selection)
    : fed_(fed),
      experiment_id_(std::move(experiment_id)),
      fed_dir_(std::move(fed_dir)),
      model_(model),
      selection_(selection) {}

void RoundPlanner::Observe(absl::Span<const float> mean) {
  if (fed_.secure_aggregation() && fed_.update_compression() == "int8" && !fed_.has_dp()) {
    int8_ranges_ = SegmentClipsFromMean(mean, LayoutSegments(model_->layout()), kInt8RangeHeadroom,
                                        kInt8MinRange);
  }
}

SecAggQuantization RoundPlanner::Quantization() const {
  SecAggQuantization q = BaseQuantization(fed_);
  if (fed_.update_compression() != "int8") return q;
  if (fed_.has_dp()) {
    q.bits = 8;
  } else if (!int8_ranges_.empty()) {
    q.bits = 8;
    q.segments = LayoutSegments(model_->layout());
    q.segment_clips = int8_ranges_;
  }
  return q;
}

absl::Status RoundPlanner::OpenRegionsRound(SecAggHub& secagg, int64_t round) const {
  const SecAggQuantization q = Quantization();
  secagg.SetQuantization(q);
  std::vector<std::string> regions;
  for (const auto& r : fed_.regions()) regions.push_back(r.name());
  // The ring of every secure sum when the regions' sums are hidden: it holds all clients' total.
  const int ring_bits = SecureQuantizer::RequiredRingBits(q.bits, TotalClients(fed_), q.max_weight);
  SEXTANT_ASSIGN_OR_RETURN(
      SecAggConfig config,
      RegionalLayerConfig(experiment_id_, round, static_cast<int32_t>(regions.size()), ring_bits,
                          model_->size() + 1,
                          fed_.seed() * 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(round)));
  return secagg.OpenWithConfig(std::move(regions), std::move(config), 0, 1);
}

absl::StatusOr<RoundPlan> RoundPlanner::Plan(int64_t round, double event_time) {
  const std::string file = absl::StrCat(fed_dir_, "/global-", round, ".f32");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(model_->values().data()),
              model_->size() * sizeof(float));
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
  }
  model_->Release();
  const bool buffered = Buffered(fed_);
  std::map<std::string, RoundTask> tasks;
  const SecAggQuantization quantization = Quantization();
  auto task_of = [&](const std::string& region) -> RoundTask& {
    RoundTask& t = tasks[region];
    t.model_size = static_cast<int64_t>(model_->size());
    t.seed = fed_.seed() * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(round);
    t.deadline_seconds = fed_.round_deadline_seconds();
    if (fed_.secure_aggregation()) {
      t.quantizer_bits = quantization.bits;
      t.segments = quantization.segments;
      t.segment_clips = quantization.segment_clips;
    } else if (fed_.update_compression() == "int8") {
      t.segments = LayoutSegments(model_->layout());  // the aggregators hold int8 updates to them
    }
    return t;
  };
  // Every region takes part in the regions' round, those without a sampled client too.
  if (fed_.hide_region_sums()) {
    for (const auto& r : fed_.regions()) task_of(r.name());
  }
  const std::vector<Participant> chosen = selection_->Select(fed_, round);
  for (const Participant& p : chosen) {
    task_of(p.region).participants.push_back(ClientId(p.region, p.index));
  }
  if (!buffered) SEXTANT_RETURN_IF_ERROR(selection_->Record(fed_, round, chosen, event_time));
  // Each region may close at the deadline once it is short by no more than the round's slack
  // (sampled - min_clients): with one region that is min_clients itself, and the global tier
  // still waits until min_clients are in over all regions.
  int64_t sampled = 0;
  for (const auto& [region, t] : tasks) sampled += static_cast<int64_t>(t.participants.size());
  const int64_t slack = std::max<int64_t>(0, sampled - std::max(1, fed_.min_clients()));
  for (auto& [region, t] : tasks) {
    const int64_t n = static_cast<int64_t>(t.participants.size());
    // Buffered: each region pushes its share of a server step's buffer_size updates.
    t.min_updates = buffered ? RegionBufferSize(fed_, n) : std::max<int64_t>(1, n - slack);
  }
  RoundPlan plan;
  plan.round = round;
  plan.model_path = file;
  plan.tasks = std::move(tasks);
  plan.deadline_seconds = buffered ? 0 : fed_.round_deadline_seconds();
  plan.min_updates = buffered ? fed_.buffer_size() : std::max(1, fed_.min_clients());
  if (fed_.hide_region_sums()) {
    // The regions' sum holds every client's update: the orchestrator never sees a region's.
    plan.open_secure = [this, round](SecAggHub& secagg) { return OpenRegionsRound(secagg, round); };
    plan.decode_max_clients = TotalClients(fed_);
  }
  return plan;
}

}  // namespace sextant
