// The command client's pieces: the .npy reader/writer for the data share (checked against
// numpy's own bytes when numpy is there) and CommandTrainer running real commands that read and
// write the model as safetensors (with the helper in clients/python/sextant/model_file.py).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensors/safetensors.h"
#include "tests/support/component.h"
#include "worker/federated/command_trainer.h"
#include "worker/federated/npy.h"

namespace sextant {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Dir(const std::string& name) {
  const std::string d = testing::TempDir() + "/fl-command-" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool HasNumpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

TEST(NpyTest, WritesWhatNumpyWritesAndReadsItBack) {
  const std::string d = Dir("npy");
  ASSERT_TRUE(WriteNpy(d + "/ours.npy", std::vector<float>{0, 1, 2, 3, 4, 5}, {2, 3}).ok());
  absl::StatusOr<NpyArray> back = ReadNpy(d + "/ours.npy");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->shape, ElementsAre(2, 3));
  EXPECT_THAT(back->data, ElementsAre(0, 1, 2, 3, 4, 5));
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the byte comparison");
  ASSERT_EQ(std::system(("/usr/bin/python3 -c \"import numpy as np; np.save('" + d +
                         "/numpy.npy', np.arange(6, dtype=np.float32).reshape(2, 3)); "
                         "np.save('" +
                         d + "/vec.npy', np.array([1.5, -2], dtype='<f4'))\"")
                            .c_str()),
            0);
  EXPECT_EQ(Bytes(d + "/ours.npy"), Bytes(d + "/numpy.npy"));
  absl::StatusOr<NpyArray> vec = ReadNpy(d + "/vec.npy");
  ASSERT_TRUE(vec.ok()) << vec.status();
  EXPECT_THAT(vec->shape, ElementsAre(2));
  EXPECT_THAT(vec->data, ElementsAre(1.5f, -2.0f));
}

std::string Header(const std::string& dict) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
  h.push_back('\n');
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  return out + h;
}

