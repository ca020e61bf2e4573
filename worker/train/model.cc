#include "worker/train/model.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/train/counter_rng.h"

namespace sextant::train {

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.size();
  return n;
}

absl::Status ValidateModelSpec(const ModelSpec& s) {
  if (s.kind != "mlp" && s.kind != "cnn") {
    return absl::InvalidArgumentError(
        absl::StrCat("model: unknown kind '", s.kind, "' (expected mlp or cnn)"));
  }
  if (s.channels < 1 || s.height < 1 || s.width < 1) {
    return absl::InvalidArgumentError("model: input shape must be at least 1x1x1");
  }
  if (s.classes < 2) return absl::InvalidArgumentError("model: classes must be >= 2");
  for (int h : s.hidden) {
    if (h < 1) return absl::InvalidArgumentError(absl::StrCat("hidden: width ", h, " is < 1"));
  }
  if (!(s.dropout >= 0 && s.dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("dropout: ", s.dropout, " is not in [0, 1)"));
  }
  if (s.kind == "cnn") {
    if (s.conv_channels.size() != 2 || s.conv_channels[0] < 1 || s.conv_channels[1] < 1) {
      return absl::InvalidArgumentError("conv_channels: need two widths >= 1");
    }
    if (s.kernel < 1 || s.kernel % 2 == 0) {
      return absl::InvalidArgumentError(absl::StrCat("kernel: ", s.kernel, " is not odd"));
    }
    if (s.height < 4 || s.width < 4) {
      return absl::InvalidArgumentError("model: cnn needs images of at least 4x4 (two 2x2 pools)");
    }
  }
  return absl::OkStatus();
}

namespace {

struct Param {
  Buffer w, b, dw, db;
};

struct ConvStage {
  int64_t h = 0, w = 0, in_c = 0, out_c = 0;
  Param p;
  Buffer cols, z, dz, dcols, pooled, dpooled;
  IntBuffer argmax;
  int64_t patch(int k) const { return int64_t{k} * k * in_c; }
  int64_t pooled_width() const { return (h / 2) * (w / 2) * out_c; }
};

struct DenseLayer {
  int64_t in = 0, out = 0;
  Param p;
  Buffer y, mask, dy;
};

// One class serves both kinds: an MLP is a CNN without convolution stages.
class LayeredModel : public Model {
 public:
  LayeredModel(const ModelSpec& spec, Backend* backend) : spec_(spec), backend_(backend) {}

  absl::Status Build(uint64_t seed);

  const std::vector<Tensor>& parameters() const override { return params_; }
  const std::vector<Tensor>& gradients() const override { return grads_; }
  int64_t ActivationBytes(int64_t rows) const override;
  absl::Status Reserve(int64_t rows) override;
  int64_t reserved_rows() const override { return reserved_; }
  Tensor input() override { return input_.view(); }
  Tensor Forward(int64_t rows, bool training, uint64_t dropout_seed, int64_t row_offset) override;
  void Backward(const Tensor& dlogits, float beta) override;

 private:
  absl::StatusOr<Param> NewParam(int64_t in, int64_t out, int64_t fan_in, bool relu, uint64_t key);
  // Calls f(rows_needed_per_example_in_floats) for each activation buffer (ints counted alike).
  template <typename F>
  void ForEachActivation(F&& f) const;

  ModelSpec spec_;
  Backend* backend_;
  std::vector<ConvStage> convs_;
  std::vector<DenseLayer> dense_;
  std::vector<Tensor> params_, grads_;
  Buffer input_;
  int64_t reserved_ = 0, rows_ = 0;
  bool dropped_ = false;
};

absl::StatusOr<Param> LayeredModel::NewParam(int64_t in, int64_t out, int64_t fan_in, bool relu,
                                             uint64_t key) {
  Param p;
  SEXTANT_ASSIGN_OR_RETURN(p.w, backend_->Allocate(in, out));
  SEXTANT_ASSIGN_OR_RETURN(p.b, backend_->Allocate(1, out));
  SEXTANT_ASSIGN_OR_RETURN(p.dw, backend_->Allocate(in, out));
  SEXTANT_ASSIGN_OR_RETURN(p.db, backend_->Allocate(1, out));
  std::vector<float> host(in * out);
  if (relu) {  // He normal, by Box-Muller
    const double sd = std::sqrt(2.0 / static_cast<double>(fan_in));
    for (int64_t i = 0; i < in * out; ++i) {
      const double u1 = UniformOpenDouble(key, 2 * i), u2 = UniformOpenDouble(key, 2 * i + 1);
      host[i] = static_cast<float>(sd * std::sqrt(-2.0 * std::log(u1)) *
                                   std::cos(6.283185307179586 * u2));
    }
  } else {  // Glorot uniform
    const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + out));
    for (int64_t i = 0; i < in * out; ++i) {
      host[i] = static_cast<float>((2.0 * UniformOpenDouble(key, i) - 1.0) * limit);
    }
  }
  backend_->Upload(host.data(), p.w.view());
  params_.push_back(p.w.view());
  params_.push_back(p.b.view());
  grads_.push_back(p.dw.view());
  grads_.push_back(p.db.view());
  return p;
}

