#include "tensors/tensor_file.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

Tensor Zeros(std::string name, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(*NumElements(t.shape) * DTypeSize(dtype), '\0');
  return t;
}

TEST(TensorTest, ElementCountsOfScalarsEmptyAndInvalidShapes) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({5, 0, 7}), 0);
  EXPECT_EQ(NumElements({3, -1}), std::nullopt);
  EXPECT_EQ(NumElements({int64_t{1} << 31, int64_t{1} << 31}),
            std::nullopt);  // * 4 bytes overflows
  EXPECT_EQ(NumElements({std::numeric_limits<int64_t>::max(), 0}), std::nullopt);
  EXPECT_EQ(ShapeText({128, 784}), "[128,784]");
  EXPECT_EQ(ShapeText({}), "[]");
}

TEST(TensorTest, SetFromF32NarrowsToTheDtypeAndToF32WidensBack) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    Tensor t = Zeros("w", d, {2, 2});
    ASSERT_TRUE(t.SetFromF32({1.0f, -2.5f, 0.0f, 1.0f + 1.0f / 4096}).ok());
    EXPECT_EQ(t.data.size(), 4u * DTypeSize(d));
    absl::StatusOr<std::vector<float>> back = t.ToF32();
    ASSERT_TRUE(back.ok()) << back.status();
    // 1 + 2^-12 survives only in F32: F16 and BF16 round it to 1.
    const float last = d == DType::kF32 ? 1.0f + 1.0f / 4096 : 1.0f;
    EXPECT_EQ(*back, (std::vector<float>{1.0f, -2.5f, 0.0f, last})) << DTypeName(d);
  }
}

TEST(TensorTest, SetFromF32WithTheWrongCountNamesTheTensorAndKeepsItsData) {
  Tensor t = Zeros("fc1.bias", DType::kF16, {3});
  const std::string before = t.data;
  absl::Status s = t.SetFromF32({1.0f, 2.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor \"fc1.bias\": 2 values for shape [3]"));
  EXPECT_EQ(t.data, before);
}

TEST(TensorTest, ToF32RefusesDataOfTheWrongSize) {
  Tensor t = Zeros("w", DType::kBF16, {4});
  t.data.pop_back();
  absl::StatusOr<std::vector<float>> v = t.ToF32();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("tensor \"w\": 7 bytes of data where BF16 [4] needs 8"));
}

TensorFile Mlp(int64_t inputs = 784, DType dtype = DType::kF32) {
  TensorFile f;
  f.tensors.push_back(Zeros("fc1.weight", dtype, {128, inputs}));
  f.tensors.push_back(Zeros("fc1.bias", dtype, {128}));
  f.tensors.push_back(Zeros("fc2.weight", dtype, {10, 128}));
  return f;
}

TEST(FlatModelTest, FlattenConcatenatesInTensorOrderAndUnflattenNarrowsEachToItsDtype) {
  TensorFile model;
  model.metadata["format"] = "pt";
  model.tensors.push_back(Zeros("w", DType::kF32, {2, 2}));
  model.tensors.push_back(Zeros("h", DType::kF16, {3}));
  model.tensors.push_back(Zeros("b", DType::kBF16, {}));
  ASSERT_TRUE(model.tensors[0].SetFromF32(std::vector<float>{1, 2, 3, 4}).ok());
  ASSERT_TRUE(model.tensors[1].SetFromF32(std::vector<float>{0.5f, -1, 2}).ok());
  ASSERT_TRUE(model.tensors[2].SetFromF32(std::vector<float>{-3}).ok());
  EXPECT_EQ(*LayoutElements(model), 8);
  absl::StatusOr<std::vector<float>> flat = FlattenToF32(model);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(*flat, (std::vector<float>{1, 2, 3, 4, 0.5f, -1, 2, -3}));
  // 1/3 is not exact in f16 or bf16: each tensor is rounded to its own dtype.
  std::vector<float> moved = *flat;
  for (float& v : moved) v += 1.0f / 3;
  absl::StatusOr<TensorFile> back = UnflattenFromF32(model, moved);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(CheckSameLayout(*back, model).ok());
  EXPECT_EQ(back->metadata, model.metadata);
  EXPECT_EQ((*back->tensors[0].ToF32())[0], 1 + 1.0f / 3);
  EXPECT_EQ((*back->tensors[1].ToF32())[0], HalfToFloat(FloatToHalf(0.5f + 1.0f / 3)));
  EXPECT_EQ((*back->tensors[2].ToF32())[0], BFloat16ToFloat(FloatToBFloat16(-3 + 1.0f / 3)));
}

