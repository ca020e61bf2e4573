#include "aggregator/secagg_hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "federation/secure_quantizer.h"

namespace sextant {
namespace {

// What a message of another experiment than `ours` is answered.
absl::Status OtherExperiment(const std::string& theirs, const std::string& ours) {
  return absl::AbortedError(
      absl::StrCat("secagg: experiment '", theirs, "', this is '", ours, "'"));
}

// client_id's index in the sorted participants; nullopt when it is not one of them.
std::optional<int32_t> IndexOf(const std::vector<std::string>& participants,
                               const std::string& client_id) {
  auto it = std::lower_bound(participants.begin(), participants.end(), client_id);
  if (it == participants.end() || *it != client_id) return std::nullopt;
  return static_cast<int32_t>(it - participants.begin());
}

// The protocol config of a round of n clients with vectors of model_size + 1 ring elements,
// in a ring that holds the sum of max(n, ring_clients) clients quantised as q says.
// InvalidArgument when no ring of up to 64 bits does.
absl::StatusOr<SecAggConfig> PlanRound(const SecAggHubOptions& options, const SecAggQuantization& q,
                                       int64_t round, int32_t n, size_t model_size,
                                       uint64_t graph_seed) {
  const int64_t ring_clients = std::max<int64_t>(n, options.ring_clients);
  const int ring_bits = SecureQuantizer::RequiredRingBits(q.bits, ring_clients, q.max_weight);
  if (ring_bits > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: no ring of up to 64 bits holds the sum of ", ring_clients,
                     " clients at ", q.bits, " bits with weights up to ", q.max_weight));
  }
  return PlanSecAggRound(options.experiment_id, round, n, options.dropout_rate, ring_bits,
                         model_size + 1, graph_seed);
}

// The contributors' metrics averaged by eval weight (1 for a sender that did not evaluate);
// eval_weight is the sum of theirs.
SenderMetrics FoldMetrics(const std::vector<int32_t>& contributors,
                          const std::vector<std::optional<SenderMetrics>>& metrics) {
  SenderMetrics out;
  double eval_weight = 0;
  for (int32_t c : contributors) {
    if (!metrics[c]) continue;
    const SenderMetrics& m = *metrics[c];
    const double w = m.eval_weight > 0 ? m.eval_weight : 1;
    out.train_loss += w * m.train_loss;
    out.eval_loss += w * m.eval_loss;
    out.eval_accuracy += w * m.eval_accuracy;
    eval_weight += w;
    out.eval_weight += m.eval_weight;
  }
  if (eval_weight > 0) {
    out.train_loss /= eval_weight;
    out.eval_loss /= eval_weight;
    out.eval_accuracy /= eval_weight;
  }
  return out;
}

// Files each message under its recipient; returns the recipients (the next stage's expected).
template <typename Message>
std::vector<int32_t> Address(std::vector<Message> messages,
                             std::vector<std::optional<Message>>& slots) {
  std::vector<int32_t> recipients;
  for (Message& m : messages) {
    recipients.push_back(m.header.recipient);
    slots[m.header.recipient] = std::move(m);
  }
  return recipients;
}

}  // namespace

absl::StatusOr<SecureQuantizer> MakeQuantizer(const SecAggQuantization& q, int64_t max_clients,
                                              int ring_bits) {
  return SecureQuantizer::Create(
      {q.clip, q.bits, q.max_weight, max_clients, ring_bits, q.segments, q.segment_clips});
}

absl::StatusOr<RoundOutcome> DecodeSecureRound(SecAggRoundOutcome& out, int64_t max_clients,
                                               size_t model_size, LazyFloats* mean) {
  SEXTANT_ASSIGN_OR_RETURN(SecureQuantizer quantizer,
                           MakeQuantizer(out.quantization, max_clients, out.config.ring_bits));
  if (mean->size() != model_size) {
    *mean = LazyFloats(model_size);
    if (mean->size() != model_size) {
      return absl::ResourceExhaustedError("no memory for the round's mean");
    }
  }
  SEXTANT_ASSIGN_OR_RETURN(int64_t weight, quantizer.ConsumeMean(std::move(out.sum), mean->span()));
  RoundOutcome r;
  r.round = out.round;
  r.mean = mean->span();
  r.total_weight = static_cast<double>(weight);
  r.count = out.count;
  r.senders = static_cast<int64_t>(out.contributors.size());
  r.metrics = out.metrics;
  return r;
}

