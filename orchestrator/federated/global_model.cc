#include "orchestrator/federated/global_model.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tensors/dtype.h"
#include "tensors/safetensors.h"

namespace sextant {

absl::Status GlobalModel::Allocate(size_t n) {
  if (n >= kFileBackedFloats) {
    SEXTANT_ASSIGN_OR_RETURN(MappedFloats file, MappedFloats::Create(dir_ + "/global.f32", n));
    file_.emplace(std::move(file));
    values_ = file_->span();
  } else {
    memory_.assign(n, 0.0f);
    values_ = absl::MakeSpan(memory_);
  }
  return absl::OkStatus();
}

absl::Status GlobalModel::Adopt(const std::vector<float>& initial, TensorFile layout) {
  SEXTANT_RETURN_IF_ERROR(Allocate(initial.size()));
  std::copy(initial.begin(), initial.end(), values_.begin());
  Release();
  layout_ = std::move(layout);
  return absl::OkStatus();
}

absl::Status GlobalModel::LoadOwn(const v1::Federation& f) {
  SEXTANT_ASSIGN_OR_RETURN(TensorFile model, ReadSafetensorsLayout(f.model_file()));
  bool same = model.tensors.size() == static_cast<size_t>(f.model_layout_size());
  for (size_t i = 0; same && i < model.tensors.size(); ++i) {
    const Tensor& t = model.tensors[i];
    const v1::TensorLayout& l = f.model_layout(static_cast<int>(i));
    same = t.name == l.name() && DTypeName(t.dtype) == l.dtype() &&
           std::equal(t.shape.begin(), t.shape.end(), l.shape().begin(), l.shape().end());
  }
  if (!same) {
    return absl::FailedPreconditionError(
        absl::StrCat(f.model_file(), ": its tensors changed since the experiment was loaded"));
  }
  SEXTANT_ASSIGN_OR_RETURN(const int64_t elements, LayoutElements(model));
  SEXTANT_RETURN_IF_ERROR(Allocate(static_cast<size_t>(elements)));
  SEXTANT_RETURN_IF_ERROR(ReadSafetensorsToF32(f.model_file(), model, values_));
  Release();
  layout_ = std::move(model);
  return absl::OkStatus();
}

void GlobalModel::Release() {
  if (file_) file_->Release();
}

void GlobalModel::Release(size_t at, size_t n) {
  if (file_) file_->Release(at, n);
}

absl::Status GlobalModel::WriteSafetensors(const std::string& path) {
  const absl::Status s = WriteSafetensorsFromF32(path, layout_, values_);
  Release();
  return s;
}

absl::StatusOr<std::string> GlobalModel::WriteTo(const std::string& model_dir,
                                                 const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(model_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", model_dir, ": ", ec.message()));
  const std::string path =
      std::filesystem::absolute(absl::StrCat(model_dir, "/", name)).lexically_normal().string();
  SEXTANT_RETURN_IF_ERROR(WriteSafetensors(path));
  return path;
}

namespace {
// A model in a mapped file (from kFileBackedFloats values on) takes the server step
// kStepRangeFloats (16 MB) at a time.
constexpr size_t kStepRangeFloats = size_t{1} << 22;
}  // namespace

absl::Status StepGlobalModel(GlobalModel& model, ServerOptimizer& optimizer,
                             absl::Span<const float> mean, double total_weight,
                             PrivacyBudget* privacy) {
  const bool central_noise = privacy != nullptr && privacy->central_noise();
  std::vector<float> noisy;
  if (central_noise) {
    noisy.assign(mean.begin(), mean.end());
    SEXTANT_RETURN_IF_ERROR(privacy->AddCentralNoise(absl::MakeSpan(noisy), total_weight));
  }
  return optimizer.Step(model.values(), central_noise ? absl::MakeConstSpan(noisy) : mean,
                        kStepRangeFloats, [&](size_t at, size_t n) { model.Release(at, n); });
}

}  // namespace sextant
