#include "strategies/internal/unit_encoding.h"

#include <algorithm>
#include <string>
#include <utility>
#include <variant>

namespace sextant::internal {
namespace {

bool IsCategorical(const ParamSpec& spec) { return spec.kind == ParamSpec::Kind::kCategorical; }

}  // namespace

UnitEncoding::UnitEncoding(SearchSpace space) : space_(std::move(space)) {
  for (const ParamSpec& spec : space_.params) {
    int width = 1;
    if (IsCategorical(spec))
      width = spec.values.size() >= 2 ? static_cast<int>(spec.values.size()) : 0;
    blocks_.push_back({dimension_, width});
    dimension_ += width;
  }
}

Eigen::VectorXd UnitEncoding::Encode(const Params& params) const {
  Eigen::VectorXd z = Eigen::VectorXd::Zero(dimension_);
  for (size_t i = 0; i < space_.params.size(); ++i) {
    const ParamSpec& spec = space_.params[i];
    const Block& block = blocks_[i];
    if (block.width == 0) continue;
    const auto it = params.find(spec.name);
    if (!IsCategorical(spec)) {
      z[block.offset] = it == params.end() ? 0.5 : ToUnit(spec, it->second);
      continue;
    }
    if (it == params.end()) continue;
    const auto* value = std::get_if<std::string>(&it->second);
    if (value == nullptr) continue;
    const auto found = std::find(spec.values.begin(), spec.values.end(), *value);
    if (found != spec.values.end()) z[block.offset + (found - spec.values.begin())] = 1;
  }
  return z;
}

std::vector<double> UnitEncoding::ToParamUnits(const Eigen::VectorXd& z) const {
  std::vector<double> u(space_.params.size(), 0.5);
  for (size_t i = 0; i < space_.params.size(); ++i) {
    const Block& block = blocks_[i];
    if (block.width == 0) continue;
    if (!IsCategorical(space_.params[i])) {
      u[i] = z[block.offset];
      continue;
    }
    Eigen::Index best = 0;
    z.segment(block.offset, block.width).maxCoeff(&best);
    u[i] = (static_cast<double>(best) + 0.5) / block.width;
  }
  return u;
}

Params UnitEncoding::Decode(const Eigen::VectorXd& z) const {
  return FromUnitCube(space_, ToParamUnits(z));
}

Eigen::VectorXd UnitEncoding::FromParamUnits(absl::Span<const double> u) const {
  return Encode(FromUnitCube(space_, u));
}

std::vector<int> UnitEncoding::NumericCoordinates(const Params& params) const {
  std::vector<int> out;
  for (size_t i = 0; i < space_.params.size(); ++i) {
    if (!IsCategorical(space_.params[i]) && params.contains(space_.params[i].name)) {
      out.push_back(blocks_[i].offset);
    }
  }
  return out;
}

}  // namespace sextant::internal