SecAggHub::SecAggHub(SecAggHubOptions options, Clock* clock)
    : options_(std::move(options)), clock_(clock), stages_(options_.stage_timeout_seconds) {
  absl::MutexLock lock(&mu_);
  quantization_ = options_.quantization;
}

void SecAggHub::SetQuantization(SecAggQuantization quantization) {
  absl::MutexLock lock(&mu_);
  quantization_ = std::move(quantization);
}

absl::Status SecAggHub::Open(int64_t round, std::vector<std::string> participants,
                             size_t model_size, uint64_t graph_seed, double first_deadline_seconds,
                             int64_t min_clients) {
  SecAggQuantization q;
  {
    absl::MutexLock lock(&mu_);
    q = quantization_;
  }
  absl::StatusOr<SecAggConfig> config = PlanRound(
      options_, q, round, static_cast<int32_t>(participants.size()), model_size, graph_seed);
  if (!config.ok()) return config.status();
  return OpenWithConfig(std::move(participants), *std::move(config), first_deadline_seconds,
                        min_clients);
}

absl::Status SecAggHub::OpenBuffer(int64_t round, const std::map<std::string, double>& scales,
                                   size_t model_size, uint64_t graph_seed, int64_t min_clients) {
  SecAggQuantization q;
  {
    absl::MutexLock lock(&mu_);
    q = quantization_;
  }
  absl::StatusOr<SecAggConfig> config =
      PlanRound(options_, q, round, static_cast<int32_t>(scales.size()), model_size, graph_seed);
  if (!config.ok()) return config.status();
  std::vector<std::string> participants;  // sorted, as the map is
  for (const auto& [id, scale] : scales) {
    if (!(scale > 0 && scale <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg: update scale ", scale, " for ", id, " is outside (0, 1]"));
    }
    participants.push_back(id);
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& id : participants) {
    if (!joiners_.count(id)) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: ", id, " is not waiting"));
    }
  }
  SEXTANT_RETURN_IF_ERROR(OpenLocked(std::move(participants), *std::move(config),
                                     options_.stage_timeout_seconds, min_clients));
  for (size_t i = 0; i < participants_.size(); ++i) {
    update_scales_[i] = scales.at(participants_[i]);
    joiners_.erase(participants_[i]);
  }
  return absl::OkStatus();
}

absl::Status SecAggHub::OpenWithConfig(std::vector<std::string> participants, SecAggConfig config,
                                       double first_deadline_seconds, int64_t min_clients) {
  absl::MutexLock lock(&mu_);
  return OpenLocked(std::move(participants), std::move(config), first_deadline_seconds,
                    min_clients);
}

absl::Status SecAggHub::OpenLocked(std::vector<std::string> participants, SecAggConfig config,
                                   double first_deadline_seconds, int64_t min_clients) {
  std::sort(participants.begin(), participants.end());
  if (std::adjacent_find(participants.begin(), participants.end()) != participants.end()) {
    return absl::InvalidArgumentError("secagg: a participant is listed twice");
  }
  const int32_t n = static_cast<int32_t>(participants.size());
  if (config.num_clients != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: the config is for ", config.num_clients, " clients, not ", n));
  }
  const int64_t round = config.round;
  if (round <= round_) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: round ", round, " is not above round ", round_));
  }
  absl::StatusOr<SecAggServer> server = SecAggServer::Create(config);
  if (!server.ok()) return server.status();
  server_.emplace(*std::move(server));
  round_ = round;
  round_quantization_ = quantization_;
  participants_ = std::move(participants);
  update_scales_.assign(n, 1.0);
  stages_.SetFirstStageRule(first_deadline_seconds, min_clients, server_->config().threshold);
  directories_.assign(n, std::nullopt);
  attestations_.assign(n, PeerAttestation{});
  deliveries_.assign(n, std::nullopt);
  unmask_requests_.assign(n, std::nullopt);
  metrics_.assign(n, std::nullopt);
  counts_.assign(n, 0);
  rejected_.assign(n, 0);
  opened_at_ = clock_->Now();
  key_seconds_.assign(n, std::nullopt);
  outcome_.reset();
  abort_reason_ = absl::OkStatus();
  std::vector<int32_t> everyone(n);
  for (int32_t i = 0; i < n; ++i) everyone[i] = i;
  stages_.Open(SecAggStage::kAdvertiseKeys, participants_.size(), everyone, clock_->Now());
  notifier_.Notify();
  return absl::OkStatus();
}

