#ifndef SEXTANT_STRATEGIES_INTERNAL_UNIT_ENCODING_H_
#define SEXTANT_STRATEGIES_INTERNAL_UNIT_ENCODING_H_

#include <Eigen/Core>
#include <vector>

#include "absl/types/span.h"
#include "strategies/search_space.h"

namespace sextant::internal {

// The feature vector a surrogate model sees for a point of a search space. Floats and ints
// take one coordinate each, their ToUnit value (log parameters in log space, ints at the
// centre of their slice); a categorical with k >= 2 values takes k one-hot coordinates, and
// one with fewer takes none. Inactive parameters encode as 0.5 (numeric) or all zeros
// (categorical). Immutable after construction, so its methods may run concurrently.
class UnitEncoding {
 public:
  explicit UnitEncoding(SearchSpace space);

  // Where parameter i's coordinates sit in the encoded vector.
  struct Block {
    int offset = 0;
    int width = 0;
  };

  const SearchSpace& space() const { return space_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  // The number of encoded coordinates.
  int dimension() const { return dimension_; }

  // Encodes params; parameters absent from params count as inactive.
  Eigen::VectorXd Encode(const Params& params) const;

  // The nearest feasible Params to a (possibly relaxed) encoded point: numeric coordinates are
  // clamped into [0, 1) and decoded by FromUnit (which rounds ints), a categorical takes its
  // largest one-hot coordinate, and inactive parameters are left out.
  Params Decode(const Eigen::VectorXd& z) const;

  // Decode's per-parameter unit-cube coordinates (what FromUnitCube takes).
  std::vector<double> ToParamUnits(const Eigen::VectorXd& z) const;

  // Encode(FromUnitCube(space, u)): a feasible encoded point from parameter unit coordinates.
  Eigen::VectorXd FromParamUnits(absl::Span<const double> u) const;

  // The encoded coordinates of float and int parameters active in params: the ones that a
  // continuous optimiser may move.
  std::vector<int> NumericCoordinates(const Params& params) const;

 private:
  SearchSpace space_;
  std::vector<Block> blocks_;
  int dimension_ = 0;
};

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_UNIT_ENCODING_H_
