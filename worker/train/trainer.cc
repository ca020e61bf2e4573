#include "worker/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "worker/train/counter_rng.h"

namespace sextant::train {

std::string EpochMetrics::Format(const std::string& fidelity_name) const {
  return absl::StrFormat(
      "%s=%d train_loss=%.6f val_loss=%.6f val_accuracy=%.6f samples_per_sec=%.1f", fidelity_name,
      epoch, train_loss, val_loss, val_accuracy, samples_per_sec);
}

std::string TrainEvent::Format() const {
  return absl::StrCat(kind, " micro_batch=", micro_batch,
                      " reason=", absl::StrReplaceAll(reason, {{" ", "_"}, {"\n", "_"}}));
}

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  SEXTANT_RETURN_IF_ERROR(ValidateModelSpec(o.model));
  SEXTANT_RETURN_IF_ERROR(ValidateOptimizerOptions(o.optimizer));
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size: ", o.batch_size, " is < 1"));
  }
  if (o.epochs < 1)
    return absl::InvalidArgumentError(absl::StrCat("epochs: ", o.epochs, " is < 1"));
  if (o.nan_patience < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nan_patience: ", o.nan_patience, " is < 1"));
  }
  if (o.checkpoint_every_steps < 0) {
    return absl::InvalidArgumentError("checkpoint_every_steps: must be >= 0");
  }
  if (o.memory_cap_bytes < 0) return absl::InvalidArgumentError("memory_cap_bytes: must be >= 0");
  if (o.max_steps < 0) return absl::InvalidArgumentError("max_steps: must be >= 0");
  if (o.fidelity_name.empty() || o.fidelity_name.find_first_of(" =\t\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("fidelity_name: '", o.fidelity_name, "' is not a metric name"));
  }
  return absl::OkStatus();
}

