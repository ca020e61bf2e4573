#include "worker/train/synthetic_data.h"

#include "worker/train/counter_rng.h"

namespace sextant::train {

Dataset MakeSyntheticDataset(int64_t n, uint64_t seed, uint64_t prototype_seed, int classes,
                             int channels, int height, int width, float noise) {
  Dataset d;
  const int64_t features = int64_t{channels} * height * width;
  d.num_classes = classes;
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.x.resize(n, features);
  d.y.resize(n);
  const uint64_t proto_key = StreamKey(prototype_seed, 0x5EED, 4);
  const uint64_t label_key = StreamKey(seed, 1, 5), pixel_key = StreamKey(seed, 2, 5);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = static_cast<int32_t>(RandomBits(label_key, i) % classes);
    d.y[i] = label;
    for (int64_t j = 0; j < features; ++j) {
      const float proto = UniformFloat(proto_key, label * features + j);
      const float u = UniformFloat(pixel_key, i * features + j);
      d.x(i, j) = (1.0f - noise) * proto + noise * u;
    }
  }
  return d;
}

}  // namespace sextant::train