TEST(NpyTest, RejectsOtherDtypesFortranOrderBadShapesAndWrongSizes) {
  const std::string four(16, '\0');  // 4 float32 values
  auto error = [](const std::string& bytes) { return ParseNpy(bytes).status(); };
  EXPECT_TRUE(
      ParseNpy(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }") + four).ok());
  EXPECT_THAT(error("PK\x03\x04" + four).message(), HasSubstr("magic"));
  EXPECT_THAT(
      error(Header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }") + four).message(),
      HasSubstr("dtype '<f8'"));
  EXPECT_THAT(
      error(Header("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }") + four).message(),
      HasSubstr("dtype '>f4'"));
  EXPECT_THAT(
      error(Header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") + four).message(),
      HasSubstr("Fortran"));
  EXPECT_THAT(
      error(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }") + four).message(),
      HasSubstr("needs 20 data bytes, the file has 16"));
  EXPECT_THAT(
      error(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }") + four).message(),
      HasSubstr("bad shape"));
  EXPECT_THAT(
      error(Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}") + four)
          .message(),
      HasSubstr("unexpected keys"));
  EXPECT_THAT(error(Header("{'descr': '<f4', 'shape': (4,), }") + four).message(),
              HasSubstr("fortran_order"));
  std::string truncated = Header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }");
  EXPECT_THAT(error(truncated.substr(0, 30)).message(), HasSubstr("truncated"));
  EXPECT_TRUE(absl::IsNotFound(ReadNpy("/nonexistent/x.npy").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(WriteNpy("/tmp/x.npy", std::vector<float>{1, 2}, {3})));
}

// Writes a shell script into dir and returns its argv.
std::vector<std::string> Script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/client.sh";
  std::ofstream(path) << "#!/bin/sh\nset -e\n" << body << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return {path};
}

TensorFile Layout(std::vector<Tensor> tensors) {
  TensorFile layout;
  layout.tensors = std::move(tensors);
  return layout;
}

// One tensor of each dtype: what a user's mixed-precision model may hold.
TensorFile MixedLayout() {
  return Layout({Tensor{"fc1.weight", DType::kBF16, {2, 2}, {}},
                 Tensor{"fc1.bias", DType::kF16, {2}, {}}, Tensor{"head", DType::kF32, {}, {}}});
}

// The folder of the model-file helper (clients/python/sextant/model_file.py), which needs only
// numpy: the commands below import it from there.
const char* kHelperDir = SEXTANT_SOURCE_DIR "/clients/python/sextant";

// A python3 client command: `body` runs after the helper is importable as model_file.
std::vector<std::string> PythonClient(const std::string& dir, const std::string& body) {
  std::ofstream(dir + "/client.py") << "import os, sys\nsys.path.insert(0, '" << kHelperDir
                                    << "')\nimport numpy as np\nimport model_file\n"
                                    << "env = os.environ\n"
                                    << body;
  return {"/usr/bin/python3", dir + "/client.py"};
}

TEST(CommandTrainerTest, RunsTheCommandWithTheModelFileAndReadsWeightsAndNumExamples) {
  const std::string d = Dir("copy");
  CommandTrainerOptions o;
  o.argv = Script(d,
                  "test \"$SEXTANT_ROUND\" = 3\ntest \"$SEXTANT_LR\" = 0.5\n"
                  "cp \"$SEXTANT_GLOBAL_MODEL\" \"$SEXTANT_UPDATED_MODEL\"\n"
                  "echo num_examples=42 train_loss=0.25");
  o.work_dir = d + "/work";
  o.env = {{"SEXTANT_LR", "0.5"}};
  o.layout = Layout({Tensor{"w", DType::kF32, {3}, {}}});
  absl::StatusOr<CommandTrainer> t = CommandTrainer::Create(o, RealClockInstance());
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<float> global = {1, -2, 3.5}, updated(3);
  absl::StatusOr<CommandRoundResult> r = t->RunRound(3, 9, global, absl::MakeSpan(updated));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_examples, 42);
  EXPECT_DOUBLE_EQ(r->train_loss, 0.25);
  EXPECT_EQ(r->eval_examples, 0);  // it printed no evaluation
  EXPECT_EQ(updated, global);
  // The global model went out as safetensors with the layout's name.
  absl::StatusOr<TensorFile> sent = ReadSafetensors(d + "/work/global.safetensors");
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->tensors[0].name, "w");
  EXPECT_THAT(*sent->tensors[0].ToF32(), ElementsAre(1, -2, 3.5f));
}

TEST(CommandTrainerTest, APythonCommandMovesABf16F16F32ModelAndTheMovesComeBackPerTensor) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy");
  const std::string d = Dir("mixed");
  CommandTrainerOptions o;
  // Each tensor moves by its own step, stored back in its own dtype; the command evaluates the
  // model it received. The steps are exact in every dtype, so the values compare exactly.
  o.argv = PythonClient(d, R"(tensors, kinds = model_file.read(env["SEXTANT_GLOBAL_MODEL"])
assert kinds == {"fc1.weight": "BF16", "fc1.bias": "F16", "head": "F32"}, kinds
assert tensors["fc1.weight"].shape == (2, 2) and tensors["head"].shape == ()
step = {"fc1.weight": 0.5, "fc1.bias": -0.25, "head": 2.0}
moved = {name: a.astype(np.float32) + step[name] for name, a in reversed(tensors.items())}
model_file.write(env["SEXTANT_UPDATED_MODEL"], moved, kinds)
print("num_examples=7 eval_loss=0.5 eval_accuracy=0.75")
)");
  o.work_dir = d + "/work";
  o.layout = MixedLayout();
  absl::StatusOr<CommandTrainer> t = CommandTrainer::Create(o, RealClockInstance());
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<float> global = {1, 2, -3, 4, 0.5f, 1.5f, 10};
  std::vector<float> updated(global.size());
  absl::StatusOr<CommandRoundResult> r = t->RunRound(1, 1, global, absl::MakeSpan(updated));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_examples, 7);
  EXPECT_DOUBLE_EQ(r->eval_loss, 0.5);
  EXPECT_DOUBLE_EQ(r->eval_accuracy, 0.75);
  EXPECT_EQ(r->eval_examples, 7);
  // Written in reverse order, read back in the layout's.
  EXPECT_THAT(updated, ElementsAre(1.5f, 2.5f, -2.5f, 4.5f, 0.25f, 1.25f, 12));
  absl::StatusOr<TensorFile> sent = ReadSafetensors(d + "/work/global.safetensors");
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_TRUE(CheckSameLayout(*sent, MixedLayout()).ok());
}