namespace {

constexpr char kPayloadMagic[] = "sextant-train/1";

absl::Status ValidateData(const ModelSpec& spec, const Dataset& d, const char* which) {
  if (d.size() == 0) return absl::InvalidArgumentError(absl::StrCat(which, ": dataset is empty"));
  if (d.x.rows() != d.size() || d.x.cols() != spec.inputs()) {
    return absl::InvalidArgumentError(absl::StrCat(which, ": examples are ", d.x.rows(), "x",
                                                   d.x.cols(), ", the model expects ", d.size(),
                                                   "x", spec.inputs()));
  }
  for (int32_t y : d.y) {
    if (y < 0 || y >= spec.classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": label ", y, " is outside [0, ", spec.classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ProbeWritable(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint directory ", dir, " cannot be created: ", ec.message()));
  }
  const std::string probe = absl::StrCat(dir, "/.write-probe-", getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint directory ", dir, " is not writable: ", std::strerror(errno)));
  }
  std::fclose(f);
  std::remove(probe.c_str());
  return absl::OkStatus();
}

// The training state that is not in the model or the optimiser.
struct Position {
  int64_t epoch = 0;          // 0-based epoch in progress
  int64_t step_in_epoch = 0;  // steps of that epoch already applied
  int64_t global_step = 0;
  int64_t bad_streak = 0;      // consecutive non-finite steps
  double epoch_loss = 0;       // sum of finite training losses this epoch
  int64_t epoch_examples = 0;  // examples behind epoch_loss
};

class TrainLoop {
 public:
  TrainLoop(const TrainerOptions& o, const Dataset& train, const Dataset& val, Backend* backend)
      : o_(o),
        train_(train),
        val_(val),
        backend_(backend),
        clock_(o.clock != nullptr ? o.clock : RealClockInstance()) {}

  absl::StatusOr<TrainResult> Run();

 private:
  absl::Status Setup();
  absl::Status ChooseMicroBatch(int64_t start);
  absl::Status HalveAfter(const absl::Status& failure);
  absl::Status ReserveAll(int64_t rows);
  void Emit(TrainEvent e);
  std::vector<int64_t> Permutation(int64_t epoch) const;
  int64_t StepsPerEpoch() const { return (train_.size() + o_.batch_size - 1) / o_.batch_size; }
  absl::Status RunStep(const std::vector<int64_t>& perm);
  // One data-parallel replica: the main one (index 0) or one of options.replicas.
  struct Replica {
    Backend* backend = nullptr;
    std::unique_ptr<Model> model;
    std::unique_ptr<Optimizer> opt;
    Buffer dlogits;
    IntBuffer labels;
    IntBuffer index;  // the rows of a micro-batch, for GatherRows
    // The datasets where this replica's backend reads them (ResidentData); null data when they
    // did not fit, and batches are then staged through host memory.
    Tensor train_x, val_x;
    Buffer train_keep, val_keep;
  };
  Replica& At(size_t k) { return k == 0 ? main_ : extra_[k - 1]; }
  size_t replica_count() const { return 1 + extra_.size(); }
  absl::Status ReserveReplica(Replica& rep, int64_t rows);
  absl::Status SyncReplicas();
  absl::Status SumGradients();
  absl::Status ResidentData(Replica& rep);
  void Stage(Replica& rep, const Dataset& d, const Tensor& resident, const int64_t* rows,
             int64_t count);
  absl::StatusOr<EpochMetrics> Evaluate();
  std::string Fingerprint() const;
  absl::Status SaveCheckpoint();
  absl::Status Resume();
  std::vector<std::vector<float>> DownloadParameters();

  const TrainerOptions& o_;
  const Dataset& train_;
  const Dataset& val_;
  Backend* backend_;
  Clock* clock_;
  Replica main_;                // on backend_; model_ and opt_ below alias its members
  std::vector<Replica> extra_;  // on options.replicas
  std::unique_ptr<Model>& model_ = main_.model;
  std::unique_ptr<Optimizer>& opt_ = main_.opt;
  int64_t micro_ = 0;
  Buffer& dlogits_ = main_.dlogits;
  IntBuffer& labels_ = main_.labels;
  std::vector<float> host_x_;
  std::vector<int32_t> host_y_;
  std::vector<int32_t> host_index_;
  Position pos_;
  std::pair<int64_t, int64_t> last_saved_{-1, -1};  // (global step, epoch)
  TrainResult result_;
};

void TrainLoop::Emit(TrainEvent e) {
  if (o_.on_event) o_.on_event(e);
  result_.events.push_back(std::move(e));
}

absl::Status TrainLoop::ReserveReplica(Replica& rep, int64_t rows) {
  rep.dlogits = Buffer();
  rep.labels = IntBuffer();
  SEXTANT_RETURN_IF_ERROR(rep.model->Reserve(rows));
  SEXTANT_ASSIGN_OR_RETURN(rep.dlogits, rep.backend->Allocate(rows, o_.model.classes));
  SEXTANT_ASSIGN_OR_RETURN(rep.labels, rep.backend->AllocateInts(rows));
  rep.index = IntBuffer();
  SEXTANT_ASSIGN_OR_RETURN(rep.index, rep.backend->AllocateInts(rows));
  return absl::OkStatus();
}

absl::Status TrainLoop::ReserveAll(int64_t rows) {
  for (size_t k = 0; k < replica_count(); ++k) SEXTANT_RETURN_IF_ERROR(ReserveReplica(At(k), rows));
  return absl::OkStatus();
}

// Copies the main replica's weights and optimiser state to the others (after a resume).
absl::Status TrainLoop::SyncReplicas() {
  if (extra_.empty()) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  ByteWriter state;
  opt_->Save(state);
  std::vector<std::vector<float>> params = DownloadParameters();
  for (Replica& rep : extra_) {
    const std::vector<Tensor>& dst = rep.model->parameters();
    for (size_t i = 0; i < dst.size(); ++i) rep.backend->Upload(params[i].data(), dst[i]);
    ByteReader in(state.str());
    SEXTANT_RETURN_IF_ERROR(rep.opt->Load(in));
  }
  return absl::OkStatus();
}

absl::Status TrainLoop::SumGradients() {
  if (extra_.empty()) return absl::OkStatus();
  std::vector<std::vector<Tensor>> grads;
  for (size_t k = 0; k < replica_count(); ++k) {
    SEXTANT_RETURN_IF_ERROR(At(k).backend->Synchronize());
    grads.push_back(At(k).model->gradients());
  }
  SEXTANT_RETURN_IF_ERROR(o_.all_reduce_sum(grads));
  for (size_t k = 0; k < replica_count(); ++k)
    SEXTANT_RETURN_IF_ERROR(At(k).backend->Synchronize());
  return absl::OkStatus();
}

// Starting at `start`, halves the micro-batch until its estimated working memory fits the cap
// and the backend can allocate its buffers. The effective batch stays batch_size: RunStep
// accumulates gradients.
absl::Status TrainLoop::ChooseMicroBatch(int64_t start) {
  const int64_t slots = o_.optimizer.kind == "sgd" ? 1 : 2;
  const int64_t fixed = model_->parameter_count() * (2 + slots) * int64_t{sizeof(float)};
  int64_t m = start;
  while (true) {
    std::string reason;
    const int64_t need =
        fixed + model_->ActivationBytes(m) + m * (o_.model.classes + 1) * int64_t{sizeof(float)};
    if (o_.memory_cap_bytes > 0 && need > o_.memory_cap_bytes) {
      reason = absl::StrCat("estimated working memory ", need, " bytes exceeds the cap of ",
                            o_.memory_cap_bytes, " bytes");
    } else {
      absl::Status s = ReserveAll(m);
      if (s.ok()) break;
      if (!absl::IsResourceExhausted(s)) return s;
      reason = std::string(s.message());
    }
    if (m == 1) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory even at micro-batch 1: ", reason));
    }
    const int64_t next = (m + 1) / 2;
    Emit({"oom", next, absl::StrCat("micro-batch ", m, " -> ", next, ": ", reason)});
    m = next;
  }
  micro_ = m;
  host_x_.resize(m * o_.model.inputs());
  host_y_.resize(m);
  host_index_.resize(m);
  return absl::OkStatus();
}

// Puts both datasets where the replica's backend reads them, so a step gathers its batch there
// (on a GPU: one upload per run instead of one per step). Runs after the micro-batch is chosen,
// so the batch's buffers come first; a dataset that does not fit is staged per batch instead.
absl::Status TrainLoop::ResidentData(Replica& rep) {
  const auto place = [&](const Dataset& d, Tensor* view, Buffer* keep) -> absl::Status {
    if (d.size() > std::numeric_limits<int32_t>::max()) return absl::OkStatus();
    absl::StatusOr<Tensor> t = rep.backend->Readable(d.x.data(), d.size(), d.x.cols(), keep);
    if (t.ok()) {
      *view = *t;
      return absl::OkStatus();
    }
    *keep = Buffer();
    return absl::IsResourceExhausted(t.status()) ? absl::OkStatus() : t.status();
  };
  SEXTANT_RETURN_IF_ERROR(place(train_, &rep.train_x, &rep.train_keep));
  // Only the main replica evaluates.
  return &rep == &main_ ? place(val_, &rep.val_x, &rep.val_keep) : absl::OkStatus();
}

absl::Status TrainLoop::Setup() {
  SEXTANT_RETURN_IF_ERROR(ValidateTrainerOptions(o_));
  SEXTANT_RETURN_IF_ERROR(ValidateData(o_.model, train_, "train"));
  SEXTANT_RETURN_IF_ERROR(ValidateData(o_.model, val_, "validation"));
  if (!o_.checkpoint_dir.empty()) SEXTANT_RETURN_IF_ERROR(ProbeWritable(o_.checkpoint_dir));
  SEXTANT_ASSIGN_OR_RETURN(model_, NewModel(o_.model, backend_, o_.seed));
  main_.backend = backend_;
  SEXTANT_ASSIGN_OR_RETURN(opt_, NewOptimizer(o_.optimizer, model_->parameters(), backend_));
  if (!o_.replicas.empty() && !o_.all_reduce_sum) {
    return absl::InvalidArgumentError("replicas: data parallelism needs all_reduce_sum");
  }
  for (Backend* b : o_.replicas) {
    Replica& rep = extra_.emplace_back();
    rep.backend = b;
    SEXTANT_ASSIGN_OR_RETURN(rep.model, NewModel(o_.model, b, o_.seed));
    SEXTANT_ASSIGN_OR_RETURN(rep.opt, NewOptimizer(o_.optimizer, rep.model->parameters(), b));
  }
  SEXTANT_RETURN_IF_ERROR(ChooseMicroBatch(o_.batch_size));
  for (size_t k = 0; k < replica_count(); ++k) SEXTANT_RETURN_IF_ERROR(ResidentData(At(k)));
  if (!o_.checkpoint_dir.empty()) SEXTANT_RETURN_IF_ERROR(Resume());
  return SyncReplicas();
}

// A seeded Fisher-Yates shuffle that depends only on (seed, epoch), so a resumed run sees the
// same order without storing it.
// A step failed with ResourceExhausted (e.g. a library's workspace allocation on a GPU): go on
// with half the micro-batch. The failed step left no trace (it only advances after the backend
// has synchronised), so it is simply run again.
absl::Status TrainLoop::HalveAfter(const absl::Status& failure) {
  if (micro_ == 1) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory even at micro-batch 1: ", failure.message()));
  }
  const int64_t next = (micro_ + 1) / 2;
  Emit({"oom", next, absl::StrCat("micro-batch ", micro_, " -> ", next, ": ", failure.message())});
  return ChooseMicroBatch(next);
}

std::vector<int64_t> TrainLoop::Permutation(int64_t epoch) const {
  std::vector<int64_t> perm(train_.size());
  for (int64_t i = 0; i < train_.size(); ++i) perm[i] = i;
  const uint64_t key = StreamKey(o_.seed, static_cast<uint64_t>(epoch), 2);
  for (int64_t i = train_.size() - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(RandomBits(key, i) % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

void TrainLoop::Stage(Replica& rep, const Dataset& d, const Tensor& resident, const int64_t* rows,
                      int64_t count) {
  const int64_t width = o_.model.inputs();
  const bool gather = resident.data != nullptr;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t src = rows[r];
    host_y_[r] = d.y[src];
    if (gather) {
      host_index_[r] = static_cast<int32_t>(src);
    } else {
      std::memcpy(host_x_.data() + r * width, d.x.row(src).data(), width * sizeof(float));
    }
  }
  const Tensor input = rep.model->input().RowBlock(0, count);
  if (gather) {
    const IntTensor index{rep.index.view().data, count};
    rep.backend->UploadInts(host_index_.data(), index);
    rep.backend->GatherRows(resident, index, input);
  } else {
    rep.backend->Upload(host_x_.data(), input);
  }
  rep.backend->UploadInts(host_y_.data(), {rep.labels.view().data, count});
}

absl::Status TrainLoop::RunStep(const std::vector<int64_t>& perm) {
  const int64_t begin = pos_.step_in_epoch * o_.batch_size;
  const int64_t rows = std::min(o_.batch_size, train_.size() - begin);
  const uint64_t dropout_seed = StreamKey(o_.seed, static_cast<uint64_t>(pos_.global_step), 3);
  const float scale = 1.0f / static_cast<float>(rows);
  LossSums sums;
  // Replica k takes rows [lo, hi) of the batch; dropout is drawn by the row's position in the
  // whole batch, so the split does not change the masks.
  const int64_t n = static_cast<int64_t>(replica_count());
  for (int64_t k = 0; k < n; ++k) {
    Replica& rep = At(k);
    const int64_t lo = rows * k / n, hi = rows * (k + 1) / n;
    if (lo == hi) {  // fewer rows than replicas: this one contributes a zero gradient
      for (const Tensor& g : rep.model->gradients()) rep.backend->Fill(g, 0.0f);
      continue;
    }
    for (int64_t off = lo; off < hi; off += micro_) {
      const int64_t r = std::min(micro_, hi - off);
      Stage(rep, train_, rep.train_x, perm.data() + begin + off, r);
      Tensor logits = rep.model->Forward(r, /*training=*/true, dropout_seed, off);
      Tensor dlogits = rep.dlogits.view().RowBlock(0, r);
      LossSums s =
          rep.backend->SoftmaxCrossEntropy(logits, {rep.labels.view().data, r}, scale, dlogits);
      rep.model->Backward(dlogits, off == lo ? 0.0f : 1.0f);
      sums.loss += s.loss;
      sums.nonfinite += s.nonfinite;
    }
  }
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  SEXTANT_RETURN_IF_ERROR(SumGradients());
  ++pos_.step_in_epoch;
  ++pos_.global_step;
  if (sums.nonfinite > 0 || !std::isfinite(sums.loss)) {
    if (++pos_.bad_streak >= o_.nan_patience) {
      return absl::InternalError(
          absl::StrCat("diverged: the training loss was NaN or infinite for ", pos_.bad_streak,
                       " consecutive steps (nan_patience=", o_.nan_patience, "), last at epoch ",
                       pos_.epoch + 1, " step ", pos_.step_in_epoch));
    }
    return absl::OkStatus();  // the update is skipped
  }
  pos_.bad_streak = 0;
  for (size_t k = 0; k < replica_count(); ++k) {
    At(k).opt->Step(At(k).model->parameters(), At(k).model->gradients());
  }
  pos_.epoch_loss += sums.loss;
  pos_.epoch_examples += rows;
  return absl::OkStatus();
}

absl::StatusOr<EpochMetrics> TrainLoop::Evaluate() {
  LossSums sums;
  for (int64_t off = 0; off < val_.size(); off += micro_) {
    const int64_t r = std::min(micro_, val_.size() - off);
    std::vector<int64_t> idx(r);
    for (int64_t i = 0; i < r; ++i) idx[i] = off + i;
    Stage(main_, val_, main_.val_x, idx.data(), r);
    Tensor logits = model_->Forward(r, /*training=*/false, 0, 0);
    LossSums s = backend_->SoftmaxCrossEntropy(logits, {labels_.view().data, r}, 0, Tensor{});
    sums.loss += s.loss;
    sums.correct += s.correct;
    sums.nonfinite += s.nonfinite;
  }
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  EpochMetrics m;
  m.epoch = static_cast<int>(pos_.epoch + 1);
  const double n = static_cast<double>(val_.size());
  m.val_loss = sums.nonfinite > 0 ? std::nan("") : sums.loss / n;
  m.val_accuracy = static_cast<double>(sums.correct) / n;
  m.train_loss = pos_.epoch_examples > 0
                     ? pos_.epoch_loss / static_cast<double>(pos_.epoch_examples)
                     : std::nan("");
  return m;
}

std::string TrainLoop::Fingerprint() const {
  const ModelSpec& s = o_.model;
  const OptimizerOptions& p = o_.optimizer;
  return absl::StrCat(s.kind, " ", s.channels, "x", s.height, "x", s.width, " classes=", s.classes,
                      " hidden=", absl::StrJoin(s.hidden, ","), " dropout=", s.dropout,
                      " conv=", absl::StrJoin(s.conv_channels, ","), " kernel=", s.kernel,
                      " optimizer=", p.kind, " lr=", p.lr, " momentum=", p.momentum,
                      " wd=", p.weight_decay, " batch=", o_.batch_size, " seed=", o_.seed,
                      " train=", train_.size());
}

std::vector<std::vector<float>> TrainLoop::DownloadParameters() {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : model_->parameters()) {
    out.emplace_back(t.size());
    backend_->Download(t, out.back().data());
  }
  return out;
}

// Payload: magic, fingerprint, position, parameters, optimiser state. The random state is
// (seed, global_step, epoch): every draw is a counter-based function of those.
absl::Status TrainLoop::SaveCheckpoint() {
  if (o_.checkpoint_dir.empty()) return absl::OkStatus();
  if (last_saved_ == std::make_pair(pos_.global_step, pos_.epoch)) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  ByteWriter w;
  w.Bytes(kPayloadMagic);
  w.Bytes(Fingerprint());
  w.I64(pos_.epoch);
  w.I64(pos_.step_in_epoch);
  w.I64(pos_.global_step);
  w.I64(pos_.bad_streak);
  w.F64(pos_.epoch_loss);
  w.I64(pos_.epoch_examples);
  for (const auto& p : DownloadParameters()) w.Floats(p.data(), static_cast<int64_t>(p.size()));
  opt_->Save(w);
  SEXTANT_RETURN_IF_ERROR(WriteCheckpoint(o_.checkpoint_dir, pos_.global_step, w.str()).status());
  last_saved_ = {pos_.global_step, pos_.epoch};
  return absl::OkStatus();
}

absl::Status TrainLoop::Resume() {
  absl::StatusOr<Checkpoint> ckpt = LoadLatestCheckpoint(o_.checkpoint_dir);
  if (absl::IsNotFound(ckpt.status())) return absl::OkStatus();
  if (!ckpt.ok()) return ckpt.status();
  for (const std::string& why : ckpt->skipped) Emit({"checkpoint_skipped", micro_, why});
  ByteReader r(ckpt->payload);
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("checkpoint ", ckpt->path, ": ", what));
  };
  SEXTANT_ASSIGN_OR_RETURN(std::string magic, r.Bytes());
  if (magic != kPayloadMagic) return bad("not a trainer checkpoint");
  SEXTANT_ASSIGN_OR_RETURN(std::string fingerprint, r.Bytes());
  if (fingerprint != Fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", ckpt->path, " was written for a different configuration (", fingerprint,
        "); this run is (", Fingerprint(), "): use another checkpoint directory"));
  }
  Position p;
  SEXTANT_ASSIGN_OR_RETURN(p.epoch, r.I64());
  SEXTANT_ASSIGN_OR_RETURN(p.step_in_epoch, r.I64());
  SEXTANT_ASSIGN_OR_RETURN(p.global_step, r.I64());
  SEXTANT_ASSIGN_OR_RETURN(p.bad_streak, r.I64());
  SEXTANT_ASSIGN_OR_RETURN(p.epoch_loss, r.F64());
  SEXTANT_ASSIGN_OR_RETURN(p.epoch_examples, r.I64());
  if (p.epoch < 0 || p.step_in_epoch < 0 || p.step_in_epoch > StepsPerEpoch()) {
    return bad("position out of range");
  }
  std::vector<float> host;
  for (const Tensor& t : model_->parameters()) {
    host.resize(t.size());
    SEXTANT_RETURN_IF_ERROR(r.Floats(host.data(), t.size()));
    backend_->Upload(host.data(), t);
  }
  SEXTANT_RETURN_IF_ERROR(opt_->Load(r));
  if (!r.done()) return bad("trailing bytes");
  pos_ = p;
  last_saved_ = {p.global_step, p.epoch};
  result_.resumed_from_step = p.global_step;
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> TrainLoop::Run() {
  SEXTANT_RETURN_IF_ERROR(Setup());
  auto finish = [&](TrainResult::Outcome outcome) -> absl::StatusOr<TrainResult> {
    SEXTANT_RETURN_IF_ERROR(SaveCheckpoint());
    result_.outcome = outcome;
    result_.epochs_completed = static_cast<int>(pos_.epoch);
    result_.steps = pos_.global_step;
    result_.micro_batch = micro_;
    result_.parameters = DownloadParameters();
    return std::move(result_);
  };
  for (; pos_.epoch < o_.epochs; ++pos_.epoch) {
    const std::vector<int64_t> perm = Permutation(pos_.epoch);
    absl::Duration busy;
    int64_t trained = 0;
    while (pos_.step_in_epoch < StepsPerEpoch()) {
      if (o_.stop != nullptr && o_.stop->load()) return finish(TrainResult::Outcome::kPreempted);
      if (o_.max_steps > 0 && pos_.global_step >= o_.max_steps) {
        return finish(TrainResult::Outcome::kStepLimit);
      }
      const absl::Time t0 = clock_->Now();
      trained += std::min(o_.batch_size, train_.size() - pos_.step_in_epoch * o_.batch_size);
      absl::Status s = RunStep(perm);
      while (absl::IsResourceExhausted(s)) {
        SEXTANT_RETURN_IF_ERROR(HalveAfter(s));
        s = RunStep(perm);
      }
      SEXTANT_RETURN_IF_ERROR(s);
      busy += clock_->Now() - t0;
      if (o_.on_step) o_.on_step(pos_.global_step);
      if (o_.checkpoint_every_steps > 0 && pos_.global_step % o_.checkpoint_every_steps == 0) {
        SEXTANT_RETURN_IF_ERROR(SaveCheckpoint());
      }
    }
    SEXTANT_ASSIGN_OR_RETURN(EpochMetrics m, Evaluate());
    const double seconds = absl::ToDoubleSeconds(busy);
    m.samples_per_sec = seconds > 0 ? static_cast<double>(trained) / seconds : 0;
    if (o_.on_epoch) o_.on_epoch(m);
    result_.epochs.push_back(m);
    pos_.step_in_epoch = 0;
    pos_.epoch_loss = 0;
    pos_.epoch_examples = 0;
    ++pos_.epoch;
    SEXTANT_RETURN_IF_ERROR(SaveCheckpoint());
    --pos_.epoch;  // the for loop's increment
  }
  return finish(TrainResult::Outcome::kCompleted);
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainerOptions& options, const Dataset& train,
                                  const Dataset& validation, Backend* backend) {
  TrainLoop loop(options, train, validation, backend);
  return loop.Run();
}

}  // namespace sextant::train