absl::StatusOr<SecAggDownlink> SecAggHub::Join(const std::string& experiment_id,
                                               const std::string& client_id, int64_t base_version,
                                               absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  if (experiment_id != options_.experiment_id) {
    return OtherExperiment(experiment_id, options_.experiment_id);
  }
  const absl::Time until = clock_->Now() + wait;
  SecAggDownlink out;
  out.stage = SecAggStage::kAdvertiseKeys;
  bool counted = false;  // this call is counted in its entry's calls
  auto leave = [&] {
    auto w = joiners_.find(client_id);
    if (counted && w != joiners_.end()) {
      --w->second.calls;
      w->second.last_asked = clock_->Now();
    }
  };
  while (true) {
    if (done_) {
      leave();
      out.stage = SecAggStage::kAborted;
      return out;
    }
    if (auto r = refused_.find(client_id); r != refused_.end()) {
      const std::string why = r->second;
      refused_.erase(r);
      return absl::AbortedError(why);
    }
    auto w = joiners_.find(client_id);
    // Taken into the open instance, its keys not sent yet: that instance's start.
    if (w == joiners_.end() && server_ && stages_.stage() == SecAggStage::kAdvertiseKeys) {
      const std::optional<int32_t> i = IndexOf(participants_, client_id);
      if (i && !stages_.answered(*i)) {
        out.start =
            SecAggRoundStart{server_->config(), *i, round_quantization_, update_scales_[*i]};
        return out;
      }
    }
    if (w == joiners_.end()) {
      if (joiners_.size() >= options_.max_joiners) {
        ++rejections_;
        return absl::ResourceExhaustedError(absl::StrCat(
            "secagg: ", joiners_.size(), " clients already wait for the next instance"));
      }
      w = joiners_.emplace(client_id, Waiting{{client_id, base_version, clock_->Now()}}).first;
      counted = false;
    }
    if (!counted) {
      ++w->second.calls;
      counted = true;
    }
    w->second.joiner.base_version = base_version;
    w->second.last_asked = clock_->Now();
    notifier_.cv().SignalAll();  // AwaitJoiners
    if (clock_->WaitUntil(notifier_.cv(), mu_, until)) {
      leave();
      out.pending = true;
      return out;
    }
  }
}

std::vector<SecAggJoiner> SecAggHub::AwaitJoiners(size_t count, absl::Duration fresh,
                                                  absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = clock_->Now() + wait;
  while (true) {
    const absl::Time now = clock_->Now();
    for (auto it = joiners_.begin(); it != joiners_.end();) {
      const bool silent = it->second.calls == 0 && !join_holds_.count(it->first) &&
                          now - it->second.last_asked > fresh;
      it = silent ? joiners_.erase(it) : std::next(it);
    }
    if (done_ || joiners_.size() >= count) break;
    if (clock_->WaitUntil(notifier_.cv(), mu_, until)) break;
  }
  std::vector<SecAggJoiner> out;
  for (const auto& [id, w] : joiners_) out.push_back(w.joiner);
  std::stable_sort(out.begin(), out.end(), [](const SecAggJoiner& a, const SecAggJoiner& b) {
    return a.joined < b.joined;
  });
  return out;
}

void SecAggHub::HoldJoin(const std::string& client_id, int delta) {
  absl::MutexLock lock(&mu_);
  int& held = join_holds_[client_id];
  held += delta;
  if (held <= 0) join_holds_.erase(client_id);
}

void SecAggHub::Refuse(const std::string& client_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (!joiners_.erase(client_id)) return;
  ++rejections_;
  // Bounded as the line is: only a client that waited is ever refused.
  if (refused_.size() < options_.max_joiners) refused_[client_id] = reason;
  notifier_.Notify();
}

