// End to end: `sextant run` on a model of the user's own (federation.model.file, safetensors with
// bf16, f16 and f32 tensors) trained by a python client_command, with real processes on loopback.
// The command moves every value by a known step, so the final model file is known exactly; an
// update with a renamed tensor is refused and the round goes on.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensors/safetensors.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using sextant::testing::QueryRows;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Tensor Named(std::string name, DType dtype, std::vector<int64_t> shape,
             const std::vector<float>& values) {
  Tensor t{std::move(name), dtype, std::move(shape), {}};
  EXPECT_TRUE(t.SetFromF32(values).ok());
  return t;
}

// The starting model: one tensor of each dtype.
TensorFile InitialModel() {
  TensorFile init;
  init.tensors.push_back(Named("encoder.weight", DType::kBF16, {2, 3}, {1, 2, 3, 4, 5, 6}));
  init.tensors.push_back(Named("encoder.bias", DType::kF16, {3}, {0.5f, -0.5f, 0}));
  init.tensors.push_back(Named("head.scale", DType::kF32, {}, {10}));
  return init;
}

// Writes models/init.safetensors and client.py into dir. Each client moves each tensor by its
// own step (exact in every dtype) and reports its own evaluation of the model it received:
// FedAvg with server_lr 1 moves the global model by the same steps each round. `extra` runs
// before the model is written (with `moved`, `kinds` and `env` in scope).
void WriteModelAndClient(const std::string& dir, const std::string& extra = "") {
  std::filesystem::create_directories(dir + "/models");
  ASSERT_TRUE(WriteSafetensors(dir + "/models/init.safetensors", InitialModel()).ok());
  std::ofstream(dir + "/client.py") << "import os, sys, time\nsys.path.insert(0, '"
                                    << SEXTANT_SOURCE_DIR << "/clients/python/sextant')\n"
                                    << R"(import model_file
env = os.environ
tensors, kinds = model_file.read(env["SEXTANT_GLOBAL_MODEL"])
step = {"encoder.weight": 1.0, "encoder.bias": -0.25, "head.scale": 0.5}
moved = {k: v.astype("float32") + step[k] for k, v in tensors.items()}
)" << extra << R"(model_file.write(env["SEXTANT_UPDATED_MODEL"], moved, kinds)
print("num_examples=10 train_loss=0.1 eval_loss=0.5 eval_accuracy=0.625")
)";
}

std::string Experiment(const std::string& name, int rounds, int min_clients,
                       const std::string& deadline) {
  return "name: " + name + R"(
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions: [{name: east, clients: 2}]
  rounds: )" +
         std::to_string(rounds) +
         R"(
  min_clients: )" +
         std::to_string(min_clients) +
         R"(
  round_deadline: )" +
         deadline +
         R"(
  seed: 1
  secure_aggregation: false
  client_command: [/usr/bin/python3, client.py]
  model: {file: models/init.safetensors}
)";
}

bool HasNumpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

