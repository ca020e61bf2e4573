#include "worker/cuda/device_query.h"

namespace sextant {

std::vector<GpuInfo> QueryGpus() { return {}; }
bool BuiltWithCuda() { return false; }

}  // namespace sextant