void SecAggHub::Withdraw(const std::string& experiment_id, int64_t round,
                         const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  int32_t index = 0;
  if (!CheckClient(experiment_id, round, client_id, &index).ok()) return;
  stages_.StopWaiting(index);  // this stage and the round's later ones
  notifier_.Notify();
}

void SecAggHub::SetDone() {
  absl::MutexLock lock(&mu_);
  done_ = true;
  notifier_.Notify();
}

absl::Status SecAggHub::CheckClient(const std::string& experiment_id, int64_t round,
                                    const std::string& client_id, int32_t* index) const {
  if (experiment_id != options_.experiment_id) {
    return OtherExperiment(experiment_id, options_.experiment_id);
  }
  if (round != round_ || !server_) {
    return absl::AbortedError(
        absl::StrCat("secagg: round ", round, " is not the open round (", round_, ")"));
  }
  const std::optional<int32_t> i = IndexOf(participants_, client_id);
  if (!i) {
    return absl::FailedPreconditionError(
        absl::StrCat("secagg: ", client_id, " is not a participant of round ", round));
  }
  *index = *i;
  return absl::OkStatus();
}

absl::StatusOr<SecAggDownlink> SecAggHub::Await(const std::string& experiment_id, int64_t round,
                                                SecAggStage stage, const std::string& client_id,
                                                absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time until = clock_->Now() + wait;
  SecAggDownlink out;
  out.stage = stage;
  while (true) {
    if (done_) {
      out.stage = SecAggStage::kAborted;
      return out;
    }
    if (round_ >= round) {
      int32_t i = 0;
      if (absl::Status s = CheckClient(experiment_id, round, client_id, &i); !s.ok()) return s;
      if (stages_.stage() == SecAggStage::kAborted) {
        out.stage = SecAggStage::kAborted;
        return out;
      }
      if (stage == SecAggStage::kAdvertiseKeys) {
        out.start = SecAggRoundStart{server_->config(), i, round_quantization_, update_scales_[i]};
        return out;
      }
      if (static_cast<int32_t>(stages_.stage()) >= static_cast<int32_t>(stage)) {
        const bool ok = (stage == SecAggStage::kShareKeys && directories_[i]) ||
                        (stage == SecAggStage::kMaskedInput && deliveries_[i]) ||
                        (stage == SecAggStage::kUnmask && unmask_requests_[i]) ||
                        (stage == SecAggStage::kDone && outcome_ &&
                         std::binary_search(outcome_->contributors.begin(),
                                            outcome_->contributors.end(), client_id));
        if (!ok) {
          return absl::FailedPreconditionError(
              absl::StrCat("secagg: ", client_id, " was dropped before the ",
                           SecAggStageName(stage), " stage of round ", round));
        }
        if (stage == SecAggStage::kShareKeys) {
          out.directory = directories_[i];
          for (const SecAggPeerKeys& peer : out.directory->peers) {
            const bool known =
                peer.client >= 0 && peer.client < static_cast<int32_t>(attestations_.size());
            out.attestations.push_back(known ? attestations_[peer.client] : PeerAttestation{});
          }
        }
        if (stage == SecAggStage::kMaskedInput) out.delivery = deliveries_[i];
        if (stage == SecAggStage::kUnmask) out.unmask_request = unmask_requests_[i];
        return out;
      }
    } else if (experiment_id != options_.experiment_id) {
      return OtherExperiment(experiment_id, options_.experiment_id);
    }
    if (clock_->WaitUntil(notifier_.cv(), mu_, until)) {
      out.pending = true;
      return out;
    }
  }
}

absl::StatusOr<SecAggConfig> SecAggHub::RoundConfig(const std::string& experiment_id, int64_t round,
                                                    const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  int32_t i = 0;
  if (absl::Status s = CheckClient(experiment_id, round, client_id, &i); !s.ok()) {
    ++rejections_;
    return s;
  }
  return server_->config();
}

absl::Status SecAggHub::Count(absl::Status s, int32_t index) {
  if (s.ok()) {
    stages_.MarkAnswered(index);
    notifier_.cv().SignalAll();
  } else {
    ++rejections_;
  }
  return s;
}

