#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/train/cpu_backend.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace sextant::train {
namespace {

using ::testing::HasSubstr;

// A fresh, empty directory under the test's temporary directory.
std::string TempDir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = std::string(::testing::TempDir()) + "/train_" + info->name() + "_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

struct Fixture {
  Dataset train = MakeSyntheticDataset(600, 1, 0, 10, 1, 8, 8, 0.3f);
  Dataset val = MakeSyntheticDataset(200, 2, 0, 10, 1, 8, 8, 0.3f);
};

TrainerOptions SmallOptions() {
  TrainerOptions o;
  o.model.height = 8;
  o.model.width = 8;
  o.model.hidden = {32, 16};
  o.model.dropout = 0.2f;
  o.batch_size = 50;
  o.epochs = 3;
  o.seed = 7;
  o.optimizer.kind = "adam";
  o.optimizer.lr = 3e-3f;
  o.optimizer.weight_decay = 1e-4f;
  return o;
}

absl::StatusOr<TrainResult> TrainOn(const TrainerOptions& o, const Fixture& f, int threads = 2,
                                    int64_t backend_limit = 0) {
  auto backend = NewCpuBackend({.threads = threads, .memory_limit_bytes = backend_limit});
  return Train(o, f.train, f.val, backend.get());
}

TEST(TrainerTest, LearnsTheSyntheticTaskAndReportsEveryEpoch) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  std::vector<std::string> lines;
  o.fidelity_name = "round";
  o.on_epoch = [&](const EpochMetrics& m) { lines.push_back(m.Format("round")); };
  auto r = TrainOn(o, f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, TrainResult::Outcome::kCompleted);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[2], testing::MatchesRegex("round=3 train_loss=[0-9.]+ val_loss=[0-9.]+ "
                                              "val_accuracy=[0-9.]+ samples_per_sec=[0-9.]+"));
  EXPECT_EQ(r->steps, 3 * 12);
  EXPECT_LT(r->epochs[2].train_loss, r->epochs[0].train_loss);
  EXPECT_GT(r->epochs[2].val_accuracy, 0.6);  // chance is 0.1
}

TEST(TrainerTest, SameSeedAndThreadsGiveBitIdenticalWeights) {
  Fixture f;
  auto a = TrainOn(SmallOptions(), f), b = TrainOn(SmallOptions(), f);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->parameters, b->parameters);
  TrainerOptions other = SmallOptions();
  other.seed = 8;
  auto c = TrainOn(other, f);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->parameters, c->parameters);
}

TEST(TrainerTest, StopAtStepKThenResumeGivesBitIdenticalWeights) {
  Fixture f;
  for (const char* kind : {"adam", "sgd"}) {
    TrainerOptions o = SmallOptions();
    o.optimizer.kind = kind;
    o.optimizer.lr = o.optimizer.kind == "sgd" ? 0.05f : 3e-3f;
    auto straight = TrainOn(o, f);
    ASSERT_TRUE(straight.ok()) << straight.status();

    o.checkpoint_dir = TempDir(kind);
    std::atomic<bool> stop{false};
    o.stop = &stop;
    o.on_step = [&](int64_t step) {
      if (step == 17) stop = true;  // mid-epoch 2
    };
    auto first = TrainOn(o, f);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->outcome, TrainResult::Outcome::kPreempted);
    EXPECT_EQ(first->steps, 17);

    stop = false;
    auto second = TrainOn(o, f);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->outcome, TrainResult::Outcome::kCompleted);
    EXPECT_EQ(second->resumed_from_step, 17);
    EXPECT_EQ(second->parameters, straight->parameters) << kind;
    // The interrupted epoch's metrics are those of the uninterrupted run.
    ASSERT_EQ(second->epochs.size(), 2u);
    EXPECT_EQ(second->epochs[0].train_loss, straight->epochs[1].train_loss);
    EXPECT_EQ(second->epochs[1].val_loss, straight->epochs[2].val_loss);
  }
}

