// examples/federated/pytorch-own-model end to end: its scripts write each site's own image files
// from Debian's dataset-fashion-mnist and the first global model, then `sextant run` trains the
// user's PyTorch CNN for 2 rounds on them (data: own), scoring the global model with the
// example's evaluate_command. Needs python3-torch (about 20 s; ctest label slow).

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensors/safetensors.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::QueryRows;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kExample =
    std::string(SEXTANT_SOURCE_DIR) + "/examples/federated/pytorch-own-model";

bool HasTorchAndData() {
  return std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0 &&
         std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

TEST(PytorchOwnModelExampleTest, TwoRoundsOfTheUsersCnnOnEachSitesOwnImageFiles) {
  SEXTANT_REQUIRE_COMPONENT(HasTorchAndData(),
                            "needs python3-torch and dataset-fashion-mnist for the example");
  // A copy of the example out of the checkout, as a user may make one, so that its prepared
  // files stay out of the checkout too: it needs nothing from the checkout.
  const std::string dir = MakeTempDir("pytorch-own-model");
  for (const char* file : {"site_data.py", "model_file.py", "prepare_data.py", "init_model.py",
                           "client.py", "evaluate.py"}) {
    WriteFile(dir + "/" + file, ReadFile(kExample + "/" + file));
  }
  WriteFile(dir + "/experiment.yaml", absl::StrReplaceAll(ReadFile(kExample + "/experiment.yaml"),
                                                          {{"rounds: 5", "rounds: 2"}}));
  const std::string sextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
  auto init = RunProcess({"/usr/bin/python3", dir + "/init_model.py"});
  ASSERT_EQ(init.exit_code, 0) << init.out << init.err;
  // Before the sites' folders exist the experiment is refused, naming the first missing one.
  auto early = RunProcess({sextant, "validate", dir + "/experiment.yaml"});
  EXPECT_EQ(early.exit_code, 2);
  EXPECT_THAT(early.err, HasSubstr("federation.data_dir: client east/0's data folder"));
  auto prepared = RunProcess({"/usr/bin/python3", dir + "/prepare_data.py"});
  ASSERT_EQ(prepared.exit_code, 0) << prepared.out << prepared.err;
  auto valid = RunProcess({sextant, "validate", dir + "/experiment.yaml"});
  ASSERT_EQ(valid.exit_code, 0) << valid.err;
  auto run = RunProcess({sextant, "run", dir + "/experiment.yaml", "--run-dir", dir + "/run"}, 300);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err
                              << ReadFile(dir + "/run/logs/client-east-0.log");
  // Each client trained on its own site's images: their counts weigh its update.
  EXPECT_THAT(ReadFile(dir + "/run/logs/client-east-0.log"), HasSubstr("examples=480"));
  EXPECT_THAT(ReadFile(dir + "/run/logs/client-east-1.log"), HasSubstr("examples=240"));
  EXPECT_THAT(ReadFile(dir + "/run/logs/client-west-0.log"), HasSubstr("examples=720"));
  // The rounds' global metrics are evaluate.py's on validation/: the model learns (0.60 after
  // round 2 here, chance being 0.1).
  const auto rounds = QueryRows(dir + "/run/state.db",
                                "SELECT accuracy, clients, loss FROM rounds WHERE region = '' "
                                "ORDER BY round");
  ASSERT_EQ(rounds.size(), 2u) << run.out;
  EXPECT_EQ(rounds[1][1], "3");
  EXPECT_GT(std::stod(rounds[1][0]), 0.4) << run.out;
  EXPECT_LT(std::stod(rounds[1][2]), std::stod(rounds[0][2])) << run.out;
  EXPECT_THAT(ReadFile(dir + "/run/federation/evaluate/round-2.out"),
              HasSubstr(absl::StrCat("eval_accuracy=", rounds[1][0])));
  EXPECT_TRUE(
      QueryRows(dir + "/run/state.db", "SELECT message FROM events WHERE kind = 'evaluate_failed'")
          .empty());
  // The final model is the user's CNN, tensor by tensor.
  absl::StatusOr<TensorFile> final_model = ReadSafetensors(dir + "/run/model/final.safetensors");
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  std::vector<std::string> names;
  for (const Tensor& t : final_model->tensors) names.push_back(t.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("conv1.weight", "conv1.bias", "conv2.weight",
                                                     "conv2.bias", "head.weight", "head.bias"));
}

}  // namespace
}  // namespace sextant