absl::Status SecAggHub::SubmitKeys(const std::string& client_id, SecAggAdvertiseKeys m,
                                   PeerAttestation attestation,
                                   const std::function<absl::Status(int32_t index)>& check) {
  absl::MutexLock lock(&mu_);
  int32_t i = 0;
  absl::Status s = CheckClient(m.header.experiment_id, m.header.round, client_id, &i);
  if (s.ok() && check) s = check(i);
  if (!s.ok()) return Count(s, i);
  m.header.sender = i;
  m.header.recipient = kSecAggServer;
  s = server_->HandleAdvertiseKeys(m);
  if (s.ok()) {
    attestation.client_id = client_id;
    attestations_[i] = std::move(attestation);
    key_seconds_[i] = absl::ToDoubleSeconds(clock_->Now() - opened_at_);
  }
  return Count(s, i);
}

absl::Status SecAggHub::SubmitShares(const std::string& client_id, SecAggShareKeys m) {
  absl::MutexLock lock(&mu_);
  int32_t i = 0;
  absl::Status s = CheckClient(m.header.experiment_id, m.header.round, client_id, &i);
  if (!s.ok()) return Count(s, i);
  m.header.sender = i;
  m.header.recipient = kSecAggServer;
  return Count(server_->HandleShareKeys(m), i);
}

absl::Status SecAggHub::SubmitMasked(const std::string& client_id, SecAggHeader header,
                                     const SecAggServer::MaskedInputReader& read,
                                     const SenderMetrics& metrics, int64_t count,
                                     int64_t rejected) {
  absl::MutexLock lock(&mu_);
  int32_t i = 0;
  absl::Status s = CheckClient(header.experiment_id, header.round, client_id, &i);
  if (!s.ok()) return Count(s, i);
  header.sender = i;
  header.recipient = kSecAggServer;
  s = server_->HandleMaskedInput(header, read);
  if (s.ok()) {
    metrics_[i] = metrics;
    counts_[i] = count;
    rejected_[i] = rejected;
  }
  return Count(s, i);
}

absl::StatusOr<StagingBuffer> SecAggHub::TakeStaging(size_t bytes, absl::Duration wait) {
  std::optional<StagingBuffer> buffer;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time until = clock_->Now() + wait;
    const int limit = std::max(1, options_.max_staged_inputs);
    while (!done_ && staged_ >= limit) {
      if (clock_->WaitUntil(notifier_.cv(), mu_, until)) break;
    }
    if (done_) return absl::AbortedError("secagg: the experiment is done");
    if (staged_ >= limit) {
      return absl::UnavailableError("secagg: every staging buffer is in use; retry");
    }
    ++staged_;
    // A free buffer of the right size is reused; the others go.
    while (!staging_.empty() && !buffer) {
      if (staging_.back().size() == bytes) buffer.emplace(std::move(staging_.back()));
      staging_.pop_back();
    }
  }
  if (buffer) return *std::move(buffer);
  // Made outside the lock: a large buffer in memory may take a while.
  absl::StatusOr<StagingBuffer> made = StagingBuffer::Create(options_.staging_dir, bytes);
  if (!made.ok()) ReturnStaging(StagingBuffer());
  return made;
}

void SecAggHub::ReturnStaging(StagingBuffer buffer) {
  absl::MutexLock lock(&mu_);
  staged_ = std::max(0, staged_ - 1);
  if (buffer.size() > 0 && static_cast<int>(staging_.size()) < options_.max_staged_inputs) {
    staging_.push_back(std::move(buffer));
  }
  notifier_.Notify();
}

absl::Status SecAggHub::SubmitReveal(const std::string& client_id, SecAggUnmaskResponse m) {
  absl::MutexLock lock(&mu_);
  int32_t i = 0;
  absl::Status s = CheckClient(m.header.experiment_id, m.header.round, client_id, &i);
  if (!s.ok()) return Count(s, i);
  m.header.sender = i;
  m.header.recipient = kSecAggServer;
  return Count(server_->HandleUnmaskResponse(m), i);
}

