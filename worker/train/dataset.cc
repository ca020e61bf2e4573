#include "worker/train/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "worker/train/idx_reader.h"

namespace sextant::train {
namespace {

constexpr char kInstallHint[] =
    "the Fashion-MNIST data comes from the Debian package dataset-fashion-mnist; install it "
    "with: apt-get install dataset-fashion-mnist";

// A file name in `dir`, preferring the package's .gz names but accepting uncompressed copies.
std::string DataFile(const std::string& dir, const std::string& stem) {
  std::string gz = absl::StrCat(dir, "/", stem, ".gz");
  if (std::filesystem::exists(gz)) return gz;
  std::string plain = absl::StrCat(dir, "/", stem);
  if (std::filesystem::exists(plain)) return plain;
  return gz;
}

absl::StatusOr<ImageBytes> LoadPair(const std::string& dir, const std::string& prefix) {
  std::string images_path = DataFile(dir, absl::StrCat(prefix, "-images-idx3-ubyte"));
  std::string labels_path = DataFile(dir, absl::StrCat(prefix, "-labels-idx1-ubyte"));
  for (const auto& p : {images_path, labels_path}) {
    if (!std::filesystem::exists(p)) {
      return absl::NotFoundError(absl::StrCat(p, " is missing: ", kInstallHint));
    }
  }
  auto images = ReadIdx(images_path, 3);
  if (!images.ok()) return images.status();
  auto labels = ReadIdx(labels_path, 1);
  if (!labels.ok()) return labels.status();
  if (images->dims[1] != 28 || images->dims[2] != 28) {
    return absl::DataLossError(absl::StrCat(images_path, ": images are ", images->dims[1], "x",
                                            images->dims[2], ", expected 28x28"));
  }
  if (images->dims[0] != labels->dims[0]) {
    return absl::DataLossError(absl::StrCat(images_path, " has ", images->dims[0], " images but ",
                                            labels_path, " has ", labels->dims[0], " labels"));
  }
  ImageBytes d;
  const int64_t n = images->dims[0];
  d.pixels = std::move(images->data);
  d.y.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    int label = labels->data[i];
    if (label >= d.num_classes) {
      return absl::DataLossError(
          absl::StrCat(labels_path, ": label ", label, " at index ", i, " is not in [0, 10)"));
    }
    d.y[i] = label;
  }
  return d;
}

// The examples at `indices` as bytes, in that order.
ImageBytes Rows(const ImageBytes& from, const std::vector<int64_t>& indices) {
  ImageBytes out;
  out.num_classes = from.num_classes;
  out.channels = from.channels;
  out.height = from.height;
  out.width = from.width;
  const size_t features = static_cast<size_t>(from.channels * from.height * from.width);
  out.pixels.resize(indices.size() * features);
  out.y.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    std::copy_n(from.pixels.begin() + static_cast<std::ptrdiff_t>(indices[i] * features), features,
                out.pixels.begin() + static_cast<std::ptrdiff_t>(i * features));
    out.y[i] = from.y[indices[i]];
  }
  return out;
}

std::vector<int64_t> Permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed);
  // Fisher-Yates with our own index draw: std::shuffle's use of the engine is unspecified, and
  // the split must be the same on every standard library.
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

// A Dataset of `rows` examples of `cols` features, its labels and pixels to be filled, shaped
// as `like` (a Dataset or ImageBytes).
template <class Like>
Dataset Shaped(const Like& like, size_t rows, int64_t cols) {
  Dataset out;
  out.num_classes = like.num_classes;
  out.channels = like.channels;
  out.height = like.height;
  out.width = like.width;
  out.x.resize(static_cast<int64_t>(rows), cols);
  out.y.resize(rows);
  return out;
}

}  // namespace

Dataset Dataset::Subset(const std::vector<int64_t>& indices) const {
  Dataset out = Shaped(*this, indices.size(), x.cols());
  for (size_t i = 0; i < indices.size(); ++i) {
    out.x.row(static_cast<int64_t>(i)) = x.row(indices[i]);
    out.y[i] = y[indices[i]];
  }
  return out;
}

Dataset ImageBytes::Subset(const std::vector<int64_t>& indices) const {
  const int64_t features = channels * height * width;
  Dataset out = Shaped(*this, indices.size(), features);
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint8_t* src = pixels.data() + indices[i] * features;
    float* dst = out.x.data() + static_cast<int64_t>(i) * features;
    for (int64_t k = 0; k < features; ++k) dst[k] = static_cast<float>(src[k]) * (1.0f / 255.0f);
    out.y[i] = y[indices[i]];
  }
  return out;
}

