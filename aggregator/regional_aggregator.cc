#include "aggregator/regional_aggregator.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregator/client_roster.h"
#include "aggregator/federation_calls.h"
#include "aggregator/secagg_participant.h"
#include "aggregator/tier.h"
#include "common/atomic_file.h"
#include "common/ids.h"
#include "common/mapped_floats.h"
#include "common/status_macros.h"
#include "federation/secure_quantizer.h"
#include "rpc/host_address.h"
#include "rpc/peer_channel.h"

namespace sextant {
namespace {

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

absl::Status StopStatus(const std::atomic<bool>* stop) {
  return Stopped(stop) ? absl::CancelledError("stopped") : absl::OkStatus();
}

// Writes the streamed model straight to a file, so that it is never whole in memory.
class ModelFile {
 public:
  explicit ModelFile(std::string path) : path_(std::move(path)) {}
  ~ModelFile() { Close(); }
  absl::Status Write(int64_t offset, absl::Span<const float> v) {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return absl::InternalError(absl::StrCat(path_, ": ", std::strerror(errno)));
    const char* p = reinterpret_cast<const char*>(v.data());
    size_t left = v.size() * sizeof(float);
    off_t at = offset * static_cast<off_t>(sizeof(float));
    while (left > 0) {
      ssize_t n = ::pwrite(fd_, p, left, at);
      if (n <= 0) return absl::InternalError(absl::StrCat(path_, ": ", std::strerror(errno)));
      p += n;
      at += n;
      left -= n;
    }
    return absl::OkStatus();
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// A client's round seed: the round's and its id, the same in every build (HashId; the golden
// ratio multiply keeps it apart from the client's own UpdateSeed of the same id).
uint64_t ClientSeed(uint64_t round_seed, const std::string& client) {
  return round_seed ^ (HashId(client) * 0x9E3779B97F4A7C15ULL);
}

// Rounds sample the region's clients by place; with clients started by hand each place goes
// to the client that holds it (ClientRoster).
void ToHolders(const ClientRoster* roster, RoundTask* task) {
  if (roster == nullptr) return;
  for (std::string& p : task->participants) p = roster->Holder(p);
}

// A client's plan (FederationService.Join): its place, name and the experiment. Only a client
// certificate of this region is given one.
absl::StatusOr<v1::JoinPlan> ClientPlan(const RegionalAggregatorOptions& o, ClientRoster& roster,
                                        const PeerIdentity& caller) {
  if (caller.role != Role::kClient || caller.region != o.region) {
    return absl::PermissionDeniedError(absl::StrCat(
        IdentityUri(caller), " may not join here: only client certificates of region ", o.region));
  }
  // Its id must be one the gate lets speak before it holds a place for good.
  SEXTANT_RETURN_IF_ERROR(CheckClientId("client_id", caller.ClientId()));
  SEXTANT_ASSIGN_OR_RETURN(int64_t place, roster.Join(caller.name));
  v1::JoinPlan plan;
  for (const std::string& f :
       {std::string("--region"), o.region, std::string("--index"), absl::StrCat(place),
        std::string("--name"), caller.name, std::string("--experiment-id"), o.experiment_id}) {
    plan.add_flags(f);
  }
  plan.set_spec(o.client_spec);
  plan.set_spec_signature(o.client_spec_signature);
  plan.set_spec_certificate(o.client_spec_certificate);
  plan.set_expires_at(o.client_spec_expires_at);
  return plan;
}

// Each of the region's participants' task in the round upstream gave this region: the model's
// size, its own shuffling seed and the round's deadline.
std::map<std::string, RoundTask> ClientTasks(const RoundTask& upstream) {
  std::map<std::string, RoundTask> tasks;
  for (const std::string& c : upstream.participants) {
    RoundTask t;
    t.model_size = upstream.model_size;
    t.seed = ClientSeed(upstream.seed, c);
    t.deadline_seconds = upstream.deadline_seconds;
    t.segments = upstream.segments;  // the model's tensors, which an int8 update must follow
    tasks[c] = t;
  }
  return tasks;
}

// The quantisation of a secure round: the aggregator's own, with the bits and per-tensor ranges
// upstream set for the round (int8 updates). InvalidArgument for bits outside 2..32.
absl::StatusOr<SecAggQuantization> RoundQuantization(const RegionalAggregatorOptions& o,
                                                     const RoundTask& task) {
  SecAggQuantization q = o.quantization;
  if (task.quantizer_bits != 0) {
    if (task.quantizer_bits < 2 || task.quantizer_bits > 32) {
      return absl::InvalidArgumentError(absl::StrCat("round ", task.round, ": quantizer bits ",
                                                     task.quantizer_bits, " outside 2..32"));
    }
    q.bits = task.quantizer_bits;
  }
  q.segments = task.segments;
  q.segment_clips = task.segment_clips;
  return q;
}

// Each weight travels masked, so it is bounded on the sum: the survivors' weights are each at
// most max_weight (the client's declared examples). InvalidArgument past it.
absl::Status CheckSecureWeight(const RoundOutcome& r, int64_t max_weight) {
  if (r.total_weight > static_cast<double>(r.count * max_weight)) {
    return absl::InvalidArgumentError(
        absl::StrCat("round ", r.round, ": the ", r.count, " clients' total weight ",
                     r.total_weight, " is above ", r.count, " x ", max_weight,
                     " (examples_per_client): a client declared a weight out of range"));
  }
  return absl::OkStatus();
}

// A finished SecAgg buffer of this region's clients, decoded into *mean, as `version`'s
// outcome (DecodeSecureRound): each contributor one client, their total weight bounded.
absl::StatusOr<RoundOutcome> DecodeOutcome(int64_t version, SecAggRoundOutcome& out,
                                           size_t model_size, LazyFloats* mean) {
  SEXTANT_ASSIGN_OR_RETURN(RoundOutcome r,
                           DecodeSecureRound(out, out.config.num_clients, model_size, mean));
  r.round = version;
  r.count = r.senders;
  SEXTANT_RETURN_IF_ERROR(CheckSecureWeight(r, out.quantization.max_weight));
  return r;
}

// The round upstream gave this region, at this tier: its model at `file`, each sampled
// client's task and, under secure aggregation, the SecAgg instance among them (its sum kept
// encoded for the regions' round with hide_region_sum; a quantisation out of range fails the
// round, not the aggregator).
RoundPlan RegionRound(const RegionalAggregatorOptions& o, const RoundTask& task, std::string file) {
  RoundPlan plan;
  plan.round = task.round;
  plan.model_path = std::move(file);
  plan.tasks = ClientTasks(task);
  plan.deadline_seconds = task.deadline_seconds;
  plan.min_updates = std::max<int64_t>(1, task.min_updates);
  if (o.secure_aggregation) {
    plan.open_secure = [&o, task](SecAggHub& secagg) -> absl::Status {
      SEXTANT_ASSIGN_OR_RETURN(SecAggQuantization quantization, RoundQuantization(o, task));
      secagg.SetQuantization(std::move(quantization));
      return secagg.Open(task.round, task.participants, static_cast<size_t>(o.model_size),
                         ClientSeed(task.seed, o.region), task.deadline_seconds,
                         std::max<int64_t>(1, task.min_updates));
    };
    plan.keep_sum = o.hide_region_sum;
  }
  return plan;
}

// A client in a buffer's line that has not asked for this long is taken for gone.
constexpr absl::Duration kJoinerSilence = absl::Seconds(15);

// Buffered rounds under secure aggregation: a buffer is one SecAgg instance among the first
// clients in line (SecAggHub::Join), as many as `task` (the newest version's) asks the region
// for and at least 2, whose updates are at most max_staleness versions older than `version`;
// a staler one (or one claiming a version not yet out) is turned away and counted. Each client
// damps its own update by its StalenessFactor, which the instance gives it. Waits up to `wait`
// for the line to fill. Returns the buffer's decoded mean as the outcome of `version`, nullopt
// when the line did not fill, or the instance's error (Aborted: too few survived).
absl::StatusOr<std::optional<RoundOutcome>> SecureBuffer(const RegionalAggregatorOptions& o,
                                                         Tier& tier, const RoundTask& task,
                                                         int64_t version, int64_t* instance,
                                                         LazyFloats* mean, absl::Duration wait,
                                                         const std::atomic<bool>* stop) {
  SecAggHub& secagg = tier.secagg();
  const size_t k = static_cast<size_t>(std::max<int64_t>(2, task.min_updates));
  std::map<std::string, double> scales;
  for (const SecAggJoiner& j : secagg.AwaitJoiners(k, kJoinerSilence, wait)) {
    const int64_t staleness = version - j.base_version;
    if (staleness < 0 || staleness > o.buffer.max_staleness) {
      secagg.Refuse(j.client_id,
                    absl::StrCat("an update of version ", j.base_version, " is ",
                                 staleness < 0 ? "from the future" : "too stale", " at version ",
                                 version, " (max_staleness ", o.buffer.max_staleness, ")"));
      continue;
    }
    if (scales.size() < k) scales[j.client_id] = StalenessFactor(o.buffer, staleness);
  }
  if (scales.size() < k) return std::optional<RoundOutcome>();
  SEXTANT_ASSIGN_OR_RETURN(SecAggQuantization quantization, RoundQuantization(o, task));
  secagg.SetQuantization(std::move(quantization));
  ++*instance;
  SEXTANT_RETURN_IF_ERROR(
      secagg.OpenBuffer(*instance, scales, static_cast<size_t>(o.model_size),
                        ClientSeed(task.seed ^ static_cast<uint64_t>(*instance), o.region), 1));
  SEXTANT_RETURN_IF_ERROR(tier.AwaitClosable(Tier::Close::kSecure, [&] {
    tier.RelayFailures();  // the run's console names each failed client as it goes
    return StopStatus(stop);
  }));
  SEXTANT_ASSIGN_OR_RETURN(SecAggRoundOutcome out, secagg.TakeOutcome());
  SEXTANT_ASSIGN_OR_RETURN(RoundOutcome r,
                           DecodeOutcome(version, out, static_cast<size_t>(o.model_size), mean));
  return std::optional<RoundOutcome>(std::move(r));
}

// Buffered asynchronous rounds (federation.mode: buffered): the region's clients train
// continuously on the newest model version this aggregator has; it buffers their updates
// (FederationHub in buffered mode: each damped by its staleness, one staler than max_staleness
// rejected) and, whenever they stand for the version's min_updates clients (upstream's
// RoundTask), pushes the buffer's mean upstream tagged with the newest version it knows. Between
// buffers it asks upstream for a newer version (short polls), which it publishes to its clients
// without cutting off their updates in flight.
absl::Status BufferedRegion(const RegionalAggregatorOptions& o, Tier& tier,
                            const ClientRoster* roster, const std::atomic<bool>* stop) {
  FederationHub& hub = tier.hub();
  int64_t version = -1;
  const std::string incoming = absl::StrCat(o.work_dir, "/incoming.f32");
  bool pushed_last = false;
  // Secure: the newest version's task (its quantisation and the region's buffer size), the
  // last instance and the buffer's decoded mean.
  RoundTask latest;
  int64_t instance = 0;
  LazyFloats secure_mean;
  auto rejections_now = [&] {
    return hub.total_rejections() + (o.secure_aggregation ? tier.secagg().rejections() : 0);
  };
  int64_t rejections = rejections_now();
  while (!Stopped(stop)) {
    // A full buffer goes upstream; between pushes, and at least once after each, it asks
    // upstream for a newer version, so that pushes never starve the pulls.
    bool full = false;
    absl::StatusOr<RoundOutcome> outcome;
    if (version >= 0 && !pushed_last && o.secure_aggregation) {
      absl::StatusOr<std::optional<RoundOutcome>> buffer = SecureBuffer(
          o, tier, latest, version, &instance, &secure_mean, absl::Milliseconds(500), stop);
      if (Stopped(stop)) break;
      if (!buffer.ok()) {
        if (o.log)
          *o.log << "version=" << version << " instance=" << instance
                 << " secure aggregation: " << buffer.status() << "\n"
                 << std::flush;
        outcome = buffer.status();
        full = true;
      } else if (buffer->has_value()) {
        outcome = **std::move(buffer);
        full = true;
      }
    } else if (version >= 0 && !o.secure_aggregation) {
      full = hub.WaitReadyToClose(absl::ZeroDuration());
      if (full && !pushed_last) {
        std::vector<SenderReport> senders;
        outcome = hub.Close(&senders);
      }
    }
    if (full && !pushed_last) {
      pushed_last = true;
      if (!outcome.ok()) continue;
      const int64_t now_rejected = rejections_now();
      PushHeader header{o.experiment_id,          version,        o.region,
                        outcome->total_weight,    outcome->count, outcome->metrics,
                        now_rejected - rejections};
      absl::StatusOr<int64_t> sent = tier.PushAggregate(header, outcome->mean);
      secure_mean.Release();  // until the next decode
      // Rejections of this buffer's round travel with it; a push that failed carries them on.
      if (sent.ok()) rejections = now_rejected;
      if (!o.secure_aggregation) hub.ResumeBuffering();
      if (o.log) {
        *o.log << "version=" << version
               << (o.secure_aggregation ? absl::StrCat(" instance=", instance) : "")
               << " buffer clients=" << outcome->count << " weight=" << outcome->total_weight
               << " rejected=" << header.rejected
               << " pushed=" << (sent.ok() ? "ok" : sent.status().ToString()) << "\n"
               << std::flush;
      }
      continue;
    }
    pushed_last = false;
    ModelFile out(incoming);
    auto sink = [&](int64_t offset, absl::Span<const float> v) { return out.Write(offset, v); };
    // Without a version yet, wait for upstream's first; then look for a newer one briefly, so
    // that a full buffer is not kept waiting.
    const double poll = version < 0 ? o.poll_seconds : full ? 0 : 0.1;
    absl::StatusOr<RoundTask> task =
        tier.PullRound(version, poll, sink, [&] { return StopStatus(stop); });
    out.Close();
    if (Stopped(stop)) break;
    if (!task.ok()) return task.status();
    if (task->kind == RoundTask::Kind::kDone) return absl::OkStatus();
    if (task->kind == RoundTask::Kind::kWait || task->participants.empty()) continue;
    ToHolders(roster, &*task);
    RoundPlan plan;
    plan.round = task->round;
    plan.model_path = absl::StrCat(o.work_dir, "/global-", task->round, ".f32");
    plan.tasks = ClientTasks(*task);
    plan.min_updates = std::max<int64_t>(1, task->min_updates);
    std::filesystem::rename(incoming, plan.model_path);
    SEXTANT_RETURN_IF_ERROR(tier.OpenRound(std::move(plan)));
    version = task->round;
    latest = *std::move(task);
  }
  return absl::OkStatus();
}

// The tier this region serves its clients on, under the tier above (o.upstream): only this
// region's clients, each as itself (by certificate) and with a fixed weight.
TierOptions RegionalTierOptions(const RegionalAggregatorOptions& o) {
  TierOptions to;
  to.listen = o.listen;
  to.credentials = o.server_credentials;
  to.interceptors = o.interceptors;
  to.coordinator.experiment_id = o.experiment_id;
  to.coordinator.model_size = static_cast<size_t>(o.model_size);
  to.coordinator.rule = o.rule;
  to.coordinator.buffer = o.buffer;
  to.coordinator.buffer.distinct_senders = true;  // a push never stands for more than its clients
  to.coordinator.clip_norm = o.dp_clip_norm;
  to.coordinator.ordered = o.ordered;
  to.coordinator.staging_dir = o.work_dir;  // a large model's update is staged there
  to.policy.region = o.region;
  to.policy.max_client_weight = o.max_client_weight;
  to.chunk_floats = o.chunk_floats;
  to.secure = o.secure_aggregation;
  to.secagg.stage_timeout_seconds = o.stage_timeout_seconds;
  to.secagg.quantization = o.quantization;
  // Masked inputs are assembled in files there, so that the aggregator holds only their sum.
  to.secagg.staging_dir = o.work_dir;
  if (o.hide_region_sum) to.secagg.ring_clients = o.ring_clients;
  UpstreamOptions& up = to.upstream.emplace();
  up.stub = v1::FederationService::NewStub(
      DialPeer(o.upstream, o.upstream_credentials ? o.upstream_credentials
                                                  : grpc::InsecureChannelCredentials()));
  up.target = o.upstream;
  up.sender_id = o.region;
  up.unreachable_timeout = absl::Seconds(o.connect_timeout_seconds);
  return to;
}

// Before the first round: upstream may have opened round 1 already and starts that round's
// deadline once every region has asked for it, so this region waits (up to
// o.startup_wait_seconds) for clients started by hand to take every place, then for every
// client to ask for a round, and logs who is missing.
void AwaitClients(const RegionalAggregatorOptions& o, Tier& tier, const ClientRoster* roster,
                  Clock* clock, const std::atomic<bool>* stop) {
  if (o.clients.empty()) return;
  const absl::Time start = clock->Now();
  const absl::Time until = start + absl::Seconds(o.startup_wait_seconds);
  while (roster && roster->held() < static_cast<int64_t>(o.clients.size()) &&
         clock->Now() < until && !Stopped(stop)) {
    clock->SleepFor(absl::Milliseconds(200));
  }
  std::vector<std::string> ids = o.clients;
  if (roster) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string holder = roster->Holder(ids[i]);
      if (o.log && holder != ids[i]) {
        *o.log << "client " << holder << " joined at place " << i << "\n";
      }
      ids[i] = holder;
    }
  }
  std::vector<std::string> missing =
      tier.AwaitContact(ids, std::max(absl::ZeroDuration(), until - clock->Now()),
                        [&] { return StopStatus(stop); })
          .value_or(ids);
  if (o.log) {
    *o.log << "clients_connected=" << o.clients.size() - missing.size() << "/" << o.clients.size()
           << " after=" << absl::ToDoubleSeconds(clock->Now() - start) << "s";
    if (!missing.empty()) *o.log << " missing=" << absl::StrJoin(missing, ",");
    *o.log << "\n" << std::flush;
  }
}

// hide_region_sum: this region's part in the regions' round, its encoded sum masked; zeros
// when none of its clients was sampled (plan none) or its own round aborted (its clients then
// count as dropped).
void RegionsRound(const RegionalAggregatorOptions& o, Tier& tier, const RoundTask& task,
                  std::optional<RoundPlan> plan, Clock* clock, const std::atomic<bool>* stop) {
  RegionSum region;
  if (plan) {
    absl::StatusOr<ClosedRound> closed =
        tier.RunRound(*std::move(plan), [&] { return StopStatus(stop); });
    if (Stopped(stop)) return;
    region.rejected = tier.last_rejected();
    if (closed.ok()) {
      region.clients = closed->outcome.count;
      region.metrics = closed->outcome.metrics;
      region.sum = std::move(closed->sum);
    } else if (o.log) {
      *o.log << "round=" << task.round << " secure aggregation: " << closed.status() << "\n"
             << std::flush;
    }
  }
  if (region.sum.empty()) {  // its rejections still count
    region.clients = 0;
    region.metrics = SenderMetrics{};
    const absl::StatusOr<SecAggQuantization> q = RoundQuantization(o, task);
    region.sum =
        RingVector(SecureQuantizer::RequiredRingBits(q.ok() ? q->bits : o.quantization.bits,
                                                     o.ring_clients, o.quantization.max_weight),
                   static_cast<size_t>(o.model_size) + 1);
  }
  SecAggParticipantOptions po;
  po.experiment_id = o.experiment_id;
  po.client_id = o.region;
  po.round = task.round;
  po.poll_seconds = std::min(o.poll_seconds, 1.0);
  po.stage_wait_seconds = std::max(600.0, 4 * o.stage_timeout_seconds);
  po.signer = o.signer.get();
  const int64_t clients = region.clients;
  absl::StatusOr<int64_t> sent =
      RunSecAggRegionParticipant(tier.upstream(), po, clock, std::move(region));
  if (o.log) {
    *o.log << "round=" << task.round << " clients=" << clients
           << " regions_round=" << (sent.ok() ? "ok" : sent.status().ToString()) << "\n"
           << std::flush;
  }
}

// This region's own round (secure or plaintext) and its aggregate pushed upstream; a round
// whose clients all failed, or that this aggregator was stopped in, is reported upstream
// instead, so that it does not wait for it.
void OwnRound(const RegionalAggregatorOptions& o, Tier& tier, const ClientRoster* roster,
              RoundPlan plan, const std::atomic<bool>* stop) {
  const int64_t round = plan.round;
  absl::StatusOr<ClosedRound> closed =
      tier.RunRound(std::move(plan), [&] { return StopStatus(stop); });
  if (Stopped(stop)) {
    // Stopped mid-round (a spot notice): the region sits this round out at once, rather than
    // hold the tier above to its deadline; the replacement takes the next round.
    (void)tier.ReportRoundFailed(
        round, "preempted: its aggregator was stopped (a spot notice or a signal) mid-round");
    return;
  }
  if (closed.ok() && o.secure_aggregation) {
    if (absl::Status s = CheckSecureWeight(closed->outcome, o.quantization.max_weight); !s.ok()) {
      closed = s;
    }
  }
  if (!closed.ok()) {
    // Upstream would otherwise wait for this region until its deadline, or for ever.
    if (o.secure_aggregation) {
      if (o.log)
        *o.log << "round=" << round << " secure aggregation: " << closed.status() << "\n"
               << std::flush;
      (void)tier.ReportRoundFailed(
          round, absl::StrCat("its secure round failed: ", closed.status().message()));
    } else {  // every sampled client failed
      if (o.log) *o.log << "round=" << round << " failed: " << closed.status() << "\n";
      (void)tier.ReportRoundFailed(round, "every sampled client of the region failed");
    }
    return;
  }
  const RoundOutcome& outcome = closed->outcome;
  // The round above is still open until this push: the failures reach it first.
  tier.RelayFailures();
  if (roster) {  // upstream knows the region's clients by place
    for (auto& [id, seconds] : closed->client_seconds) id = roster->PlaceOf(id);
  }
  PushHeader header{
      o.experiment_id, round,           o.region,         outcome.total_weight,
      outcome.count,   outcome.metrics, outcome.rejected, std::move(closed->client_seconds)};
  absl::StatusOr<int64_t> sent = tier.PushAggregate(header, outcome.mean);
  tier.ReleaseOutcome();  // until the next round's mean
  if (o.log) {
    *o.log << "round=" << round << " clients=" << outcome.count
           << " weight=" << outcome.total_weight << " rejected=" << outcome.rejected
           << " excluded=" << outcome.excluded
           << " pushed=" << (sent.ok() ? "ok" : sent.status().ToString()) << "\n"
           << std::flush;
  }
}

// Synchronous rounds: each round's model pulled from upstream into a file named after the
// round (the previous one removed once replaced), published to the sampled clients, then the
// region's round run. OK when upstream ends the experiment or the aggregator is stopped;
// upstream's error otherwise.
absl::Status SynchronousRounds(const RegionalAggregatorOptions& o, Tier& tier,
                               const ClientRoster* roster, Clock* clock,
                               const std::atomic<bool>* stop) {
  int64_t after = -1;
  const std::string incoming = absl::StrCat(o.work_dir, "/incoming.f32");
  while (!Stopped(stop)) {
    ModelFile out(incoming);
    auto sink = [&](int64_t offset, absl::Span<const float> v) { return out.Write(offset, v); };
    absl::StatusOr<RoundTask> task =
        tier.PullRound(after, o.poll_seconds, sink, [&] { return StopStatus(stop); });
    out.Close();
    if (Stopped(stop)) break;
    if (!task.ok()) return task.status();
    if (task->kind == RoundTask::Kind::kDone) break;
    if (task->kind == RoundTask::Kind::kWait) continue;
    ToHolders(roster, &*task);
    RoundPlan plan =
        RegionRound(o, *task, absl::StrCat(o.work_dir, "/global-", task->round, ".f32"));
    // The orchestrator says how many of this region's clients the round needs (min_clients).
    const bool sampled = !plan.tasks.empty();
    if (!sampled && !o.hide_region_sum) continue;
    if (sampled) std::filesystem::rename(incoming, plan.model_path);  // the tier publishes it
    after = task->round;
    if (o.hide_region_sum) {
      RegionsRound(o, tier, *task, sampled ? std::optional(std::move(plan)) : std::nullopt, clock,
                   stop);
    } else {
      OwnRound(o, tier, roster, std::move(plan), stop);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunRegionalAggregator(const RegionalAggregatorOptions& o, Clock* clock,
                                   const std::atomic<bool>* stop) {
  TierOptions to = RegionalTierOptions(o);
  std::unique_ptr<ClientRoster> roster;
  if (o.join_clients) {
    std::filesystem::create_directories(o.work_dir);
    SEXTANT_ASSIGN_OR_RETURN(
        roster, ClientRoster::Open(o.region, std::max<int64_t>(1, o.clients.size()),
                                   o.experiment_id, absl::StrCat(o.work_dir, "/clients.txt")));
    // A client that names its pool is billed there by the tier above, which checks the pool
    // first: a pool it refuses refuses the join.
    to.join = [&o, r = roster.get(), up = to.upstream->stub](
                  const PeerIdentity& caller,
                  const std::string& pool) -> absl::StatusOr<v1::JoinPlan> {
      SEXTANT_ASSIGN_OR_RETURN(v1::JoinPlan plan, ClientPlan(o, *r, caller));
      if (!pool.empty()) {
        SEXTANT_RETURN_IF_ERROR(
            ReportJoin(up.get(), o.experiment_id, r->PlaceOf(caller.ClientId()), pool));
      }
      return plan;
    };
    to.upstream->place_of = [r = roster.get()](const std::string& id) { return r->PlaceOf(id); };
  }
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<Tier> tier, Tier::Start(to, clock));
  const int port = tier->port();
  std::filesystem::create_directories(o.work_dir);
  if (!o.port_file.empty()) {
    SEXTANT_RETURN_IF_ERROR(WriteFileAtomically(o.port_file, absl::StrCat(port, "\n")));
  }
  if (!o.address_file.empty()) {
    SEXTANT_RETURN_IF_ERROR(
        WriteFileAtomically(o.address_file, absl::StrCat(DialTarget(o.listen, port), "\n")));
  }
  if (o.log)
    *o.log << "aggregator " << o.region << " serving on " << DialTarget(o.listen, port)
           << (o.dp_clip_norm > 0 ? absl::StrCat(" dp_clip_norm=", o.dp_clip_norm) : "") << "\n"
           << std::flush;
  AwaitClients(o, *tier, roster.get(), clock, stop);
  const absl::Status result = o.buffer.enabled
                                  ? BufferedRegion(o, *tier, roster.get(), stop)
                                  : SynchronousRounds(o, *tier, roster.get(), clock, stop);
  // Stopped while the experiment goes on (a spot notice): the clients wait for the replacement.
  // Ended: let clients waiting on GetRound see the end before the server goes; clients started
  // by hand may be slower to ask than ones this host started.
  if (Stopped(stop)) {
    tier->Stop();
  } else {
    tier->Shutdown(o.join_clients ? absl::Seconds(10) : absl::Milliseconds(500));
  }
  return result;
}

}  // namespace sextant