TEST(FederatedOwnModelTest, TwoRoundsOnASafetensorsModelEndInTheModelTheCommandsMoved) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the client command");
  const std::string dir = ::testing::TempDir() + "/fl-own-model";
  std::filesystem::remove_all(dir);
  // In round 2 client east/1 renames a tensor: its update is refused, and the round closes at
  // its deadline with east/0's alone.
  WriteModelAndClient(dir,
                      R"(if env["SEXTANT_CLIENT_ID"] == "east/1" and env["SEXTANT_ROUND"] == "2":
    moved["head.gain"] = moved.pop("head.scale"); kinds["head.gain"] = "F32"
)");
  const TensorFile init = InitialModel();
  std::ofstream(dir + "/exp.yaml") << Experiment("fl-own-model", 2, 1, "3s");
  const std::string bin = SEXTANT_BIN_DIR;
  const int rc = std::system((bin + "/sextant run " + dir + "/exp.yaml --run-dir " + dir +
                              "/run > " + dir + "/out.txt 2>&1")
                                 .c_str());
  ASSERT_EQ(WEXITSTATUS(rc), 0) << Read(dir + "/out.txt")
                                << Read(dir + "/run/logs/client-east-0.log");
  absl::StatusOr<TensorFile> final_model = ReadSafetensors(dir + "/run/model/final.safetensors");
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_TRUE(CheckSameLayout(*final_model, init).ok());
  ASSERT_EQ(final_model->tensors.size(), 3u);
  EXPECT_EQ(final_model->tensors[0].name, "encoder.weight");
  EXPECT_THAT(*final_model->tensors[0].ToF32(), ElementsAre(3, 4, 5, 6, 7, 8));
  EXPECT_THAT(*final_model->tensors[1].ToF32(), ElementsAre(0, -1, -0.5f));
  EXPECT_THAT(*final_model->tensors[2].ToF32(), ElementsAre(11));
  // Every completed round left its model; round 1's is one step from the start.
  absl::StatusOr<TensorFile> round1 = ReadSafetensors(dir + "/run/model/round-0001.safetensors");
  ASSERT_TRUE(round1.ok()) << round1.status();
  EXPECT_THAT(*round1->tensors[0].ToF32(), ElementsAre(2, 3, 4, 5, 6, 7));
  EXPECT_TRUE(std::filesystem::exists(dir + "/run/model/round-0002.safetensors"));
  // The renamed tensor was refused by name in the client's log, and the round went on.
  const std::string log = Read(dir + "/run/logs/client-east-1.log");
  EXPECT_NE(log.find("round=2 skipped"), std::string::npos) << log;
  EXPECT_NE(log.find("tensor \"head.gain\" is not in the global model (renamed from "
                     "\"head.scale\"?)"),
            std::string::npos)
      << log;
  // No evaluator: the rounds' global accuracy is the clients' own evaluation.
  const auto rounds = QueryRows(dir + "/run/state.db",
                                "SELECT round, accuracy, clients FROM rounds WHERE region = '' "
                                "ORDER BY round");
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[1][1], "0.625");
  EXPECT_EQ(rounds[1][2], "1");
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/logs/evaluator.log"));
  // `results` names the final model file.
  ASSERT_EQ(std::system((bin + "/sextant results " + dir + "/run --format json > " + dir +
                         "/results.json 2>&1")
                            .c_str()),
            0);
  const std::string results = Read(dir + "/results.json");
  EXPECT_NE(results.find("\"model_file\""), std::string::npos) << results;
  EXPECT_NE(results.find("/run/model/final.safetensors\""), std::string::npos) << results;
}

// SIGKILL of the orchestrator once round 1 is listed; `sextant resume` starts from the
// checkpointed model (not from the file again) and ends in the model every round moved, with
// the clients' score as the run's value.
TEST(FederatedOwnModelTest, ResumeAfterAKillContinuesFromTheCheckpointedModel) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the client command");
  const std::string dir = ::testing::TempDir() + "/fl-own-model-resume";
  std::filesystem::remove_all(dir);
  WriteModelAndClient(dir, "time.sleep(0.5)\n");  // rounds slow enough to kill in between
  std::ofstream(dir + "/exp.yaml") << Experiment("fl-own-resume", 4, 2, "60s");
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string db = dir + "/run/state.db";
  sextant::testing::BackgroundProcess run(
      {bin + "/sextant", "run", dir + "/exp.yaml", "--run-dir", dir + "/run"});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (QueryRows(db, "SELECT round FROM rounds WHERE region = ''").empty() &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.Signal(SIGKILL);
  run.Wait(30);
  const auto listed = QueryRows(db, "SELECT MAX(round) FROM rounds WHERE region = ''");
  ASSERT_EQ(listed.size(), 1u) << run.out() << run.err();
  ASSERT_LT(std::stoi(listed[0][0]), 4) << "the run finished before it was killed";
  sextant::testing::BackgroundProcess resumed({bin + "/sextant", "resume", dir + "/run"});
  ASSERT_EQ(resumed.Wait(180), 0) << resumed.out() << resumed.err();
  EXPECT_NE(resumed.out().find("resuming after round"), std::string::npos)
      << resumed.out() << resumed.err();
  absl::StatusOr<TensorFile> final_model = ReadSafetensors(dir + "/run/model/final.safetensors");
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_THAT(*final_model->tensors[0].ToF32(), ElementsAre(5, 6, 7, 8, 9, 10));
  EXPECT_THAT(*final_model->tensors[1].ToF32(), ElementsAre(-0.5f, -1.5f, -1));
  EXPECT_THAT(*final_model->tensors[2].ToF32(), ElementsAre(12));
  EXPECT_EQ(QueryRows(db, "SELECT COUNT(*) FROM rounds WHERE region = ''")[0][0], "4");
  EXPECT_EQ(QueryRows(db, "SELECT value FROM trials WHERE id = 1")[0][0], "0.625");
}

