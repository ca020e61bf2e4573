// A seeded synthetic image dataset for tests and smoke runs where Fashion-MNIST is not
// installed: each class has a random prototype image; examples are noisy copies of it.
#ifndef SEXTANT_WORKER_TRAIN_SYNTHETIC_DATA_H_
#define SEXTANT_WORKER_TRAIN_SYNTHETIC_DATA_H_

#include <cstdint>

#include "worker/train/dataset.h"

namespace sextant::train {

// n examples of channels x height x width pixels in [0, 1], labels uniform over `classes`.
// `noise` in [0, 1] is the weight of per-example noise against the class prototype (default
// 0.5). The same arguments always give the same dataset; prototypes depend only on
// (prototype_seed, shape), so two sets with the same prototype_seed share classes.
Dataset MakeSyntheticDataset(int64_t n, uint64_t seed, uint64_t prototype_seed = 0,
                             int classes = 10, int channels = 1, int height = 28, int width = 28,
                             float noise = 0.5f);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_SYNTHETIC_DATA_H_
