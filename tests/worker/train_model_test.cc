#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "worker/train/counter_rng.h"
#include "worker/train/cpu_backend.h"
#include "worker/train/model.h"

namespace sextant::train {
namespace {

// Mean cross-entropy of the model on the batch staged in its input (same dropout draw).
double Loss(Backend& be, Model& model, int64_t rows, const IntTensor& labels, bool training) {
  Tensor logits = model.Forward(rows, training, /*dropout_seed=*/11, 0);
  return be.SoftmaxCrossEntropy(logits, labels, 0, Tensor{}).loss / static_cast<double>(rows);
}

// Compares backpropagated gradients with central differences on a sample of every parameter.
void CheckGradients(const ModelSpec& spec, bool training) {
  auto be = NewCpuBackend({.threads = 1});
  auto model = NewModel(spec, be.get(), /*seed=*/5);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t rows = 4;
  ASSERT_TRUE((*model)->Reserve(rows).ok());
  Tensor x = (*model)->input();
  for (int64_t i = 0; i < rows * spec.inputs(); ++i) x.data[i] = UniformFloat(3, i);
  IntBuffer labels = *be->AllocateInts(rows);
  for (int64_t r = 0; r < rows; ++r) labels.view().data[r] = static_cast<int32_t>(r % spec.classes);
  Buffer dlogits = *be->Allocate(rows, spec.classes);

  Tensor logits = (*model)->Forward(rows, training, 11, 0);
  be->SoftmaxCrossEntropy(logits, labels.view(), 1.0f / rows, dlogits.view());
  (*model)->Backward(dlogits.view(), 0);

  const auto& params = (*model)->parameters();
  const auto& grads = (*model)->gradients();
  int checked = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    const int64_t n = params[p].size();
    const int64_t stride = std::max<int64_t>(1, n / 25);
    for (int64_t i = 0; i < n; i += stride) {
      float& w = params[p].data[i];
      const float saved = w;
      const float eps = 1e-3f;
      w = saved + eps;
      const double up = Loss(*be, **model, rows, labels.view(), training);
      w = saved - eps;
      const double down = Loss(*be, **model, rows, labels.view(), training);
      w = saved;
      const double numeric = (up - down) / (2.0 * eps);
      const double analytic = grads[p].data[i];
      EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << "parameter " << p << " index " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(ModelTest, MlpGradientsMatchFiniteDifferences) {
  ModelSpec spec;
  spec.kind = "mlp";
  spec.channels = 1;
  spec.height = 3;
  spec.width = 4;
  spec.classes = 5;
  spec.hidden = {7, 6};
  CheckGradients(spec, /*training=*/false);
}

TEST(ModelTest, MlpGradientsThroughDropoutMatchFiniteDifferences) {
  ModelSpec spec;
  spec.height = 3;
  spec.width = 4;
  spec.classes = 4;
  spec.hidden = {9, 8};
  spec.dropout = 0.3f;
  CheckGradients(spec, /*training=*/true);
}

TEST(ModelTest, CnnGradientsMatchFiniteDifferences) {
  ModelSpec spec;
  spec.kind = "cnn";
  spec.channels = 1;
  spec.height = 8;
  spec.width = 8;
  spec.classes = 3;
  spec.conv_channels = {3, 4};
  spec.hidden = {6};
  CheckGradients(spec, /*training=*/false);
}

TEST(ModelTest, SameSeedGivesSameInitialWeightsAndOtherSeedDiffers) {
  auto be = NewCpuBackend({.threads = 1});
  ModelSpec spec;
  spec.hidden = {32};
  auto a = NewModel(spec, be.get(), 1), b = NewModel(spec, be.get(), 1),
       c = NewModel(spec, be.get(), 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const Tensor wa = (*a)->parameters()[0], wb = (*b)->parameters()[0], wc = (*c)->parameters()[0];
  EXPECT_TRUE(std::equal(wa.data, wa.data + wa.size(), wb.data));
  EXPECT_FALSE(std::equal(wa.data, wa.data + wa.size(), wc.data));
  // He initialisation: the standard deviation is sqrt(2 / fan_in).
  double sq = 0;
  for (int64_t i = 0; i < wa.size(); ++i) sq += double{wa.data[i]} * wa.data[i];
  EXPECT_NEAR(std::sqrt(sq / wa.size()), std::sqrt(2.0 / 784), 0.002);
}

TEST(ModelTest, InvalidSpecsNameTheField) {
  auto be = NewCpuBackend({.threads = 1});
  ModelSpec spec;
  spec.hidden = {512, 0};
  EXPECT_NE(NewModel(spec, be.get(), 0).status().message().find("hidden"), std::string::npos);
  spec = ModelSpec();
  spec.dropout = 1.0f;
  EXPECT_NE(NewModel(spec, be.get(), 0).status().message().find("dropout"), std::string::npos);
  spec = ModelSpec();
  spec.kind = "transformer";
  EXPECT_EQ(NewModel(spec, be.get(), 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant::train
