#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/component.h"
#include "worker/train/cpu_backend.h"
#include "worker/train/dataset.h"
#include "worker/train/trainer.h"

namespace sextant::train {
namespace {

// The accuracy target: MLP 784-512-256-10, Adam lr 1e-3, batch 128, 10 epochs.
TEST(TrainAccuracyTest, MlpReachesEightyEightPercentOnFashionMnistInTenEpochs) {
  SEXTANT_REQUIRE_COMPONENT(
      std::filesystem::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz"),
      "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
  auto data = LoadFashionMnist();
  ASSERT_TRUE(data.ok()) << data.status();
  TrainerOptions o;
  o.model.hidden = {512, 256};
  o.optimizer.kind = "adam";
  o.optimizer.lr = 1e-3f;
  o.batch_size = 128;
  o.epochs = 10;
  o.seed = 1;
  o.on_epoch = [](const EpochMetrics& m) { std::printf("%s\n", m.Format("epoch").c_str()); };
  auto backend = NewCpuBackend({.threads = 2});
  auto r = Train(o, data->train.All(), data->validation, backend.get());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->epochs.size(), 10u);
  EXPECT_GE(r->epochs.back().val_accuracy, 0.88);
}

}  // namespace
}  // namespace sextant::train