TEST(TrainerTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto straight = TrainOn(o, f);
  ASSERT_TRUE(straight.ok());
  o.checkpoint_dir = TempDir("ckpt");
  o.checkpoint_every_steps = 5;
  o.max_steps = 20;
  auto first = TrainOn(o, f);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->outcome, TrainResult::Outcome::kStepLimit);
  // Truncate the newest file (step 20); the one at step 15 must be used.
  const std::string newest = o.checkpoint_dir + "/ckpt-20.bin";
  ASSERT_TRUE(std::filesystem::exists(newest));
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) / 2);
  o.max_steps = 0;
  auto second = TrainOn(o, f);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->resumed_from_step, 15);
  ASSERT_FALSE(second->events.empty());
  EXPECT_EQ(second->events[0].kind, "checkpoint_skipped");
  EXPECT_EQ(second->parameters, straight->parameters);
}

TEST(TrainerTest, MemoryCapHalvesMicroBatchWithSameLossCurve) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto uncapped = TrainOn(o, f);
  ASSERT_TRUE(uncapped.ok());
  EXPECT_EQ(uncapped->micro_batch, 50);
  std::vector<std::string> events;
  o.on_event = [&](const TrainEvent& e) { events.push_back(e.Format()); };
  o.memory_cap_bytes = 60000;  // parameters ~ 40 KB with Adam state; 50 rows do not fit
  auto capped = TrainOn(o, f);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_LT(capped->micro_batch, 50);
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events[0], HasSubstr("oom micro_batch=25 reason=micro-batch_50_->_25"));
  ASSERT_EQ(capped->epochs.size(), uncapped->epochs.size());
  for (size_t e = 0; e < capped->epochs.size(); ++e) {
    EXPECT_NEAR(capped->epochs[e].train_loss, uncapped->epochs[e].train_loss,
                1e-5 * uncapped->epochs[e].train_loss);
    EXPECT_NEAR(capped->epochs[e].val_loss, uncapped->epochs[e].val_loss,
                1e-5 * uncapped->epochs[e].val_loss);
  }
  for (size_t p = 0; p < capped->parameters.size(); ++p) {
    for (size_t i = 0; i < capped->parameters[p].size(); ++i) {
      ASSERT_NEAR(capped->parameters[p][i], uncapped->parameters[p][i], 1e-4);
    }
  }
}

TEST(TrainerTest, BackendAllocationFailureAlsoHalvesTheMicroBatch) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto uncapped = TrainOn(o, f);
  std::vector<TrainEvent> events;
  o.on_event = [&](const TrainEvent& e) { events.push_back(e); };
  auto limited = TrainOn(o, f, 2, /*backend_limit=*/60000);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_LT(limited->micro_batch, 50);
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events[0].reason, HasSubstr("memory limit"));
  EXPECT_NEAR(limited->epochs.back().val_loss, uncapped->epochs.back().val_loss, 1e-4);
}

