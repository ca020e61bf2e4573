// The federated model's named tensors: the built-in model's layout against the trainer's own
// parameters, and the layout of a model of the user's own as the experiment spec carries it.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/federated/federated_job.h"
#include "worker/federated/local_trainer.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const TensorFile& f) {
  std::vector<std::string> out;
  for (const Tensor& t : f.tensors) out.push_back(t.name);
  return out;
}

TEST(BuiltinModelLayoutTest, MlpLayersAreNamedF32TensorsWithWeightsInOut) {
  train::ModelSpec spec;
  spec.hidden = {32};
  const TensorFile layout = BuiltinModelLayout(spec);
  EXPECT_THAT(Names(layout), ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_THAT(layout.tensors[0].shape, ElementsAre(784, 32));
  EXPECT_THAT(layout.tensors[1].shape, ElementsAre(32));
  EXPECT_THAT(layout.tensors[2].shape, ElementsAre(32, 10));
  for (const Tensor& t : layout.tensors) EXPECT_EQ(t.dtype, DType::kF32) << t.name;
}

TEST(BuiltinModelLayoutTest, CoversExactlyTheTrainersParametersForMlpAndCnn) {
  train::ModelSpec mlp;
  mlp.hidden = {64, 16};
  train::ModelSpec cnn;
  cnn.kind = "cnn";
  cnn.hidden = {24};
  for (const train::ModelSpec& spec : {mlp, cnn}) {
    absl::StatusOr<std::unique_ptr<LocalTrainer>> trainer = LocalTrainer::Create(spec, 1);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    EXPECT_EQ(*LayoutElements(BuiltinModelLayout(spec)), (*trainer)->size()) << spec.kind;
  }
  const TensorFile layout = BuiltinModelLayout(cnn);
  EXPECT_THAT(Names(layout), ElementsAre("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                         "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_THAT(layout.tensors[0].shape, ElementsAre(9, 16));    // 3x3 kernel, 1 channel in
  EXPECT_THAT(layout.tensors[2].shape, ElementsAre(144, 32));  // 3x3 x 16 channels in
  EXPECT_THAT(layout.tensors[4].shape, ElementsAre(7 * 7 * 32, 24));
}

TEST(FederatedJobTest, AModelOfYourOwnTakesItsLayoutFromTheSpec) {
  v1::ExperimentSpec spec;
  v1::Federation* f = spec.mutable_federation();
  f->add_regions()->set_clients(2);
  f->add_client_command("python3");
  f->set_model_file("/models/init.safetensors");
  v1::TensorLayout* w = f->add_model_layout();
  w->set_name("encoder.weight");
  w->set_dtype("BF16");
  w->add_shape(4);
  w->add_shape(3);
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->own_model);
  ASSERT_EQ(job->layout.tensors.size(), 1u);
  EXPECT_EQ(job->layout.tensors[0].dtype, DType::kBF16);
  EXPECT_THAT(job->layout.tensors[0].shape, ElementsAre(4, 3));
  w->set_dtype("F64");
  EXPECT_THAT(std::string(FederatedJobFromSpec(spec).status().message()),
              HasSubstr("tensor \"encoder.weight\": dtype \"F64\" is not supported"));
  // Without a model file the built-in model's layout is the job's.
  f->clear_model_file();
  f->clear_model_layout();
  job = FederatedJobFromSpec(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->own_model);
  EXPECT_EQ(job->layout.tensors[0].name, "fc1.weight");
}

TEST(FederatedJobTest, UpdateCompressionComesFromTheSpecWithTheLayoutsTensorsAsSegments) {
  v1::ExperimentSpec spec;
  spec.mutable_trial()->mutable_builtin()->set_model("mlp");
  (*spec.mutable_trial()->mutable_builtin()->mutable_args())["hidden"] = "32";
  v1::Federation* f = spec.mutable_federation();
  f->add_regions()->set_clients(2);
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->update_compression, UpdateCompression::kNone);
  EXPECT_THAT(LayoutSegments(job->layout), ElementsAre(784 * 32, 32, 32 * 10, 10));
  f->set_update_compression("int8");
  job = FederatedJobFromSpec(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->update_compression, UpdateCompression::kInt8);
  // Under secure aggregation int8 is the round's quantisation (the aggregator's config); fp16,
  // a floating-point encoding, is refused.
  f->set_secure_aggregation(true);
  EXPECT_TRUE(FederatedJobFromSpec(spec).ok());
  f->set_update_compression("fp16");
  EXPECT_THAT(std::string(FederatedJobFromSpec(spec).status().message()),
              HasSubstr("fp16 applies to plaintext updates"));
  f->set_update_compression("int4");
  EXPECT_EQ(FederatedJobFromSpec(spec).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
