// The command client's pieces: the .npy reader/writer (checked against numpy's own bytes when
// numpy is there) and CommandTrainer running real commands.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/component.h"
#include "worker/federated/command_trainer.h"
#include "worker/federated/npy.h"

namespace sextant {
namespace {

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

TEST(CommandTrainerTest, RunsTheCommandWithTheModelFileAndReadsWeightsAndNumExamples) {
  const std::string d = Dir("copy");
  CommandTrainerOptions o;
  o.argv = Script(d,
                  "test \"$SEXTANT_ROUND\" = 3\ntest \"$SEXTANT_LR\" = 0.5\n"
                  "cp \"$SEXTANT_GLOBAL_MODEL\" \"$SEXTANT_UPDATED_MODEL\"\n"
                  "echo num_examples=42 train_loss=0.25");
  o.work_dir = d + "/work";
  o.env = {{"SEXTANT_LR", "0.5"}};
  absl::StatusOr<CommandTrainer> t = CommandTrainer::Create(o, RealClockInstance());
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<float> global = {1, -2, 3.5}, updated(3);
  absl::StatusOr<CommandRoundResult> r = t->RunRound(3, 9, global, absl::MakeSpan(updated));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_examples, 42);
  EXPECT_DOUBLE_EQ(r->train_loss, 0.25);
  EXPECT_EQ(updated, global);
}

TEST(CommandTrainerTest, NumpyCommandSeesItsShareAndItsWeightsComeBack) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy");
  const std::string d = Dir("numpy");
  std::ofstream(d + "/client.py") << R"(import os, numpy as np
w = np.load(os.environ["SEXTANT_GLOBAL_MODEL"])
x = np.load(os.environ["SEXTANT_TRAIN_X"]); y = np.load(os.environ["SEXTANT_TRAIN_Y"])
assert x.shape == (2, 3) and y.tolist() == [1.0, 0.0]
np.save(os.environ["SEXTANT_UPDATED_MODEL"], (w + x.sum()).astype(np.float32))
print(f"num_examples={len(y)}")
)";
  CommandTrainerOptions o;
  o.argv = {"/usr/bin/python3", "client.py"};
  o.working_dir = d;
  o.work_dir = d + "/work";
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
  EXPECT_FALSE(missing.ok());
  auto garbage = run("echo hello > \"$SEXTANT_UPDATED_MODEL\"\necho num_examples=5");
  EXPECT_THAT(garbage.status().message(), HasSubstr("magic"));
}

}  // namespace
}  // namespace sextant