// Wraps the real CPU backend; Synchronize() fails with ResourceExhausted after any loss over
// more than `max_rows` rows, as a GPU step fails when a library cannot allocate its workspace.
class FakeOomBackend : public Backend {
 public:
  FakeOomBackend(std::unique_ptr<Backend> real, int64_t max_rows)
      : real_(std::move(real)), max_rows_(max_rows) {}
  std::string name() const override { return "fake-oom(" + real_->name() + ")"; }
  absl::StatusOr<Buffer> Allocate(int64_t r, int64_t c) override { return real_->Allocate(r, c); }
  absl::StatusOr<IntBuffer> AllocateInts(int64_t n) override { return real_->AllocateInts(n); }
  void Release(void* p) override { real_->Release(p); }
  int64_t allocated_bytes() const override { return real_->allocated_bytes(); }
  void Upload(const float* h, Tensor d) override { real_->Upload(h, d); }
  void UploadInts(const int32_t* h, IntTensor d) override { real_->UploadInts(h, d); }
  void Download(const Tensor& s, float* h) override { real_->Download(s, h); }
  void Fill(Tensor t, float v) override { real_->Fill(t, v); }
  absl::StatusOr<Tensor> Readable(const float* h, int64_t r, int64_t c, Buffer* keep) override {
    return real_->Readable(h, r, c, keep);
  }
  void GatherRows(const Tensor& t, const IntTensor& i, Tensor d) override {
    real_->GatherRows(t, i, d);
  }
  void Gemm(Transpose ta, Transpose tb, float alpha, const Tensor& a, const Tensor& b, float beta,
            Tensor c) override {
    real_->Gemm(ta, tb, alpha, a, b, beta, c);
  }
  void AddBias(Tensor x, const Tensor& b, bool relu) override { real_->AddBias(x, b, relu); }
  void ReluBackward(const Tensor& y, Tensor dy) override { real_->ReluBackward(y, dy); }
  void Dropout(Tensor x, Tensor m, float p, uint64_t k, int64_t o) override {
    real_->Dropout(x, m, p, k, o);
  }
  void Multiply(const Tensor& m, Tensor dy) override { real_->Multiply(m, dy); }
  void ColumnSum(const Tensor& dy, float beta, Tensor db) override {
    real_->ColumnSum(dy, beta, db);
  }
  LossSums SoftmaxCrossEntropy(const Tensor& l, const IntTensor& y, float s, Tensor d) override {
    failing_ = failing_ || (d.data != nullptr && l.rows > max_rows_);
    return real_->SoftmaxCrossEntropy(l, y, s, d);
  }
  void Im2Col(const Tensor& x, const ImageShape& s, int k, Tensor c) override {
    real_->Im2Col(x, s, k, c);
  }
  void Col2Im(const Tensor& c, const ImageShape& s, int k, Tensor dx) override {
    real_->Col2Im(c, s, k, dx);
  }
  void MaxPool(const Tensor& x, const ImageShape& s, Tensor y, IntTensor a) override {
    real_->MaxPool(x, s, y, a);
  }
  void MaxPoolBackward(const Tensor& dy, const IntTensor& a, Tensor dx) override {
    real_->MaxPoolBackward(dy, a, dx);
  }
  void SgdStep(Tensor w, const Tensor& g, Tensor v, const SgdHyper& h) override {
    real_->SgdStep(w, g, v, h);
  }
  void AdamStep(Tensor w, const Tensor& g, Tensor m, Tensor v, const AdamHyper& h) override {
    real_->AdamStep(w, g, m, v, h);
  }
  absl::Status Synchronize() override {
    if (!failing_) return absl::OkStatus();
    failing_ = false;
    return absl::ResourceExhaustedError("workspace allocation failed");
  }

 private:
  std::unique_ptr<Backend> real_;
  int64_t max_rows_;
  bool failing_ = false;
};

TEST(TrainerTest, ResourceExhaustedDuringAStepHalvesAndRetriesIt) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto uncapped = TrainOn(o, f);
  ASSERT_TRUE(uncapped.ok());
  std::vector<std::string> events;
  o.on_event = [&](const TrainEvent& e) { events.push_back(e.Format()); };
  FakeOomBackend backend(NewCpuBackend({.threads = 2}), /*max_rows=*/20);
  auto r = Train(o, f.train, f.val, &backend);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->micro_batch, 13);  // 50 -> 25 -> 13
  EXPECT_EQ(r->steps, uncapped->steps);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_THAT(events[1], HasSubstr("micro-batch_25_->_13:_workspace_allocation_failed"));
  for (size_t e = 0; e < r->epochs.size(); ++e) {
    EXPECT_NEAR(r->epochs[e].train_loss, uncapped->epochs[e].train_loss,
                1e-5 * uncapped->epochs[e].train_loss);
  }
}

// A backend with no room for the datasets: the trainer stages every batch through host memory
// instead, with the same result bit for bit.
class NoRoomForDataBackend : public FakeOomBackend {
 public:
  using FakeOomBackend::FakeOomBackend;
  absl::StatusOr<Tensor> Readable(const float*, int64_t r, int64_t c, Buffer*) override {
    return absl::ResourceExhaustedError(absl::StrCat("no room for ", r, " x ", c));
  }
};