// data: own. Two sites hold their own data (x.txt: 10 ones at east/0, 30 fours at east/1) in
// sites/east-N beside the experiment. Each client's command reads its site's file from
// SEXTANT_DATA_DIR, moves every value of the model by its data's mean and reports its rows as
// num_examples, so FedAvg moves the model by (10 * 1 + 30 * 4) / 40 = 3.25 a round (the
// unweighted mean would be 2.5). Its own evaluation: accuracy 0.5 at east/0, 0.9 at east/1.
// `evaluate` is the evaluate_command script's body (after `w`, `rnd` and `env` are set).
void WriteOwnDataRun(const std::string& dir, const std::string& evaluate) {
  std::filesystem::create_directories(dir + "/models");
  TensorFile init;
  init.tensors.push_back(Named("w", DType::kF32, {3}, {0, 0, 0}));
  ASSERT_TRUE(WriteSafetensors(dir + "/models/init.safetensors", init).ok());
  for (const auto& [site, rows] :
       {std::pair{"east-0", std::string(10, '1')}, std::pair{"east-1", std::string(30, '4')}}) {
    std::filesystem::create_directories(dir + "/sites/" + site);
    std::ofstream x(dir + "/sites/" + site + "/x.txt");
    for (char c : rows) x << c << "\n";
  }
  const std::string helper =
      std::string("import os, sys\nsys.path.insert(0, '") + SEXTANT_SOURCE_DIR +
      "/clients/python/sextant')\nimport numpy as np\nimport model_file\nenv = os.environ\n";
  std::ofstream(dir + "/client.py") << helper << R"(
assert "SEXTANT_TRAIN_X" not in env, "a Fashion-MNIST share was written"
x = np.loadtxt(os.path.join(env["SEXTANT_DATA_DIR"], "x.txt"), ndmin=1)
tensors, kinds = model_file.read(env["SEXTANT_GLOBAL_MODEL"])
moved = {k: v + np.float32(x.mean()) for k, v in tensors.items()}
model_file.write(env["SEXTANT_UPDATED_MODEL"], moved, kinds)
print(f"num_examples={len(x)} eval_loss=1.0 eval_accuracy={0.5 if len(x) == 10 else 0.9}")
)";
  std::ofstream(dir + "/evaluate.py") << helper << R"(
w = model_file.read(env["SEXTANT_GLOBAL_MODEL"])[0]["w"]
rnd = int(env["SEXTANT_ROUND"])
)" << evaluate;
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-own-data
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 2
  min_clients: 2
  seed: 1
  secure_aggregation: false
  data: own
  data_dir: sites/{region}-{index}
  client_command: [/usr/bin/python3, client.py]
  evaluate_command: [/usr/bin/python3, evaluate.py]
  model: {file: models/init.safetensors}
)";
}

// Runs `sextant run` on dir/exp.yaml; its exit code.
int RunExperiment(const std::string& dir) {
  const int rc = std::system((std::string(SEXTANT_BIN_DIR) + "/sextant run " + dir +
                              "/exp.yaml --run-dir " + dir + "/run > " + dir + "/out.txt 2>&1")
                                 .c_str());
  return WEXITSTATUS(rc);
}

