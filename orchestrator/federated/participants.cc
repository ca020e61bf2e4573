#include "orchestrator/federated/participants.h"

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

namespace {

// Between two status queries of a provider other than local (each a Slurm command).
constexpr absl::Duration kStatusInterval = absl::Seconds(1);

}  // namespace

void Participants::Launch(const std::vector<std::string>& argv, const std::string& log,
                          const std::string& what, const std::string& region, bool aggregator) {
  Start(argv, log, log, what, region, aggregator);
}

void Participants::Start(const std::vector<std::string>& argv, const std::string& log,
                         const std::string& first_log, const std::string& what,
                         const std::string& region, bool aggregator) {
  InstanceRequest request;
  request.region = region;
  if (placement_) {
    const PoolOffer& pool = placement_->For(region, aggregator);
    request.pool = pool.owner.pool;
    request.instance = pool.offer.instance;
    request.market = pool.offer.market;
  }
  // A Slurm job is named after the participant's log: sextant-client-east-0.
  request.launch_token = log.substr(0, log.rfind(".log"));
  request.log_path = absl::StrCat(env_.logs_dir, "/", log);
  request.command = argv;
  absl::StatusOr<std::string> handle = env_.provider->Launch(request);
  if (!handle.ok()) {
    *env_.err << "sextant: " << what << " not started: " << handle.status().message() << "\n";
    return;
  }
  Child c;
  c.handle = *handle;
  c.what = what;
  c.bill = billing_ ? billing_->Start(region, aggregator) : 0;
  c.argv = argv;
  c.log = first_log;
  c.region = region;
  c.aggregator = aggregator;
  c.pool = request.pool;
  if (!c.pool.empty()) ++launched_[c.pool];
  DrawInterruption(c);
  children_.push_back(std::move(c));
  (void)env_.store->AddEvent(
      EventTime(), "federation_launch", 0,
      absl::StrCat(what, " ", env_.provider->Label(*handle),
                   request.pool.empty() ? "" : absl::StrCat(" pool=", request.pool)));
}

std::vector<std::pair<Participants::Child, std::string>> Participants::Reap(bool now) {
  std::vector<std::pair<Child, std::string>> ended;
  const bool local = std::string(env_.provider->name()) == "local";
  if (!local && !now && env_.clock->Now() < next_status_) return ended;
  next_status_ = env_.clock->Now() + kStatusInterval;
  for (auto it = children_.begin(); it != children_.end();) {
    InstanceStatus status = env_.provider->Poll(it->handle);
    if (!status.gone()) {
      ++it;
      continue;
    }
    Ended(*it);
    ended.emplace_back(std::move(*it), std::move(status.detail));
    it = children_.erase(it);
  }
  return ended;
}

bool Participants::Poll() {
  InterruptSpotInstances();
  bool alive = true;
  for (auto& [child, why] : Reap(/*now=*/false)) {
    if (child.interrupted) {
      Replace(child);
      continue;
    }
    (void)env_.store->AddEvent(EventTime(), "federation_exit", 0,
                               absl::StrCat(child.what, " exited (", why, ")"));
    alive = alive && !child.aggregator;
  }
  return alive;
}

int Participants::clients() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                        [](const Child& c) { return !c.aggregator; }));
}

void Participants::StopAll(absl::Duration grace) {
  const absl::Time until = env_.clock->Now() + grace;
  bool told = false;
  while (!children_.empty() && env_.clock->Now() < until) {
    (void)Reap(/*now=*/true);
    // Clients whose aggregator is gone (taken back in the last round) cannot hear the end
    // from it: they are told to stop instead of waiting out the grace.
    const bool aggregators = std::any_of(children_.begin(), children_.end(),
                                         [](const Child& c) { return c.aggregator; });
    if (!aggregators && !told) {
      told = true;
      for (const Child& c : children_)
        env_.provider->Interrupt(c.handle, /*notice=*/true).IgnoreError();
    }
    if (!children_.empty()) env_.clock->SleepFor(absl::Milliseconds(50));
  }
  for (const Child& c : children_)
    env_.provider->Interrupt(c.handle, /*notice=*/false).IgnoreError();
  for (int i = 0; i < 100 && !children_.empty(); ++i) {
    (void)Reap(/*now=*/true);
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
  const Interruption i = Scaled(spot_->Sample(pool.offer.interruption), env_.time_scale);
  if (!std::isfinite(i.after_seconds)) return;
  c.interrupt_at = env_.clock->Now() + absl::Seconds(i.after_seconds);
  if (i.notice) c.notice_at = c.interrupt_at - absl::Seconds(i.notice_seconds);
}

void Participants::InterruptSpotInstances() {
  const absl::Time now = env_.clock->Now();
  for (Child& c : children_) {
    if (c.killed || (now < c.notice_at && now < c.interrupt_at)) continue;
    const bool noticed = c.interrupted;
    if (!noticed) {
      ++preemptions_[c.pool];
      (void)env_.store->AddEvent(
          EventTime(), "federation_preempted", 0,
          absl::StrCat(
              c.what, " preempted: spot pool ", c.pool, " takes its instance back",
              c.notice_at != absl::InfiniteFuture() ? " after a notice" : " without a notice",
              "; a new instance takes its place"));
    }
    c.interrupted = true;
    if (now < c.interrupt_at) {
      if (!noticed) env_.provider->Interrupt(c.handle, /*notice=*/true).IgnoreError();
      continue;
    }
    c.killed = true;
    env_.provider->Interrupt(c.handle, /*notice=*/false).IgnoreError();
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
    // On its port again, at its new host's address (another node, on a cluster).
    argv.insert(argv.end(), {"--listen", absl::StrCat("auto:", port->second)});
  }
  // Its own log beside the one it replaces: NAME.log, then NAME.2.log, NAME.3.log, ...
  const int n = ++replaced_[c.what] + 1;
  const std::string log = absl::StrCat(c.log.substr(0, c.log.size() - 4), ".", n, ".log");
  Start(argv, log, c.log, c.what, c.region, c.aggregator);
}

}  // namespace sextant