Dataset ImageBytes::All() const {
  std::vector<int64_t> all(static_cast<size_t>(size()));
  std::iota(all.begin(), all.end(), 0);
  return Subset(all);
}

absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir, int64_t validation_size,
                                              uint64_t split_seed) {
  if (!std::filesystem::is_directory(dir)) {
    return absl::NotFoundError(absl::StrCat(dir, " does not exist: ", kInstallHint));
  }
  auto train = LoadPair(dir, "train");
  if (!train.ok()) return train.status();
  auto test = LoadPair(dir, "t10k");
  if (!test.ok()) return test.status();
  if (validation_size < 0 || validation_size >= train->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation size ", validation_size, " must be in [0, ", train->size(), ")"));
  }
  std::vector<int64_t> perm = Permutation(train->size(), split_seed);
  std::vector<int64_t> val_idx(perm.begin(), perm.begin() + validation_size);
  std::vector<int64_t> train_idx(perm.begin() + validation_size, perm.end());
  // Keep the original order inside each part, so the split is a pure selection.
  std::sort(val_idx.begin(), val_idx.end());
  std::sort(train_idx.begin(), train_idx.end());
  FashionMnist out;
  out.validation = train->Subset(val_idx);
  out.train = Rows(*train, train_idx);
  out.test = test->All();
  return out;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionIid(int64_t n, int clients,
                                                               uint64_t seed) {
  if (clients < 1 || clients > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", n, " examples among ", clients, " clients"));
  }
  std::vector<int64_t> perm = Permutation(n, seed);
  std::vector<std::vector<int64_t>> parts(clients);
  for (int64_t i = 0; i < n; ++i) parts[i % clients].push_back(perm[i]);
  for (auto& p : parts) std::sort(p.begin(), p.end());
  return parts;
}

namespace {

// Gamma(alpha, 1) by Marsaglia and Tsang, with the alpha < 1 boost; implemented here so the
// partition is identical across standard libraries (std::gamma_distribution is not specified).
double Gamma(double alpha, std::mt19937_64& rng) {
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&] {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  if (alpha < 1.0) return Gamma(alpha + 1.0, rng) * std::pow(uniform(), 1.0 / alpha);
  double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = normal(), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionDirichlet(
    const std::vector<int32_t>& labels, int num_classes, int clients, double alpha, uint64_t seed) {
  const int64_t n = static_cast<int64_t>(labels.size());
  if (!(alpha > 0) || clients < 1 || clients > n || num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dirichlet partition needs alpha > 0 and 1 <= ", "clients <= examples; got alpha=", alpha,
        " clients=", clients, " examples=", n));
  }
  std::vector<std::vector<int64_t>> by_class(num_classes);
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[i], " at ", i, " is outside [0, ", num_classes, ")"));
    }
    by_class[labels[i]].push_back(i);
  }
  std::mt19937_64 rng(seed);
  for (auto& c : by_class) {
    for (int64_t i = static_cast<int64_t>(c.size()) - 1; i > 0; --i) {
      std::swap(c[i], c[rng() % static_cast<uint64_t>(i + 1)]);
    }
  }
  constexpr int kMaxDraws = 1000;
  for (int attempt = 0; attempt < kMaxDraws; ++attempt) {
    std::vector<std::vector<int64_t>> parts(clients);
    for (const auto& members : by_class) {
      std::vector<double> p(clients);
      double sum = 0;
      for (auto& v : p) sum += (v = Gamma(alpha, rng));
      // Cumulative cut points over this class's (shuffled) examples.
      double acc = 0;
      int64_t start = 0;
      const int64_t m = static_cast<int64_t>(members.size());
      for (int k = 0; k < clients; ++k) {
        acc += p[k] / sum;
        int64_t end = k == clients - 1 ? m : std::min<int64_t>(m, std::llround(acc * m));
        for (int64_t j = start; j < end; ++j) parts[k].push_back(members[j]);
        start = std::max(start, end);
      }
    }
    bool all_nonempty =
        std::all_of(parts.begin(), parts.end(), [](const auto& p) { return !p.empty(); });
    if (all_nonempty) {
      for (auto& p : parts) std::sort(p.begin(), p.end());
      return parts;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("Dirichlet(alpha=", alpha, ") left a client with ",
                                                 "no examples in ", kMaxDraws, " draws; use fewer ",
                                                 "clients or a larger alpha"));
}

}  // namespace sextant::train
