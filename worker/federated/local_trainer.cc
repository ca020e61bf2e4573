#include "worker/federated/local_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "federation/fedprox.h"
#include "worker/train/cpu_backend.h"

namespace sextant {

absl::StatusOr<std::unique_ptr<LocalTrainer>> LocalTrainer::Create(const train::ModelSpec& spec,
                                                                   uint64_t seed, int threads) {
  std::unique_ptr<LocalTrainer> t(new LocalTrainer());
  t->spec_ = spec;
  train::CpuBackendOptions o;
  o.threads = threads;
  t->backend_ = train::NewCpuBackend(o);
  SEXTANT_ASSIGN_OR_RETURN(t->model_, train::NewModel(spec, t->backend_.get(), seed));
  t->size_ = t->model_->parameter_count();
  return t;
}

absl::Status LocalTrainer::GetWeights(absl::Span<float> out) {
  if (static_cast<int64_t>(out.size()) != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: ", out.size(), " values, the model has ", size_));
  }
  int64_t off = 0;
  for (const train::Tensor& p : model_->parameters()) {
    backend_->Download(p, out.data() + off);
    off += p.size();
  }
  return backend_->Synchronize();
}

absl::Status LocalTrainer::SetWeights(absl::Span<const float> weights) {
  if (static_cast<int64_t>(weights.size()) != size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: ", weights.size(), " values, the model has ", size_));
  }
  int64_t off = 0;
  for (const train::Tensor& p : model_->parameters()) {
    backend_->Upload(weights.data() + off, p);
    off += p.size();
  }
  return backend_->Synchronize();
}

absl::Status LocalTrainer::Reserve(int64_t rows) {
  if (rows <= reserved_) return absl::OkStatus();
  dlogits_ = train::Buffer();
  labels_ = train::IntBuffer();
  SEXTANT_RETURN_IF_ERROR(model_->Reserve(rows));
  SEXTANT_ASSIGN_OR_RETURN(dlogits_, backend_->Allocate(rows, spec_.classes));
  SEXTANT_ASSIGN_OR_RETURN(labels_, backend_->AllocateInts(rows));
  host_x_.resize(rows * spec_.inputs());
  host_y_.resize(rows);
  reserved_ = rows;
  return absl::OkStatus();
}

void LocalTrainer::Stage(const train::Dataset& d, const int64_t* rows, int64_t count) {
  const int64_t width = spec_.inputs();
  for (int64_t r = 0; r < count; ++r) {
    std::memcpy(host_x_.data() + r * width, d.x.row(rows[r]).data(), width * sizeof(float));
    host_y_[r] = d.y[rows[r]];
  }
  backend_->Upload(host_x_.data(), model_->input().RowBlock(0, count));
  backend_->UploadInts(host_y_.data(), {labels_.view().data, count});
}

absl::StatusOr<double> LocalTrainer::Train(const train::Dataset& data,
                                           const LocalTrainingOptions& o,
                                           absl::Span<const float> global) {
  if (o.epochs < 1 || o.batch_size < 1 || !(o.lr > 0) || !(o.proximal_mu >= 0)) {
    return absl::InvalidArgumentError("local training: epochs, batch_size and lr must be positive");
  }
  if (data.size() == 0 || data.x.cols() != spec_.inputs()) {
    return absl::InvalidArgumentError("local training: no data, or data of another shape");
  }
  if (o.proximal_mu > 0 && static_cast<int64_t>(global.size()) != size_) {
    return absl::InvalidArgumentError("local training: FedProx needs the global weights");
  }
  SEXTANT_RETURN_IF_ERROR(Reserve(std::min(o.batch_size, data.size())));
  std::vector<int64_t> perm(data.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(o.seed);
  std::vector<float> w, g;
  double loss_sum = 0;
  int64_t seen = 0;
  int64_t step = 0;
  for (int e = 0; e < o.epochs; ++e) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t begin = 0; begin < data.size(); begin += o.batch_size, ++step) {
      if (o.stop != nullptr && o.stop->load()) {
        return absl::CancelledError(absl::StrCat("local training stopped at step ", step));
      }
      const int64_t rows = std::min(o.batch_size, data.size() - begin);
      Stage(data, perm.data() + begin, rows);
      train::Tensor logits = model_->Forward(rows, true, o.seed * 1000003 + step, 0);
      train::Tensor dl = dlogits_.view().RowBlock(0, rows);
      train::LossSums s = backend_->SoftmaxCrossEntropy(logits, {labels_.view().data, rows},
                                                        1.0f / static_cast<float>(rows), dl);
      model_->Backward(dl, 0.0f);
      if (s.nonfinite > 0) continue;  // skip a bad step, as the trainer does
      loss_sum += s.loss;
      seen += rows;
      int64_t off = 0;
      const auto& params = model_->parameters();
      const auto& grads = model_->gradients();
      for (size_t i = 0; i < params.size(); ++i) {
        if (o.proximal_mu > 0) {
          w.resize(params[i].size());
          g.resize(params[i].size());
          backend_->Download(params[i], w.data());
          backend_->Download(grads[i], g.data());
          SEXTANT_RETURN_IF_ERROR(AddProximalGradient(
              absl::MakeSpan(g), w, global.subspan(off, params[i].size()), o.proximal_mu));
          backend_->Upload(g.data(), grads[i]);
        }
        off += params[i].size();
        // Plain SGD: no momentum, so that nothing carries over between rounds.
        backend_->SgdStep(params[i], grads[i], grads[i], {o.lr, 0.0f, 0.0f});
      }
    }
  }
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  return seen > 0 ? loss_sum / static_cast<double>(seen) : std::nan("");
}

absl::StatusOr<EvalResult> LocalTrainer::Evaluate(const train::Dataset& data) {
  EvalResult r;
  if (data.size() == 0) return r;
  const int64_t micro = 512;
  SEXTANT_RETURN_IF_ERROR(Reserve(std::min<int64_t>(micro, data.size())));
  std::vector<int64_t> idx;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t off = 0; off < data.size(); off += reserved_) {
    const int64_t rows = std::min(reserved_, data.size() - off);
    idx.resize(rows);
    std::iota(idx.begin(), idx.end(), off);
    Stage(data, idx.data(), rows);
    train::Tensor logits = model_->Forward(rows, false, 0, 0);
    train::LossSums s =
        backend_->SoftmaxCrossEntropy(logits, {labels_.view().data, rows}, 0, train::Tensor{});
    loss += s.loss;
    correct += s.correct;
  }
  SEXTANT_RETURN_IF_ERROR(backend_->Synchronize());
  r.examples = data.size();
  r.loss = loss / static_cast<double>(data.size());
  r.accuracy = static_cast<double>(correct) / static_cast<double>(data.size());
  return r;
}

}  // namespace sextant
