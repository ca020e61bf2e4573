// The global model's history on disk (orchestrator/federated/model_history.h): what a round
// commits is what a resumed run reads back, and only the latest round models are kept.
#include "orchestrator/federated/model_history.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

class ModelHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("model-history");
    store_ = *Store::Open(dir_ + "/state.db", true);
    rounds_.emplace(*RoundsTable::Open(dir_ + "/state.db"));
  }

  // A model of four values, w[2] b[2], at `values`.
  static absl::Status Fill(GlobalModel& model, std::vector<float> values) {
    TensorFile layout;
    layout.tensors = {Tensor{"w", DType::kF32, {2}, {}}, Tensor{"b", DType::kF32, {2}, {}}};
    return model.Adopt(values, layout);
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::optional<RoundsTable> rounds_;
};

TEST_F(ModelHistoryTest, ACommittedRoundIsWhatTheNextSessionRestores) {
  {
    GlobalModel model(dir_ + "/fed");
    ASSERT_TRUE(Fill(model, {1, 2, 3, 4}).ok());
    auto optimizer = NewFedAvgOptimizer({1.0});
    ModelHistory history(&model, optimizer.get(), &*rounds_, store_.get(), dir_ + "/ckpt",
                         dir_ + "/model");
    for (int64_t round = 1; round <= 5; ++round) {
      model.values()[0] = static_cast<float>(round);
      ASSERT_TRUE(history.Commit(round, {{round, "", 0.5, 0.7, 3, 0, std::nullopt, 1.0}}).ok());
    }
    ASSERT_TRUE(history.WriteFinal().ok());
  }
  // Only the latest kRoundModelsKept round models stay, beside the final one.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/model/round-0002.safetensors"));
  for (const char* kept :
       {"round-0003.safetensors", "round-0005.safetensors", "final.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/model/" + kept)) << kept;
  }
  EXPECT_TRUE(std::filesystem::equivalent(**store_->GetMeta("model_file"),
                                          dir_ + "/model/final.safetensors"));
  // A new session's model, reset, reads round 5 back.
  GlobalModel model(dir_ + "/fed");
  ASSERT_TRUE(Fill(model, {0, 0, 0, 0}).ok());
  auto optimizer = NewFedAvgOptimizer({1.0});
  ModelHistory history(&model, optimizer.get(), &*rounds_, store_.get(), dir_ + "/ckpt",
                       dir_ + "/model");
  absl::StatusOr<ModelHistory::Restored> r = history.Restore();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->round, 5);
  ASSERT_EQ(r->rows.size(), 1u);
  EXPECT_EQ(r->rows[0].clients, 3);
  EXPECT_EQ(std::vector<float>(model.values().begin(), model.values().end()),
            (std::vector<float>{5, 2, 3, 4}));
  EXPECT_EQ(rounds_->Load()->size(), 5u);
}

TEST_F(ModelHistoryTest, NoCheckpointRestoresRoundZero) {
  GlobalModel model(dir_ + "/fed");
  ASSERT_TRUE(Fill(model, {1, 2, 3, 4}).ok());
  auto optimizer = NewFedAvgOptimizer({1.0});
  ModelHistory history(&model, optimizer.get(), &*rounds_, store_.get(), dir_ + "/ckpt",
                       dir_ + "/model");
  absl::StatusOr<ModelHistory::Restored> r = history.Restore();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->round, 0);
  EXPECT_EQ(model.values()[0], 1);
}

}  // namespace
}  // namespace sextant