absl::Status LayeredModel::Build(uint64_t seed) {
  int64_t layer = 0, width = spec_.inputs();
  if (spec_.kind == "cnn") {
    int64_t h = spec_.height, w = spec_.width, c = spec_.channels;
    for (int out_c : spec_.conv_channels) {
      ConvStage s;
      s.h = h;
      s.w = w;
      s.in_c = c;
      s.out_c = out_c;
      SEXTANT_ASSIGN_OR_RETURN(s.p, NewParam(s.patch(spec_.kernel), out_c, s.patch(spec_.kernel),
                                             true, StreamKey(seed, layer++, 1)));
      h /= 2;
      w /= 2;
      c = out_c;
      convs_.push_back(std::move(s));
    }
    width = h * w * c;
  }
  std::vector<int64_t> sizes(spec_.hidden.begin(), spec_.hidden.end());
  sizes.push_back(spec_.classes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    DenseLayer d;
    d.in = width;
    d.out = sizes[i];
    const bool relu = i + 1 < sizes.size();
    SEXTANT_ASSIGN_OR_RETURN(d.p, NewParam(d.in, d.out, d.in, relu, StreamKey(seed, layer++, 1)));
    width = d.out;
    dense_.push_back(std::move(d));
  }
  return absl::OkStatus();
}

template <typename F>
void LayeredModel::ForEachActivation(F&& f) const {
  f(spec_.inputs());
  for (size_t s = 0; s < convs_.size(); ++s) {
    const ConvStage& c = convs_[s];
    const int64_t pixels = c.h * c.w;
    f(pixels * c.patch(spec_.kernel));             // cols
    if (s > 0) f(pixels * c.patch(spec_.kernel));  // dcols
    f(pixels * c.out_c);                           // z
    f(pixels * c.out_c);                           // dz
    f(c.pooled_width());                           // pooled
    f(c.pooled_width());                           // dpooled
    f(c.pooled_width());                           // argmax (int32)
  }
  for (size_t i = 0; i < dense_.size(); ++i) {
    f(dense_[i].out);                                                  // y
    if (i + 1 < dense_.size()) f(dense_[i].out);                       // dy
    if (i + 1 < dense_.size() && spec_.dropout > 0) f(dense_[i].out);  // mask
  }
}

int64_t LayeredModel::ActivationBytes(int64_t rows) const {
  int64_t floats = 0;
  ForEachActivation([&](int64_t per_row) { floats += per_row; });
  return floats * rows * static_cast<int64_t>(sizeof(float));
}

absl::Status LayeredModel::Reserve(int64_t rows) {
  // Release first, so that a smaller retry after ResourceExhausted has the memory back.
  reserved_ = 0;
  input_ = Buffer();
  for (ConvStage& c : convs_) {
    for (Buffer* b : {&c.cols, &c.dcols, &c.z, &c.dz, &c.pooled, &c.dpooled}) *b = Buffer();
    c.argmax = IntBuffer();
  }
  for (DenseLayer& d : dense_) {
    for (Buffer* b : {&d.y, &d.mask, &d.dy}) *b = Buffer();
  }

  SEXTANT_ASSIGN_OR_RETURN(input_, backend_->Allocate(rows, spec_.inputs()));
  for (size_t s = 0; s < convs_.size(); ++s) {
    ConvStage& c = convs_[s];
    const int64_t pixels = rows * c.h * c.w;
    SEXTANT_ASSIGN_OR_RETURN(c.cols, backend_->Allocate(pixels, c.patch(spec_.kernel)));
    if (s > 0) {
      SEXTANT_ASSIGN_OR_RETURN(c.dcols, backend_->Allocate(pixels, c.patch(spec_.kernel)));
    }
    SEXTANT_ASSIGN_OR_RETURN(c.z, backend_->Allocate(pixels, c.out_c));
    SEXTANT_ASSIGN_OR_RETURN(c.dz, backend_->Allocate(pixels, c.out_c));
    SEXTANT_ASSIGN_OR_RETURN(c.pooled, backend_->Allocate(rows, c.pooled_width()));
    SEXTANT_ASSIGN_OR_RETURN(c.dpooled, backend_->Allocate(rows, c.pooled_width()));
    SEXTANT_ASSIGN_OR_RETURN(c.argmax, backend_->AllocateInts(rows * c.pooled_width()));
  }
  for (size_t i = 0; i < dense_.size(); ++i) {
    DenseLayer& d = dense_[i];
    SEXTANT_ASSIGN_OR_RETURN(d.y, backend_->Allocate(rows, d.out));
    if (i + 1 < dense_.size()) {
      SEXTANT_ASSIGN_OR_RETURN(d.dy, backend_->Allocate(rows, d.out));
      if (spec_.dropout > 0) {
        SEXTANT_ASSIGN_OR_RETURN(d.mask, backend_->Allocate(rows, d.out));
      }
    }
  }
  reserved_ = rows;
  return absl::OkStatus();
}

