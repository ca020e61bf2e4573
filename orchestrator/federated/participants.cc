#include "orchestrator/federated/participants.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {

void Participants::SetMarket(FederatedPlacement placement, FederatedBilling* billing,
                             uint64_t seed) {
  placement_ = std::move(placement);
  billing_ = billing;
  spot_.emplace(seed);
}

void Participants::Launch(const std::vector<std::string>& argv, const std::string& log,
                          const std::string& what, const std::string& region, bool aggregator) {
  auto pid = env_.launcher->Launch(argv, absl::StrCat(env_.logs_dir, "/", log));
  if (!pid.ok()) {
    *env_.err << "sextant: " << pid.status().message() << "\n";
    return;
  }
  Child c{*pid,   what,      billing_ ? billing_->Start(region, aggregator) : 0, argv, log,
          region, aggregator};
  if (placement_) ++launched_[placement_->For(region, aggregator).owner.pool];
  DrawInterruption(c);
  children_.push_back(std::move(c));
  (void)env_.store->AddEvent(EventTime(), "federation_launch", 0,
                             absl::StrCat(what, " pid=", *pid));
}

bool Participants::Poll() {
  InterruptSpotInstances();
  std::vector<Child> replace;
  bool alive = true;
  for (auto it = children_.begin(); it != children_.end();) {
    std::optional<int> status = env_.launcher->Poll(it->pid);
    if (!status) {
      ++it;
      continue;
    }
    Ended(*it);
    if (it->interrupted) {
      replace.push_back(std::move(*it));
    } else {
      (void)env_.store->AddEvent(EventTime(), "federation_exit", 0,
                                 absl::StrCat(it->what, " exited (status ", *status, ")"));
      alive = alive && !it->aggregator;
    }
    it = children_.erase(it);
  }
  for (const Child& c : replace) Replace(c);
  return alive;
}

int Participants::clients() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                        [](const Child& c) { return !c.aggregator; }));
}

void Participants::StopAll(absl::Duration grace) {
  const absl::Time until = env_.clock->Now() + grace;
  auto reap = [&] {
    for (auto it = children_.begin(); it != children_.end();) {
      if (!env_.launcher->Poll(it->pid)) {
        ++it;
        continue;
      }
      Ended(*it);
      it = children_.erase(it);
    }
  };
  while (!children_.empty() && env_.clock->Now() < until) {
    reap();
    env_.clock->SleepFor(absl::Milliseconds(50));
  }
  for (const Child& c : children_) env_.launcher->Signal(c.pid, SIGKILL);
  for (int i = 0; i < 100 && !children_.empty(); ++i) {
    reap();
    if (!children_.empty()) env_.clock->SleepFor(absl::Milliseconds(10));
  }
  for (const Child& c : children_) Ended(c);  // killed and not reaped yet: billed until now
  children_.clear();
}

void Participants::Ended(const Child& c) {
  if (billing_) billing_->Stop(c.bill);
}

void Participants::DrawInterruption(Child& c) {
  if (!placement_) return;
  const PoolOffer& pool = placement_->For(c.region, c.aggregator);
  if (pool.offer.market != Market::kSpot) return;
  const Interruption i = spot_->Sample(pool.offer.interruption);
  if (!std::isfinite(i.after_seconds)) return;
  c.interrupt_at = env_.clock->Now() + absl::Seconds(i.after_seconds * env_.time_scale);
  c.notice = i.notice;
}

void Participants::InterruptSpotInstances() {
  const absl::Time now = env_.clock->Now();
  for (Child& c : children_) {
    if (c.interrupted || now < c.interrupt_at) continue;
    c.interrupted = true;
    env_.launcher->Signal(c.pid, c.notice ? SIGTERM : SIGKILL);
    const PoolOffer& pool = placement_->For(c.region, c.aggregator);
    ++preemptions_[pool.owner.pool];
    (void)env_.store->AddEvent(
        EventTime(), "federation_preempted", 0,
        absl::StrCat(c.what, " preempted: spot pool ", pool.owner.pool, " took its instance back",
                     c.notice ? " after a notice" : " without a notice",
                     "; a new instance takes its place"));
  }
}

void Participants::Replace(const Child& c) {
  std::vector<std::string> argv;
  for (size_t i = 0; i < c.argv.size(); ++i) {
    if (c.argv[i] == "--listen") {
      ++i;
      continue;
    }
    argv.push_back(c.argv[i]);
  }
  if (auto port = ports_.find(c.region); c.aggregator && port != ports_.end()) {
    argv.insert(argv.end(), {"--listen", absl::StrCat("127.0.0.1:", port->second)});
  }
  // Its own log beside the one it replaces: NAME.log, then NAME.2.log, NAME.3.log, ...
  const int n = ++replaced_[c.what] + 1;
  const std::string log = absl::StrCat(c.log.substr(0, c.log.size() - 4), ".", n, ".log");
  Launch(argv, log, c.what, c.region, c.aggregator);
}

}  // namespace sextant
