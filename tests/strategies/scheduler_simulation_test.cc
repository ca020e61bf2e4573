// Discrete-event simulations of the multi-fidelity schedulers: W workers, each fidelity unit
// takes one time unit, and a trial's value is a fixed function of (trial, fidelity). An
// independent oracle re-derives, from the reports alone, which trials the ASHA rule allows to
// be promoted, to check that the scheduler never leaves a worker idle while work exists.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "strategies/internal/rung_ladder.h"
#include "strategies/internal/splitmix.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

FidelitySpec Fidelity(double min, double max, double eta = 3) {
  FidelitySpec fidelity;
  fidelity.name = "epoch";
  fidelity.min = min;
  fidelity.max = max;
  fidelity.reduction_factor = eta;
  return fidelity;
}

// A learning curve: the trial's asymptote plus a trial-specific gap that shrinks with fidelity.
double Value(int64_t trial, double fidelity) {
  const uint64_t bits = internal::SplitMix64(static_cast<uint64_t>(trial));
  const double asymptote = internal::UnitFromBits(bits);
  const double gap = internal::UnitFromBits(internal::SplitMix64(bits));
  return asymptote + gap / fidelity;
}

// The oracle: the ASHA promotion rule over groups of trials (one group for ASHA; one per
// Hyperband bracket round), kept with its own bookkeeping from what the simulation observed.
class PromotionOracle {
 public:
  // Declares that trials of `group` climb `rungs`.
  void AddGroup(int group, std::vector<double> rungs) {
    groups_[group].rungs = std::move(rungs);
    groups_[group].values.resize(groups_[group].rungs.size());
  }

  void Start(int64_t trial, int group, double target) {
    Trial& state = trials_[trial];
    state.group = group;
    state.target = target;
    state.paused = false;
  }

  void Report(int64_t trial, double fidelity, double value) {
    Trial& state = trials_.at(trial);
    Group& group = groups_.at(state.group);
    for (size_t k = 0; k < group.rungs.size(); ++k) {
      if (group.rungs[k] > state.target || fidelity < group.rungs[k]) break;
      if (state.recorded.count(k) == 0) {
        state.recorded[k] = value;
        group.values[k].push_back({value, trial});
      }
    }
  }

  void Promote(int64_t trial, double target) {
    trials_.at(trial).target = target;
    trials_.at(trial).paused = false;
  }

  void Pause(int64_t trial) { trials_.at(trial).paused = true; }

  // Every (trial, target) that the ASHA rule allows now.
  std::vector<std::pair<int64_t, double>> Promotable() const {
    std::vector<std::pair<int64_t, double>> out;
    for (const auto& [id, group] : groups_) {
      for (size_t k = 0; k + 1 < group.rungs.size(); ++k) {
        std::vector<std::pair<double, int64_t>> sorted = group.values[k];
        std::sort(sorted.begin(), sorted.end());
        const size_t quota = sorted.size() / 3;  // eta = 3 throughout
        for (size_t i = 0; i < quota; ++i) {
          const Trial& state = trials_.at(sorted[i].second);
          if (state.paused && state.target == group.rungs[k]) {
            out.push_back({sorted[i].second, group.rungs[k + 1]});
          }
        }
      }
    }
    return out;
  }

 private:
  struct Group {
    std::vector<double> rungs;
    std::vector<std::vector<std::pair<double, int64_t>>> values;
  };
  struct Trial {
    int group = 0;
    double target = 0;
    bool paused = false;
    std::map<size_t, double> recorded;
  };
  std::map<int, Group> groups_;
  std::map<int64_t, Trial> trials_;
};

struct Run {
  int64_t trial = 0;
  double fidelity = 0;  // the last fidelity reported (the checkpoint)
  double target = 0;
};

struct SimResult {
  int64_t makespan = 0;
  double busy_fraction = 0;        // busy worker-time / (workers * makespan)
  double busy_while_new_left = 0;  // the same, up to the time the last new trial started
  int64_t finished_at_max = 0;
  int64_t waits_with_new_allowed = 0;
  int64_t waits_with_work_left = 0;  // Wait or Done while the oracle saw a promotable trial
  int64_t promotions_not_allowed = 0;
};

// Maps a new job to its oracle group: a Hyperband bracket round, per the documented schedule.
using GroupOf = std::function<int(const Job&)>;

