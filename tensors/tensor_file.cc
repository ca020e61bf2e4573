#include "tensors/tensor_file.h"

#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

absl::Status Bad(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\"", what));
}

// The element count of a tensor whose data must match it.
absl::StatusOr<int64_t> CheckedCount(const Tensor& t) {
  const std::optional<int64_t> n = NumElements(t.shape);
  if (!n) return Bad(t.name, absl::StrCat(": invalid shape ", ShapeText(t.shape)));
  if (static_cast<int64_t>(t.data.size()) != *n * DTypeSize(t.dtype)) {
    return Bad(t.name,
               absl::StrCat(": ", t.data.size(), " bytes of data where ", DTypeName(t.dtype), " ",
                            ShapeText(t.shape), " needs ", *n * DTypeSize(t.dtype)));
  }
  return *n;
}

// Name -> index; the first duplicate name, if any, in `duplicate`.
absl::flat_hash_map<absl::string_view, size_t> IndexByName(const TensorFile& file,
                                                           absl::string_view* duplicate) {
  absl::flat_hash_map<absl::string_view, size_t> index;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    if (!index.emplace(file.tensors[i].name, i).second && duplicate->empty()) {
      *duplicate = file.tensors[i].name;
    }
  }
  return index;
}

}  // namespace

std::optional<int64_t> NumElements(absl::Span<const int64_t> shape) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMax / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::StatusOr<std::vector<float>> Tensor::ToF32() const {
  absl::StatusOr<int64_t> n = CheckedCount(*this);
  if (!n.ok()) return n.status();
  std::vector<float> out(static_cast<size_t>(*n));
  absl::Status s = DecodeToF32(dtype, data, absl::MakeSpan(out));
  if (!s.ok()) return Bad(name, absl::StrCat(": ", s.message()));
  return out;
}

absl::Status Tensor::SetFromF32(absl::Span<const float> values) {
  const std::optional<int64_t> n = NumElements(shape);
  if (!n) return Bad(name, absl::StrCat(": invalid shape ", ShapeText(shape)));
  if (static_cast<int64_t>(values.size()) != *n) {
    return Bad(name, absl::StrCat(": ", values.size(), " values for shape ", ShapeText(shape), " (",
                                  *n, " elements)"));
  }
  std::string bytes(values.size() * DTypeSize(dtype), '\0');
  absl::Status s = EncodeFromF32(dtype, values, absl::MakeSpan(bytes));
  if (!s.ok()) return Bad(name, absl::StrCat(": ", s.message()));
  data = std::move(bytes);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LayoutElements(const TensorFile& layout) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
  int64_t total = 0;
  for (const Tensor& t : layout.tensors) {
    const std::optional<int64_t> n = NumElements(t.shape);
    if (!n) return Bad(t.name, absl::StrCat(": invalid shape ", ShapeText(t.shape)));
    if (*n > kMax - total) {
      return absl::InvalidArgumentError("the model's element count overflows");
    }
    total += *n;
  }
  return total;
}

absl::StatusOr<std::vector<float>> FlattenToF32(const TensorFile& model) {
  SEXTANT_ASSIGN_OR_RETURN(const int64_t total, LayoutElements(model));
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(total));
  for (const Tensor& t : model.tensors) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t n, CheckedCount(t));
    const size_t at = flat.size();
    flat.resize(at + static_cast<size_t>(n));
    absl::Status s = DecodeToF32(t.dtype, t.data, absl::MakeSpan(flat).subspan(at));
    if (!s.ok()) return Bad(t.name, absl::StrCat(": ", s.message()));
  }
  return flat;
}

absl::StatusOr<TensorFile> UnflattenFromF32(const TensorFile& layout,
                                            absl::Span<const float> flat) {
  SEXTANT_ASSIGN_OR_RETURN(const int64_t total, LayoutElements(layout));
  if (static_cast<int64_t>(flat.size()) != total) {
    return absl::InvalidArgumentError(absl::StrCat(flat.size(), " values for a model of ", total));
  }
  TensorFile out;
  out.metadata = layout.metadata;
  out.tensors.reserve(layout.tensors.size());
  size_t at = 0;
  for (const Tensor& l : layout.tensors) {
    Tensor t{l.name, l.dtype, l.shape, {}};
    const size_t n = static_cast<size_t>(*NumElements(t.shape));
    SEXTANT_RETURN_IF_ERROR(t.SetFromF32(flat.subspan(at, n)));
    at += n;
    out.tensors.push_back(std::move(t));
  }
  return out;
}

const Tensor* TensorFile::Find(absl::string_view name) const {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::Status CheckSameLayout(const TensorFile& model, const TensorFile& reference,
                             absl::string_view reference_name) {
  absl::string_view duplicate;
  const auto model_index = IndexByName(model, &duplicate);
  if (!duplicate.empty()) return Bad(duplicate, " appears twice");
  const auto ref_index = IndexByName(reference, &duplicate);
  if (!duplicate.empty()) return Bad(duplicate, absl::StrCat(" appears twice in ", reference_name));
  for (const Tensor& t : model.tensors) {
    auto it = ref_index.find(t.name);
    if (it == ref_index.end()) {
      // A reference tensor this model lacks is likely the same one under another name.
      for (const Tensor& r : reference.tensors) {
        if (!model_index.contains(r.name)) {
          return Bad(t.name, absl::StrCat(" is not in ", reference_name, " (renamed from \"",
                                          r.name, "\"?)"));
        }
      }
      return Bad(t.name, absl::StrCat(" is not in ", reference_name));
    }
    const Tensor& r = reference.tensors[it->second];
    if (t.dtype != r.dtype) {
      return Bad(t.name, absl::StrCat(": dtype ", DTypeName(t.dtype), " where ", reference_name,
                                      " has ", DTypeName(r.dtype)));
    }
    if (t.shape != r.shape) {
      return Bad(t.name, absl::StrCat(": shape ", ShapeText(t.shape), " where ", reference_name,
                                      " has ", ShapeText(r.shape)));
    }
  }
  for (const Tensor& r : reference.tensors) {
    if (!model_index.contains(r.name)) {
      return Bad(r.name, absl::StrCat(" of ", reference_name, " is missing"));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> LayoutSegments(const TensorFile& layout) {
  std::vector<int64_t> segments;
  segments.reserve(layout.tensors.size());
  for (const Tensor& t : layout.tensors) segments.push_back(NumElements(t.shape).value_or(0));
  return segments;
}

}  // namespace sextant