TEST(TrainerTest, DatasetsThatDoNotFitTheBackendAreStagedPerBatch) {
  Fixture f;
  auto direct = TrainOn(SmallOptions(), f);
  ASSERT_TRUE(direct.ok()) << direct.status();
  NoRoomForDataBackend backend(NewCpuBackend({.threads = 2}), /*max_rows=*/1 << 30);
  auto staged = Train(SmallOptions(), f.train, f.val, &backend);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->parameters, direct->parameters);
  EXPECT_EQ(staged->epochs.back().val_loss, direct->epochs.back().val_loss);
}

TEST(TrainerTest, ResourceExhaustedAtEveryMicroBatchFailsAtOne) {
  Fixture f;
  FakeOomBackend backend(NewCpuBackend({.threads = 1}), /*max_rows=*/0);
  auto r = Train(SmallOptions(), f.train, f.val, &backend);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(),
              HasSubstr("out of memory even at micro-batch 1: workspace allocation failed"));
}

TEST(TrainerTest, OutOfMemoryAtMicroBatchOneFailsWithTheReason) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  o.memory_cap_bytes = 10000;  // smaller than the parameters themselves
  auto r = TrainOn(o, f);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("even at micro-batch 1"));
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds the cap of 10000 bytes"));
}

TEST(TrainerTest, NanLossStopsAsDivergedAfterPatience) {
  Fixture f;
  for (int64_t i = 0; i < f.train.size(); ++i) f.train.x(i, 0) = NAN;
  TrainerOptions o = SmallOptions();
  o.nan_patience = 4;
  int steps = 0;
  o.on_step = [&](int64_t) { ++steps; };
  auto r = TrainOn(o, f);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("diverged"));
  EXPECT_THAT(r.status().message(), HasSubstr("4 consecutive steps"));
  EXPECT_EQ(steps, 3);  // the fourth bad step fails before its callback
}

TEST(TrainerTest, HugeLearningRateDiverges) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 1e30f;
  auto r = TrainOn(o, f);
  EXPECT_THAT(r.status().message(), HasSubstr("diverged"));
}

TEST(TrainerTest, BadOptionsAreInvalidArgumentNamingTheField) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  o.batch_size = 0;
  auto r = TrainOn(o, f);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("batch_size"));
  o = SmallOptions();
  o.optimizer.lr = -1;
  EXPECT_THAT(TrainOn(o, f).status().message(), HasSubstr("lr"));
  o = SmallOptions();
  o.optimizer.kind = "rmsprop";
  EXPECT_THAT(TrainOn(o, f).status().message(), HasSubstr("optimizer"));
  o = SmallOptions();
  o.epochs = 0;
  EXPECT_THAT(TrainOn(o, f).status().message(), HasSubstr("epochs"));
  o = SmallOptions();
  o.model.width = 28;  // the data is 8x8
  EXPECT_THAT(TrainOn(o, f).status().message(), HasSubstr("the model expects"));
}

TEST(TrainerTest, UnwritableCheckpointDirectoryIsNamedInTheError) {
  // A path below a regular file cannot be created, even by root.
  Fixture f;
  const std::string file = TempDir("file");
  std::FILE* fp = std::fopen(file.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  std::fclose(fp);
  TrainerOptions o = SmallOptions();
  o.checkpoint_dir = file + "/ckpts";
  auto r = TrainOn(o, f);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(o.checkpoint_dir));
}

TEST(TrainerTest, CheckpointOfAnotherConfigurationIsRejected) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  o.checkpoint_dir = TempDir("ckpt");
  o.epochs = 1;
  ASSERT_TRUE(TrainOn(o, f).ok());
  o.optimizer.lr = 0.5f;
  auto r = TrainOn(o, f);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("different configuration"));
}