// The simulation loop; long because it is the whole discrete-event model in one place.
SimResult Simulate(Scheduler& scheduler, PromotionOracle& oracle, const GroupOf& group_of,
                   int workers, int64_t max_trials, double max_fidelity) {
  SimResult result;
  std::vector<std::optional<Run>> slots(workers);
  std::map<int64_t, double> checkpoint;
  int64_t created = 0;
  int64_t busy_time = 0;
  int64_t busy_time_at_last_new = 0;
  int64_t time_of_last_new = 0;
  bool done = false;
  while (!done) {
    for (auto& slot : slots) {
      if (slot.has_value()) continue;
      const bool new_allowed = created < max_trials;
      const Job job = scheduler.NextJob(new_allowed);
      if (job.kind == Job::Kind::kWait || job.kind == Job::Kind::kDone) {
        result.waits_with_new_allowed += new_allowed;
        result.waits_with_work_left += !oracle.Promotable().empty();
        done = job.kind == Job::Kind::kDone;
        break;
      }
      if (job.kind == Job::Kind::kNew) {
        const int64_t trial = created++;
        if (created == max_trials) {
          time_of_last_new = result.makespan;
          busy_time_at_last_new = busy_time;
        }
        scheduler.OnStart(trial, job);
        oracle.Start(trial, group_of(job), job.target);
        slot = Run{trial, 0, job.target};
      } else {
        const auto allowed = oracle.Promotable();
        result.promotions_not_allowed +=
            std::find(allowed.begin(), allowed.end(), std::make_pair(job.trial, job.target)) ==
            allowed.end();
        scheduler.OnStart(job.trial, job);
        oracle.Promote(job.trial, job.target);
        slot = Run{job.trial, checkpoint[job.trial], job.target};
      }
    }
    if (done) break;
    int busy = 0;
    for (auto& slot : slots) {
      if (!slot.has_value()) continue;
      ++busy;
      Run& run = *slot;
      run.fidelity = std::min(run.fidelity + 1, run.target);
      const double value = Value(run.trial, run.fidelity);
      oracle.Report(run.trial, run.fidelity, value);
      const Decision decision = scheduler.OnReport(run.trial, run.fidelity, value);
      if (decision.kind == Decision::Kind::kStop) {
        scheduler.OnEnd(run.trial, false);
        slot.reset();
      } else if (decision.kind == Decision::Kind::kPause || run.fidelity >= run.target) {
        checkpoint[run.trial] = run.fidelity;
        scheduler.OnEnd(run.trial, true);
        if (run.target >= max_fidelity) {
          ++result.finished_at_max;
        } else {
          oracle.Pause(run.trial);
        }
        slot.reset();
      }
    }
    busy_time += busy;
    ++result.makespan;
  }
  result.busy_fraction = static_cast<double>(busy_time) / (workers * result.makespan);
  result.busy_while_new_left = time_of_last_new == 0 ? 1.0
                                                     : static_cast<double>(busy_time_at_last_new) /
                                                           (workers * time_of_last_new);
  return result;
}

void Print(const char* name, int workers, int64_t trials, const SimResult& r) {
  std::cout << name << ": " << workers << " workers, " << trials << " trials: makespan "
            << r.makespan << ", busy " << r.busy_fraction << " overall, " << r.busy_while_new_left
            << " while new trials remained, " << r.finished_at_max << " finished at max\n";
}

void ExpectNoIdleWhileWorkExists(const SimResult& r) {
  EXPECT_EQ(r.waits_with_new_allowed, 0);
  EXPECT_EQ(r.waits_with_work_left, 0);
  EXPECT_EQ(r.promotions_not_allowed, 0);
  EXPECT_DOUBLE_EQ(r.busy_while_new_left, 1.0);
}

SimResult SimulateAsha(int workers, int64_t trials, FidelitySpec fidelity) {
  AshaOptions options;
  options.fidelity = fidelity;
  auto asha = NewAshaScheduler(options);
  PromotionOracle oracle;
  oracle.AddGroup(0, internal::AshaRungs(fidelity));
  return Simulate(
      *asha, oracle, [](const Job&) { return 0; }, workers, trials, fidelity.max);
}

// Groups are numbered bracket * 1e6 + round, with rounds of n_0 new trials per bracket.
SimResult SimulateHyperband(int workers, int64_t trials, FidelitySpec fidelity) {
  auto hyperband = NewHyperbandScheduler(fidelity);
  PromotionOracle oracle;
  std::map<int, BracketPlan> plans;
  for (const BracketPlan& plan : HyperbandBrackets(fidelity)) plans[plan.s] = plan;
  std::map<int, int64_t> started;
  const GroupOf group_of = [&](const Job& job) {
    const BracketPlan& plan = plans.at(job.bracket);
    const int group = job.bracket * 1000000 + static_cast<int>(started[job.bracket]++ / plan.n[0]);
    oracle.AddGroup(group, plan.r);
    return group;
  };
  return Simulate(*hyperband, oracle, group_of, workers, trials, fidelity.max);
}

TEST(SchedulerSimulationTest, AshaNeverIdlesAWorkerWhileWorkExists) {
  const SimResult r = SimulateAsha(8, 100, Fidelity(1, 27));
  Print("ASHA", 8, 100, r);
  ExpectNoIdleWhileWorkExists(r);
  EXPECT_GT(r.finished_at_max, 0);
}

TEST(SchedulerSimulationTest, HyperbandNeverIdlesAWorkerWhileWorkExists) {
  const SimResult r = SimulateHyperband(8, 100, Fidelity(1, 27));
  Print("Hyperband", 8, 100, r);
  ExpectNoIdleWhileWorkExists(r);
  EXPECT_GT(r.finished_at_max, 0);
}

// Busy time is measured while new trials remain. Over the whole run it is lower (about 0.76
// here) because of the drain: once the last new trial has run, only the few trials that climb
// to max remain, and the last of them needs 26 more fidelity units whatever the scheduler does.
TEST(SchedulerSimulationTest, AshaKeeps32WorkersBusy) {
  const SimResult r = SimulateAsha(32, 500, Fidelity(1, 27));
  Print("ASHA", 32, 500, r);
  ExpectNoIdleWhileWorkExists(r);
  EXPECT_GE(r.busy_while_new_left, 0.95);
}

// Over a whole run the drain at the end weighs less as the run grows: with 4,000 trials on 32
// workers ASHA keeps at least 95% of all worker time busy, drain included.
TEST(SchedulerSimulationTest, AshaKeeps32WorkersBusyOverALongRun) {
  const SimResult r = SimulateAsha(32, 4000, Fidelity(1, 27));
  Print("ASHA", 32, 4000, r);
  ExpectNoIdleWhileWorkExists(r);
  EXPECT_GE(r.busy_fraction, 0.95);
}

}  // namespace
}  // namespace sextant