Tensor LayeredModel::Forward(int64_t rows, bool training, uint64_t dropout_seed,
                             int64_t row_offset) {
  rows_ = rows;
  dropped_ = training && spec_.dropout > 0;
  Tensor cur = input_.view().RowBlock(0, rows);
  for (ConvStage& c : convs_) {
    const ImageShape shape{rows, c.h, c.w, c.in_c};
    const int64_t pixels = rows * c.h * c.w;
    Tensor cols = c.cols.view().RowBlock(0, pixels);
    Tensor z = c.z.view().RowBlock(0, pixels);
    backend_->Im2Col(cur, shape, spec_.kernel, cols);
    backend_->Gemm(Transpose::kNo, Transpose::kNo, 1, cols, c.p.w.view(), 0, z);
    backend_->AddBias(z, c.p.b.view(), /*relu=*/true);
    Tensor pooled = c.pooled.view().RowBlock(0, rows);
    IntTensor argmax{c.argmax.view().data, rows * c.pooled_width()};
    backend_->MaxPool(z.Reshaped(rows, c.h * c.w * c.out_c), {rows, c.h, c.w, c.out_c}, pooled,
                      argmax);
    cur = pooled;
  }
  for (size_t i = 0; i < dense_.size(); ++i) {
    DenseLayer& d = dense_[i];
    Tensor y = d.y.view().RowBlock(0, rows);
    const bool hidden = i + 1 < dense_.size();
    backend_->Gemm(Transpose::kNo, Transpose::kNo, 1, cur, d.p.w.view(), 0, y);
    backend_->AddBias(y, d.p.b.view(), /*relu=*/hidden);
    if (hidden && dropped_) {
      backend_->Dropout(y, d.mask.view().RowBlock(0, rows), spec_.dropout,
                        StreamKey(dropout_seed, i, 0), row_offset);
    }
    cur = y;
  }
  return cur;
}

void LayeredModel::Backward(const Tensor& dlogits, float beta) {
  const int64_t rows = rows_;
  Tensor d = dlogits;
  for (size_t i = dense_.size(); i-- > 0;) {
    DenseLayer& layer = dense_[i];
    Tensor in = i > 0             ? dense_[i - 1].y.view().RowBlock(0, rows)
                : !convs_.empty() ? convs_.back().pooled.view().RowBlock(0, rows)
                                  : input_.view().RowBlock(0, rows);
    backend_->Gemm(Transpose::kYes, Transpose::kNo, 1, in, d, beta, layer.p.dw.view());
    backend_->ColumnSum(d, beta, layer.p.db.view());
    if (i == 0 && convs_.empty()) return;
    Tensor din = i > 0 ? dense_[i - 1].dy.view().RowBlock(0, rows)
                       : convs_.back().dpooled.view().RowBlock(0, rows);
    backend_->Gemm(Transpose::kNo, Transpose::kYes, 1, d, layer.p.w.view(), 0, din);
    if (i > 0) {
      if (dropped_) backend_->Multiply(dense_[i - 1].mask.view().RowBlock(0, rows), din);
      backend_->ReluBackward(in, din);
    }
    d = din;
  }
  for (size_t s = convs_.size(); s-- > 0;) {
    ConvStage& c = convs_[s];
    const int64_t pixels = rows * c.h * c.w;
    Tensor dz = c.dz.view().RowBlock(0, pixels);
    Tensor z = c.z.view().RowBlock(0, pixels);
    IntTensor argmax{c.argmax.view().data, rows * c.pooled_width()};
    backend_->MaxPoolBackward(d, argmax, dz.Reshaped(rows, c.h * c.w * c.out_c));
    backend_->ReluBackward(z, dz);
    Tensor cols = c.cols.view().RowBlock(0, pixels);
    backend_->Gemm(Transpose::kYes, Transpose::kNo, 1, cols, dz, beta, c.p.dw.view());
    backend_->ColumnSum(dz, beta, c.p.db.view());
    if (s == 0) return;
    Tensor dcols = c.dcols.view().RowBlock(0, pixels);
    backend_->Gemm(Transpose::kNo, Transpose::kYes, 1, dz, c.p.w.view(), 0, dcols);
    Tensor dprev = convs_[s - 1].dpooled.view().RowBlock(0, rows);
    backend_->Col2Im(dcols, {rows, c.h, c.w, c.in_c}, spec_.kernel, dprev);
    d = dprev;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> NewModel(const ModelSpec& spec, Backend* backend,
                                                uint64_t seed) {
  SEXTANT_RETURN_IF_ERROR(ValidateModelSpec(spec));
  auto model = std::make_unique<LayeredModel>(spec, backend);
  SEXTANT_RETURN_IF_ERROR(model->Build(seed));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace sextant::train