// One switch over the four stages: each Finish call's output is the next stage's messages.
void SecAggHub::CloseStage() {
  absl::Status failed;
  auto open_next = [&](SecAggStage next, const std::vector<int32_t>& recipients) {
    stages_.Open(next, participants_.size(), recipients, clock_->Now());
    notifier_.Notify();
  };
  switch (stages_.stage()) {
    case SecAggStage::kAdvertiseKeys: {
      absl::StatusOr<std::vector<SecAggKeyDirectory>> out = server_->FinishAdvertiseKeys();
      if (!(failed = out.status()).ok()) break;
      open_next(SecAggStage::kShareKeys, Address(*std::move(out), directories_));
      return;
    }
    case SecAggStage::kShareKeys: {
      absl::StatusOr<std::vector<SecAggShareDelivery>> out = server_->FinishShareKeys();
      if (!(failed = out.status()).ok()) break;
      open_next(SecAggStage::kMaskedInput, Address(*std::move(out), deliveries_));
      return;
    }
    case SecAggStage::kMaskedInput: {
      absl::StatusOr<std::vector<SecAggUnmaskRequest>> out = server_->FinishMaskedInput();
      if (!(failed = out.status()).ok()) break;
      open_next(SecAggStage::kUnmask, Address(*std::move(out), unmask_requests_));
      return;
    }
    case SecAggStage::kUnmask: {
      absl::StatusOr<SecAggResult> out = server_->FinishUnmask();
      if (!(failed = out.status()).ok()) break;
      SecAggRoundOutcome o;
      o.round = round_;
      o.config = server_->config();
      o.quantization = round_quantization_;
      o.sum = std::move(out->sum);
      for (int32_t c : out->contributors) {
        o.contributors.push_back(participants_[c]);
        o.count += counts_[c];
        o.rejected += rejected_[c];
      }
      o.metrics = FoldMetrics(out->contributors, metrics_);
      const double took = absl::ToDoubleSeconds(clock_->Now() - opened_at_);
      for (size_t c = 0; c < participants_.size(); ++c) {
        o.client_seconds.emplace_back(participants_[c], key_seconds_[c].value_or(took));
      }
      outcome_ = std::move(o);
      stages_.End(SecAggStage::kDone);
      notifier_.Notify();
      return;
    }
    default:
      return;
  }
  stages_.End(SecAggStage::kAborted);
  abort_reason_ = failed;
  notifier_.Notify();
}

SecAggStage SecAggHub::Advance() {
  absl::MutexLock lock(&mu_);
  const SecAggStage stage = stages_.stage();
  if (!server_ || stage == SecAggStage::kDone || stage == SecAggStage::kAborted) return stage;
  if (stages_.Ready(clock_->Now())) CloseStage();
  return stages_.stage();
}

bool SecAggHub::WaitAndAdvance(absl::Duration wait) {
  // A stage's deadline passes on the same clock, so wake at it (or every 20 ms).
  const absl::Time until = clock_->Now() + wait;
  while (true) {
    const SecAggStage s = Advance();
    if (s == SecAggStage::kDone || s == SecAggStage::kAborted) return true;
    absl::MutexLock lock(&mu_);
    if (clock_->Now() >= until) return false;
    clock_->WaitUntil(notifier_.cv(), mu_, std::min(until, clock_->Now() + absl::Milliseconds(20)));
  }
}

absl::StatusOr<SecAggRoundOutcome> SecAggHub::TakeOutcome() {
  absl::MutexLock lock(&mu_);
  if (stages_.stage() == SecAggStage::kAborted) {
    return absl::AbortedError(
        absl::StrCat("secagg round ", round_, " aborted: ", abort_reason_.message()));
  }
  if (stages_.stage() != SecAggStage::kDone || !outcome_) {
    return absl::FailedPreconditionError("secagg: the round has not finished");
  }
  SecAggRoundOutcome out = std::move(*outcome_);
  outcome_.reset();
  return out;
}

void SecAggHub::RecordRejection() {
  absl::MutexLock lock(&mu_);
  ++rejections_;
}

int64_t SecAggHub::rejections() {
  absl::MutexLock lock(&mu_);
  return rejections_;
}

}  // namespace sextant