TEST(CommandTrainerTest, AnUpdateWithARenamedTensorOrAnotherDtypeIsRefusedNamingTheTensor) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy");
  const std::string d = Dir("renamed");
  auto run = [&](const std::string& body) {
    CommandTrainerOptions o;
    o.argv = PythonClient(d, "tensors, kinds = model_file.read(env['SEXTANT_GLOBAL_MODEL'])\n" +
                                 body + "print('num_examples=3')\n");
    o.work_dir = d + "/work";
    o.layout = MixedLayout();
    std::vector<float> global(7, 1.0f), updated(7);
    return CommandTrainer::Create(o, RealClockInstance())
        ->RunRound(1, 1, global, absl::MakeSpan(updated));
  };
  auto renamed = run(R"(tensors["fc1.b"] = tensors.pop("fc1.bias"); kinds["fc1.b"] = "F16"
model_file.write(env["SEXTANT_UPDATED_MODEL"], tensors, kinds)
)");
  EXPECT_TRUE(absl::IsInvalidArgument(renamed.status())) << renamed.status();
  EXPECT_THAT(renamed.status().message(),
              HasSubstr("tensor \"fc1.b\" is not in the global model (renamed from "
                        "\"fc1.bias\"?)"));
  auto widened = run(R"(kinds["fc1.weight"] = "F32"
model_file.write(env["SEXTANT_UPDATED_MODEL"], tensors, kinds)
)");
  EXPECT_TRUE(absl::IsInvalidArgument(widened.status())) << widened.status();
  EXPECT_THAT(widened.status().message(),
              HasSubstr("tensor \"fc1.weight\": dtype F32 where the global model has BF16"));
  auto reshaped = run(R"(tensors["fc1.weight"] = tensors["fc1.weight"].reshape(4)
model_file.write(env["SEXTANT_UPDATED_MODEL"], tensors, kinds)
)");
  EXPECT_THAT(reshaped.status().message(),
              HasSubstr("tensor \"fc1.weight\": shape [4] where the global model has [2,2]"));
}

TEST(CommandTrainerTest, NumpyCommandSeesItsShareAndItsWeightsComeBack) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy");
  const std::string d = Dir("numpy");
  CommandTrainerOptions o;
  o.argv = PythonClient(d, R"(tensors, kinds = model_file.read(env["SEXTANT_GLOBAL_MODEL"])
x = np.load(env["SEXTANT_TRAIN_X"]); y = np.load(env["SEXTANT_TRAIN_Y"])
assert x.shape == (2, 3) and y.tolist() == [1.0, 0.0]
model_file.write(env["SEXTANT_UPDATED_MODEL"], {"w": tensors["w"] + x.sum()})
print(f"num_examples={len(y)}")
)");
  o.work_dir = d + "/work";
  o.layout = Layout({Tensor{"w", DType::kF32, {2}, {}}});
  absl::StatusOr<CommandTrainer> t = CommandTrainer::Create(o, RealClockInstance());
  ASSERT_TRUE(t.ok()) << t.status();
  train::Dataset share;
  share.x.resize(2, 3);
  share.x << 0.5f, 0, 0, 0, 0, 0.25f;
  share.y = {1, 0};
  ASSERT_TRUE(t->WriteClientShare(share).ok());
  std::vector<float> global = {1, 2}, updated(2);
  absl::StatusOr<CommandRoundResult> r = t->RunRound(1, 1, global, absl::MakeSpan(updated));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_examples, 2);
  EXPECT_THAT(updated, ElementsAre(1.75f, 2.75f));
}