TEST(FederatedOwnDataTest, ClientsReadTheirOwnDataDirsAndTheirNumExamplesWeighTheMean) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the client command");
  const std::string dir = ::testing::TempDir() + "/fl-own-data";
  std::filesystem::remove_all(dir);
  // The orchestrator's own validation: a file beside the experiment (the command's cwd).
  WriteOwnDataRun(dir, R"(
scale = float(open("validation.txt").read())
print(f"eval_loss={float(w.mean())} eval_accuracy={scale * rnd} eval_examples=100")
)");
  std::ofstream(dir + "/validation.txt") << "0.25\n";
  ASSERT_EQ(RunExperiment(dir), 0)
      << Read(dir + "/out.txt") << Read(dir + "/run/logs/client-east-1.log");
  absl::StatusOr<TensorFile> final_model = ReadSafetensors(dir + "/run/model/final.safetensors");
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_THAT(*final_model->tensors[0].ToF32(), ElementsAre(6.5f, 6.5f, 6.5f));
  // Each client was given its own folder and reported its own rows.
  EXPECT_NE(Read(dir + "/run/logs/client-east-1.log").find("examples=30"), std::string::npos)
      << Read(dir + "/run/logs/client-east-1.log");
  // The rounds' global metrics are evaluate_command's, on the model after that round.
  EXPECT_EQ(QueryRows(dir + "/run/state.db",
                      "SELECT round, accuracy, loss, clients FROM rounds WHERE region = '' "
                      "ORDER BY round"),
            (std::vector<std::vector<std::string>>{{"1", "0.25", "3.25", "2"},
                                                   {"2", "0.5", "6.5", "2"}}));
  EXPECT_THAT(
      QueryRows(dir + "/run/state.db", "SELECT kind FROM events WHERE kind = 'evaluate_failed'"),
      ::testing::IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/logs/evaluator.log"));
}

TEST(FederatedOwnDataTest, AFailingOrMalformedEvaluateCommandIsReportedAndTheClientsMetricsStand) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the client command");
  const std::string dir = ::testing::TempDir() + "/fl-own-data-bad-eval";
  std::filesystem::remove_all(dir);
  // Round 1: exits 3; round 2: prints prose instead of its scores.
  WriteOwnDataRun(dir, R"(
if rnd == 1:
    print("no validation set here", file=sys.stderr); sys.exit(3)
print("accuracy looks great")
)");
  ASSERT_EQ(RunExperiment(dir), 0) << Read(dir + "/out.txt");
  const auto failures = QueryRows(dir + "/run/state.db",
                                  "SELECT message FROM events WHERE kind = 'evaluate_failed' "
                                  "ORDER BY id");
  ASSERT_EQ(failures.size(), 2u) << Read(dir + "/out.txt");
  const std::string command = "evaluate_command [/usr/bin/python3 evaluate.py]";
  EXPECT_THAT(failures[0][0], AllOf(HasSubstr("round 1: " + command + " exited with status 3"),
                                    HasSubstr("no validation set here")));
  EXPECT_THAT(failures[1][0], AllOf(HasSubstr("round 2: " + command + " printed no eval_loss=X"),
                                    HasSubstr("'accuracy looks great'")));
  EXPECT_THAT(Read(dir + "/out.txt"), HasSubstr(command + " exited with status 3"));
  // The rounds fell back to the clients' evaluations weighted by their examples:
  // (10 * 0.5 + 30 * 0.9) / 40.
  const auto rounds = QueryRows(dir + "/run/state.db",
                                "SELECT accuracy FROM rounds WHERE region = '' ORDER BY round");
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_NEAR(std::stod(rounds[0][0]), 0.8, 1e-9);
  EXPECT_NEAR(std::stod(rounds[1][0]), 0.8, 1e-9);
}

}  // namespace
}  // namespace sextant