TEST(TrainerTest, MoreEpochsOnResumeContinuesTheSameRun) {
  // A promoted trial resumes with a larger epoch budget: 2 then 3 epochs equals 3 straight.
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto straight = TrainOn(o, f);
  o.checkpoint_dir = TempDir("ckpt");
  o.epochs = 2;
  ASSERT_TRUE(TrainOn(o, f).ok());
  o.epochs = 3;
  auto resumed = TrainOn(o, f);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->epochs.size(), 1u);
  EXPECT_EQ(resumed->epochs[0].epoch, 3);
  EXPECT_EQ(resumed->parameters, straight->parameters);
}

TEST(TrainerTest, CnnTrainsAndResumesBitIdentically) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  o.model.kind = "cnn";
  o.model.conv_channels = {4, 8};
  o.model.hidden = {16};
  o.epochs = 2;
  auto straight = TrainOn(o, f);
  ASSERT_TRUE(straight.ok()) << straight.status();
  EXPECT_LT(straight->epochs[1].train_loss, straight->epochs[0].train_loss);
  o.checkpoint_dir = TempDir("ckpt");
  o.max_steps = 7;
  ASSERT_TRUE(TrainOn(o, f).ok());
  o.max_steps = 0;
  auto resumed = TrainOn(o, f);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->parameters, straight->parameters);
}

// A host-side all-reduce for CPU replicas: the same contract as the NCCL one.
absl::Status SumOnHost(const std::vector<Backend*>& backends,
                       const std::vector<std::vector<Tensor>>& grads) {
  for (size_t i = 0; i < grads[0].size(); ++i) {
    std::vector<float> sum(grads[0][i].size(), 0.0f), part(sum.size());
    for (size_t r = 0; r < grads.size(); ++r) {
      backends[r]->Download(grads[r][i], part.data());
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += part[j];
    }
    for (size_t r = 0; r < grads.size(); ++r) backends[r]->Upload(sum.data(), grads[r][i]);
  }
  return absl::OkStatus();
}

TEST(TrainerTest, DataParallelReplicasTrainLikeOneBackend) {
  Fixture f;
  for (const char* optimizer : {"adam", "sgd"}) {
    TrainerOptions o = SmallOptions();
    o.optimizer.kind = optimizer;
    o.optimizer.lr = std::string(optimizer) == "sgd" ? 0.05f : 3e-3f;
    auto single = TrainOn(o, f, 1);
    ASSERT_TRUE(single.ok()) << single.status();
    // Three replicas, the batch of 50 split 16/17/17: same masks, same examples, same updates.
    auto b0 = NewCpuBackend({.threads = 1}), b1 = NewCpuBackend({.threads = 1}),
         b2 = NewCpuBackend({.threads = 1});
    std::vector<Backend*> all = {b0.get(), b1.get(), b2.get()};
    o.replicas = {b1.get(), b2.get()};
    o.all_reduce_sum = [&](const std::vector<std::vector<Tensor>>& g) { return SumOnHost(all, g); };
    auto parallel = Train(o, f.train, f.val, b0.get());
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    ASSERT_EQ(parallel->steps, single->steps);
    // Partial sums added in another order: equal up to float rounding.
    double worst = 0;
    for (size_t i = 0; i < single->parameters.size(); ++i) {
      for (size_t j = 0; j < single->parameters[i].size(); ++j) {
        worst = std::max(worst,
                         std::fabs(double{parallel->parameters[i][j]} - single->parameters[i][j]));
      }
    }
    EXPECT_LT(worst, 1e-4) << optimizer;
    EXPECT_NEAR(parallel->epochs.back().val_accuracy, single->epochs.back().val_accuracy, 0.01);
    EXPECT_GT(parallel->epochs.back().val_accuracy, 0.5);
  }
}

TEST(TrainerTest, DataParallelWithoutAllReduceIsRejected) {
  Fixture f;
  TrainerOptions o = SmallOptions();
  auto b0 = NewCpuBackend({.threads = 1}), b1 = NewCpuBackend({.threads = 1});
  o.replicas = {b1.get()};
  auto r = Train(o, f.train, f.val, b0.get());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("all_reduce_sum"));
}

}  // namespace
}  // namespace sextant::train