TEST(CommandTrainerTest, FailingSilentOrMisshapedCommandsAreErrorsThatSayWhy) {
  const std::string d = Dir("bad");
  std::vector<float> global = {1, 2}, updated(2);
  auto run = [&](const std::string& body) {
    CommandTrainerOptions o;
    o.argv = Script(d, body);
    o.work_dir = d + "/work";
    o.layout = Layout({Tensor{"w", DType::kF32, {2}, {}}});
    return CommandTrainer::Create(o, RealClockInstance())
        ->RunRound(1, 1, global, absl::MakeSpan(updated));
  };
  auto failed = run("echo boom >&2\nexit 3");
  EXPECT_TRUE(absl::IsFailedPrecondition(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("boom"));
  auto silent = run("cp \"$SEXTANT_GLOBAL_MODEL\" \"$SEXTANT_UPDATED_MODEL\"");
  EXPECT_TRUE(absl::IsInvalidArgument(silent.status()));
  EXPECT_THAT(silent.status().message(), HasSubstr("num_examples"));
  // No weights written this round: the last round's file must not be taken for them.
  auto missing = run("echo num_examples=5");
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("wrote no model"));
  auto garbage = run("echo hello > \"$SEXTANT_UPDATED_MODEL\"\necho num_examples=5");
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status()));
  EXPECT_THAT(garbage.status().message(), HasSubstr("the client command's model is refused"));
  // A .npy where safetensors is expected is refused too.
  auto npy = run("printf '\\223NUMPY' > \"$SEXTANT_UPDATED_MODEL\"\necho num_examples=5");
  EXPECT_TRUE(absl::IsInvalidArgument(npy.status()));
}

// data: own under secure aggregation: a client's num_examples may be at most
// examples_per_client (max_examples); more is refused with the key to raise, and within the cap
// the command sees its data folder.
TEST(CommandTrainerTest, NumExamplesAboveTheSecureAggregationCapIsRefusedNamingExamplesPerClient) {
  const std::string d = Dir("cap");
  std::filesystem::create_directories(d + "/site");
  std::vector<float> global = {1, 2}, updated(2);
  auto run = [&](int examples) {
    CommandTrainerOptions o;
    o.argv = Script(d, "test \"$SEXTANT_DATA_DIR\" = " + d +
                           "/site\ncp \"$SEXTANT_GLOBAL_MODEL\" \"$SEXTANT_UPDATED_MODEL\"\n"
                           "echo num_examples=" +
                           std::to_string(examples));
    o.work_dir = d + "/work";
    o.env = {{"SEXTANT_DATA_DIR", d + "/site"}};
    o.max_examples = 20;
    o.layout = Layout({Tensor{"w", DType::kF32, {2}, {}}});
    return CommandTrainer::Create(o, RealClockInstance())
        ->RunRound(1, 1, global, absl::MakeSpan(updated));
  };
  absl::StatusOr<CommandRoundResult> within = run(20);
  ASSERT_TRUE(within.ok()) << within.status();
  EXPECT_EQ(within->num_examples, 20);
  absl::StatusOr<CommandRoundResult> above = run(30);
  EXPECT_TRUE(absl::IsInvalidArgument(above.status())) << above.status();
  EXPECT_THAT(above.status().message(), AllOf(HasSubstr("num_examples=30, more than 20"),
                                              HasSubstr("federation.examples_per_client")));
}

}  // namespace
}  // namespace sextant
