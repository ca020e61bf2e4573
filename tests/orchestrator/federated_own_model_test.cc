// End to end: `sextant run` on a model of the user's own (federation.model.file, safetensors with
// bf16, f16 and f32 tensors) trained by a python client_command, with real processes on loopback.
// The command moves every value by a known step, so the final model file is known exactly; an
// update with a renamed tensor is refused and the round goes on.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensors/safetensors.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;

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

// The global rows of the rounds table: round and accuracy.
std::vector<std::pair<int, double>> GlobalRounds(const std::string& db_path) {
  std::vector<std::pair<int, double>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db,
                           "SELECT round, accuracy FROM rounds WHERE region = '' ORDER BY round",
                           -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        rows.emplace_back(sqlite3_column_int(st, 0), sqlite3_column_double(st, 1));
      }
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return rows;
}

bool HasNumpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

TEST(FederatedOwnModelTest, TwoRoundsOnASafetensorsModelEndInTheModelTheCommandsMoved) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "no numpy for the client command");
  const std::string dir = testing::TempDir() + "/fl-own-model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/models");
  TensorFile init;
  init.tensors.push_back(Named("encoder.weight", DType::kBF16, {2, 3}, {1, 2, 3, 4, 5, 6}));
  init.tensors.push_back(Named("encoder.bias", DType::kF16, {3}, {0.5f, -0.5f, 0}));
  init.tensors.push_back(Named("head.scale", DType::kF32, {}, {10}));
  ASSERT_TRUE(WriteSafetensors(dir + "/models/init.safetensors", init).ok());
  // Each client moves each tensor by its own step (exact in every dtype) and reports its own
  // evaluation of the model it received: FedAvg with server_lr 1 moves the global model by the
  // same steps each round. In round 2 client east/1 renames a tensor: its update is refused, and
  // the round closes at its deadline with east/0's alone.
  std::ofstream(dir + "/client.py") << "import os, sys\nsys.path.insert(0, '" << SEXTANT_SOURCE_DIR
                                    << "/clients/python/sextant')\n"
                                    << R"(import model_file
env = os.environ
tensors, kinds = model_file.read(env["SEXTANT_GLOBAL_MODEL"])
step = {"encoder.weight": 1.0, "encoder.bias": -0.25, "head.scale": 0.5}
moved = {k: v.astype("float32") + step[k] for k, v in tensors.items()}
if env["SEXTANT_CLIENT_ID"] == "east/1" and env["SEXTANT_ROUND"] == "2":
    moved["head.gain"] = moved.pop("head.scale"); kinds["head.gain"] = "F32"
model_file.write(env["SEXTANT_UPDATED_MODEL"], moved, kinds)
print("num_examples=10 train_loss=0.1 eval_loss=0.5 eval_accuracy=0.625")
)";
  std::ofstream(dir + "/exp.yaml") << R"(name: fl-own-model
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 2
  min_clients: 1
  round_deadline: 3s
  seed: 1
  secure_aggregation: false
  client_command: [/usr/bin/python3, client.py]
  model: {file: models/init.safetensors}
)";
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
  const auto rounds = GlobalRounds(dir + "/run/state.db");
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_DOUBLE_EQ(rounds[1].second, 0.625);
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

}  // namespace
}  // namespace sextant
