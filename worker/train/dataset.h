// Datasets for the built-in trainer: Fashion-MNIST from Debian's dataset-fashion-mnist package,
// a deterministic train/validation split, and IID or non-IID (Dirichlet) client partitions.
#ifndef SEXTANT_WORKER_TRAIN_DATASET_H_
#define SEXTANT_WORKER_TRAIN_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"

namespace sextant::train {

// Row-major so that one example is one contiguous row (a mini-batch is a block of rows).
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A labelled set of examples. Not thread-safe for writes; immutable once built.
struct Dataset {
  RowMatrix x;             // n x features, pixel values scaled to [0, 1]
  std::vector<int32_t> y;  // n labels in [0, num_classes)
  int num_classes = 10;
  int channels = 1, height = 28, width = 28;  // image shape of one row (features = c*h*w)

  int64_t size() const { return static_cast<int64_t>(y.size()); }
  // The examples at `indices`, in that order.
  Dataset Subset(const std::vector<int64_t>& indices) const;
};

// The Debian package's install location.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Images kept as their pixel bytes (a quarter of the memory of floats) until examples are
// taken: a federated client needs only its share of the 58,000 or so training examples.
struct ImageBytes {
  std::vector<uint8_t> pixels;  // n x (c*h*w) bytes, row-major
  std::vector<int32_t> y;       // n labels in [0, num_classes)
  int num_classes = 10;
  int channels = 1, height = 28, width = 28;

  int64_t size() const { return static_cast<int64_t>(y.size()); }
  // The examples at `indices`, in that order, as a Dataset (each pixel byte / 255).
  Dataset Subset(const std::vector<int64_t>& indices) const;
  // Every example as a Dataset.
  Dataset All() const;
};

struct FashionMnist {
  ImageBytes train;    // training examples left after the validation split
  Dataset validation;  // held out from the 60,000 training examples
  Dataset test;        // the 10,000 t10k examples
};

// Reads the four gzip-compressed IDX files from `dir`, validating magic numbers, dimensions and
// sizes, and splits off `validation_size` examples (default 10,000) chosen by a permutation
// seeded with `split_seed`: the same seed always gives the same split.
// NotFound, naming the package and `apt-get install dataset-fashion-mnist`, when a file is
// missing; DataLoss naming the file when a file is corrupt or has the wrong shape.
absl::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir = kFashionMnistDir,
                                              int64_t validation_size = 10000,
                                              uint64_t split_seed = 0);

// The client index lists of an IID partition: a seeded shuffle dealt round-robin, so client
// sizes differ by at most one. InvalidArgument when clients < 1 or clients > n.
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionIid(int64_t n, int clients,
                                                               uint64_t seed);

// A non-IID partition after Hsu et al. (2019): for each class, proportions drawn from
// Dirichlet(alpha) split that class's examples among the clients. Smaller alpha means more skew.
// Every client receives at least one example (re-drawn until so, up to a bound).
// InvalidArgument when alpha <= 0, clients < 1 or clients > labels.size().
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionDirichlet(
    const std::vector<int32_t>& labels, int num_classes, int clients, double alpha, uint64_t seed);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_DATASET_H_