TEST(FlatModelTest, UnflattenRefusesAWrongCount) {
  TensorFile layout;
  layout.tensors.push_back(Tensor{"w", DType::kF16, {2, 3}, {}});
  EXPECT_EQ(*LayoutElements(layout), 6);
  absl::StatusOr<TensorFile> back = UnflattenFromF32(layout, std::vector<float>(5));
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("5 values for a model of 6"));
  layout.tensors.push_back(Tensor{"bad", DType::kF32, {-1}, {}});
  EXPECT_THAT(std::string(LayoutElements(layout).status().message()),
              HasSubstr("tensor \"bad\": invalid shape [-1]"));
}

TEST(CheckSameLayoutTest, SameNamesDtypesAndShapesInAnyOrderPass) {
  TensorFile reordered = Mlp();
  std::swap(reordered.tensors[0], reordered.tensors[2]);
  EXPECT_TRUE(CheckSameLayout(Mlp(), Mlp()).ok());
  EXPECT_TRUE(CheckSameLayout(reordered, Mlp()).ok());
  EXPECT_EQ(Mlp().Find("fc1.bias")->shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(Mlp().Find("fc3"), nullptr);
}

TEST(CheckSameLayoutTest, ShapeMismatchNamesTheTensorAndBothShapes) {
  absl::Status s = CheckSameLayout(Mlp(784), Mlp(785));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "tensor \"fc1.weight\": shape [128,784] where the global model has [128,785]");
}

TEST(CheckSameLayoutTest, DtypeMismatchNamesTheTensorAndBothDtypes) {
  absl::Status s =
      CheckSameLayout(Mlp(784, DType::kF16), Mlp(784, DType::kF32), "model.safetensors");
  EXPECT_EQ(s.message(), "tensor \"fc1.weight\": dtype F16 where model.safetensors has F32");
}

TEST(CheckSameLayoutTest, RenamedTensorIsNamedWithItsLikelyOldName) {
  TensorFile renamed = Mlp();
  renamed.tensors[1].name = "fc1.b";
  absl::Status s = CheckSameLayout(renamed, Mlp());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "tensor \"fc1.b\" is not in the global model (renamed from \"fc1.bias\"?)");
}

TEST(CheckSameLayoutTest, ExtraAndMissingTensorsAreNamed) {
  TensorFile extra = Mlp();
  extra.tensors.push_back(Zeros("fc3.weight", DType::kF32, {1}));
  EXPECT_EQ(CheckSameLayout(extra, Mlp()).message(),
            "tensor \"fc3.weight\" is not in the global model");
  TensorFile missing = Mlp();
  missing.tensors.erase(missing.tensors.begin() + 1);
  EXPECT_EQ(CheckSameLayout(missing, Mlp()).message(),
            "tensor \"fc1.bias\" of the global model is missing");
}

TEST(CheckSameLayoutTest, DuplicateNamesAreRefused) {
  TensorFile twice = Mlp();
  twice.tensors.push_back(twice.tensors[1]);
  EXPECT_EQ(CheckSameLayout(twice, Mlp()).message(), "tensor \"fc1.bias\" appears twice");
  EXPECT_EQ(CheckSameLayout(Mlp(), twice).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
