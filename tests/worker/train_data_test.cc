#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "common/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/component.h"
#include "worker/train/dataset.h"
#include "worker/train/idx_reader.h"

namespace sextant::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("sextant-train-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string IdxBytes(std::vector<uint32_t> dims, size_t payload, uint8_t type = 0x08) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((d >> (8 * i)) & 0xff));
  }
  for (size_t i = 0; i < payload; ++i) s.push_back(static_cast<char>(i % 7));
  return s;
}

void WriteFile(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

TEST(IdxReaderTest, ReadsGzipAndPlainFiles) {
  TempDir dir;
  WriteFile(dir.Path("a.gz"), IdxBytes({2, 3, 4}, 24), true);
  WriteFile(dir.Path("b"), IdxBytes({5}, 5), false);
  auto a = ReadIdx(dir.Path("a.gz"), 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a->data.size(), 24u);
  EXPECT_EQ(a->data[8], 1);
  auto b = ReadIdx(dir.Path("b"), 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data.size(), 5u);
}

TEST(IdxReaderTest, RejectsBadMagicRankTypeAndSize) {
  TempDir dir;
  std::string bad_magic = IdxBytes({4}, 4);
  bad_magic[0] = 1;
  WriteFile(dir.Path("magic"), bad_magic, false);
  WriteFile(dir.Path("rank"), IdxBytes({2, 2}, 4), false);
  WriteFile(dir.Path("type"), IdxBytes({4}, 4, 0x0d), false);
  WriteFile(dir.Path("short"), IdxBytes({2, 3, 4}, 23), true);
  WriteFile(dir.Path("long"), IdxBytes({4}, 5), false);
  WriteFile(dir.Path("zero"), IdxBytes({0}, 0), false);
  EXPECT_THAT(ReadIdx(dir.Path("magic"), 1).status().message(), HasSubstr("bad magic"));
  EXPECT_THAT(ReadIdx(dir.Path("rank"), 1).status().message(), HasSubstr("rank 2, expected 1"));
  EXPECT_THAT(ReadIdx(dir.Path("type"), 1).status().message(), HasSubstr("not unsigned byte"));
  EXPECT_THAT(ReadIdx(dir.Path("short"), 3).status().message(), HasSubstr("24 bytes"));
  EXPECT_THAT(ReadIdx(dir.Path("long"), 1).status().message(), HasSubstr("file has 5"));
  EXPECT_THAT(ReadIdx(dir.Path("zero"), 1).status().message(), HasSubstr("dimension 0 is 0"));
  EXPECT_EQ(ReadIdx(dir.Path("missing"), 1).status().code(), absl::StatusCode::kNotFound);
  for (const char* f : {"magic", "rank", "short"}) {
    EXPECT_THAT(ReadIdx(dir.Path(f), 3).status().message(), HasSubstr(dir.Path(f)));
  }
}

TEST(IdxReaderTest, DetectsATruncatedGzipStream) {
  TempDir dir;
  WriteFile(dir.Path("full.gz"), IdxBytes({100, 28, 28}, 78400), true);
  std::string gz;
  {
    std::ifstream in(dir.Path("full.gz"), std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  WriteFile(dir.Path("cut.gz"), gz.substr(0, gz.size() / 2), false);
  auto r = ReadIdx(dir.Path("cut.gz"), 3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

TEST(FashionMnistTest, MissingDirectoryNamesThePackageAndCommand) {
  auto r = LoadFashionMnist("/nonexistent/fashion-mnist");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("apt-get install dataset-fashion-mnist"));
}

TEST(FashionMnistTest, WrongImageDimensionsAreNamed) {
  TempDir dir;
  WriteFile(dir.Path("train-images-idx3-ubyte.gz"), IdxBytes({3, 32, 32}, 3 * 32 * 32), true);
  WriteFile(dir.Path("train-labels-idx1-ubyte.gz"), IdxBytes({3}, 3), true);
  WriteFile(dir.Path("t10k-images-idx3-ubyte.gz"), IdxBytes({3, 32, 32}, 3 * 32 * 32), true);
  WriteFile(dir.Path("t10k-labels-idx1-ubyte.gz"), IdxBytes({3}, 3), true);
  auto r = LoadFashionMnist(dir.path(), 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("32x32, expected 28x28"));
}

TEST(FashionMnistTest, LoadsTheRealPackageWithADeterministicSplit) {
  SEXTANT_REQUIRE_COMPONENT(fs::exists(kFashionMnistDir), "dataset-fashion-mnist is not installed");
  auto a = LoadFashionMnist(kFashionMnistDir, 10000, 7);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->train.size(), 50000);
  EXPECT_EQ(a->validation.size(), 10000);
  EXPECT_EQ(a->test.size(), 10000);
  const Dataset train = a->train.All();
  EXPECT_EQ(train.x.cols(), 784);
  EXPECT_GE(train.x.minCoeff(), 0.0f);
  EXPECT_LE(train.x.maxCoeff(), 1.0f);
  EXPECT_EQ(train.x.maxCoeff(), 1.0f) << "a byte of 255 is 1";
  // A subset is those examples of the whole, in the order asked for.
  const Dataset some = a->train.Subset({49999, 0, 17});
  EXPECT_TRUE(some.x.row(0) == train.x.row(49999));
  EXPECT_TRUE(some.x.row(1) == train.x.row(0));
  EXPECT_TRUE(some.x.row(2) == train.x.row(17));
  EXPECT_EQ(some.y, (std::vector<int32_t>{train.y[49999], train.y[0], train.y[17]}));
  std::vector<int> counts(10);
  for (int32_t y : a->validation.y) counts[y]++;
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);  // a uniform split of balanced classes
  auto b = LoadFashionMnist(kFashionMnistDir, 10000, 7);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->validation.y, b->validation.y);
  EXPECT_TRUE(a->validation.x == b->validation.x);
  auto c = LoadFashionMnist(kFashionMnistDir, 10000, 8);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(a->validation.x == c->validation.x);
}

std::vector<int64_t> Flatten(const std::vector<std::vector<int64_t>>& parts) {
  std::vector<int64_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  std::sort(all.begin(), all.end());
  return all;
}

TEST(PartitionTest, IidCoversEveryExampleOnceWithBalancedSizes) {
  auto parts = PartitionIid(103, 10, 5);
  ASSERT_TRUE(parts.ok());
  std::vector<int64_t> expect(103);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(Flatten(*parts), expect);
  for (const auto& p : *parts) EXPECT_TRUE(p.size() == 10 || p.size() == 11);
  EXPECT_EQ(*PartitionIid(103, 10, 5), *parts);
  EXPECT_NE(*PartitionIid(103, 10, 6), *parts);
  EXPECT_FALSE(PartitionIid(3, 4, 1).ok());
  EXPECT_FALSE(PartitionIid(3, 0, 1).ok());
}

// Label skew: the mean over clients of the largest class share.
double MeanMaxClassShare(const std::vector<std::vector<int64_t>>& parts,
                         const std::vector<int32_t>& labels) {
  double total = 0;
  for (const auto& p : parts) {
    std::vector<int> counts(10);
    for (int64_t i : p) counts[labels[i]]++;
    total += *std::max_element(counts.begin(), counts.end()) / static_cast<double>(p.size());
  }
  return total / static_cast<double>(parts.size());
}

TEST(PartitionTest, DirichletIsDeterministicCompleteAndSkewedBySmallAlpha) {
  std::vector<int32_t> labels(5000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 10);
  auto skewed = PartitionDirichlet(labels, 10, 20, 0.1, 3);
  auto mild = PartitionDirichlet(labels, 10, 20, 100.0, 3);
  ASSERT_TRUE(skewed.ok()) << skewed.status();
  ASSERT_TRUE(mild.ok()) << mild.status();
  std::vector<int64_t> expect(5000);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(Flatten(*skewed), expect);
  EXPECT_EQ(Flatten(*mild), expect);
  for (const auto& p : *skewed) EXPECT_FALSE(p.empty());
  EXPECT_EQ(*PartitionDirichlet(labels, 10, 20, 0.1, 3), *skewed);
  EXPECT_GT(MeanMaxClassShare(*skewed, labels), 0.5);
  EXPECT_LT(MeanMaxClassShare(*mild, labels), 0.2);
  EXPECT_FALSE(PartitionDirichlet(labels, 10, 20, 0.0, 3).ok());
  EXPECT_FALSE(PartitionDirichlet(labels, 10, 0, 1.0, 3).ok());
  labels[0] = 12;
  EXPECT_THAT(PartitionDirichlet(labels, 10, 2, 1.0, 3).status().message(), HasSubstr("label 12"));
}

TEST(CheckpointTest, RoundTripsThePayloadAndKeepsTheNewestTwo) {
  TempDir dir;
  for (int64_t step : {10, 20, 30}) {
    auto p = WriteCheckpoint(dir.path(), step, "payload-" + std::to_string(step));
    ASSERT_TRUE(p.ok()) << p.status();
  }
  auto c = LoadLatestCheckpoint(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 30);
  EXPECT_EQ(c->payload, "payload-30");
  EXPECT_TRUE(c->skipped.empty());
  EXPECT_FALSE(fs::exists(dir.Path("ckpt-10.bin")));
  EXPECT_TRUE(fs::exists(dir.Path("ckpt-20.bin")));
}

// A payload written in pieces (a large model's view among them) is the same file, byte for
// byte, as the joined payload, and loads back joined.
TEST(CheckpointTest, APayloadInPiecesIsTheSameFileAsTheJoinedPayload) {
  TempDir joined, pieces;
  const std::string head = "head", model(300000, 'm'), tail = "tail";
  ASSERT_TRUE(WriteCheckpoint(joined.path(), 7, head + model + tail).ok());
  const absl::string_view parts[] = {head, model, "", tail};
  ASSERT_TRUE(WriteCheckpoint(pieces.path(), 7, parts).ok());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(pieces.Path("ckpt-7.bin")), slurp(joined.Path("ckpt-7.bin")));
  auto c = LoadLatestCheckpoint(pieces.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->payload, head + model + tail);
}

TEST(CheckpointTest, CorruptOrTruncatedNewestFallsBackToThePrevious) {
  TempDir dir;
  std::string big(100000, 'x');
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 1, big + "1").ok());
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 2, big + "2").ok());
  {  // flip one payload byte of the newest
    std::fstream f(dir.Path("ckpt-2.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('y');
  }
  auto c = LoadLatestCheckpoint(dir.path());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->step, 1);
  ASSERT_EQ(c->skipped.size(), 1u);
  EXPECT_THAT(c->skipped[0], HasSubstr("checksum mismatch"));
  fs::resize_file(dir.Path("ckpt-1.bin"), 3000);
  auto none = LoadLatestCheckpoint(dir.path());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("truncated"));
}

TEST(CheckpointTest, UnwritableDirectoryIsNamed) {
  if (::geteuid() == 0) {
    // Root ignores permission bits; a path under a regular file cannot be a directory for anyone.
    TempDir dir;
    std::ofstream(dir.Path("file")) << "x";
    auto r = WriteCheckpoint(dir.Path("file/sub"), 1, "p");
    EXPECT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr(dir.Path("file/sub")));
    return;
  }
  TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  auto r = WriteCheckpoint(dir.path(), 1, "p");
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("not writable"));
}

TEST(ByteReaderTest, RejectsAShapeMismatchAndShortPayload) {
  ByteWriter w;
  std::vector<float> v = {1, 2, 3};
  w.I64(-5);
  w.F64(0.25);
  w.Floats(v.data(), 3);
  w.Bytes("rng");
  ByteReader r(w.str());
  EXPECT_EQ(*r.I64(), -5);
  EXPECT_EQ(*r.F64(), 0.25);
  std::vector<float> out(3);
  ASSERT_TRUE(r.Floats(out.data(), 3).ok());
  EXPECT_EQ(out, v);
  EXPECT_EQ(*r.Bytes(), "rng");
  EXPECT_TRUE(r.done());
  ByteReader mismatch(w.str());
  (void)mismatch.I64();
  (void)mismatch.F64();
  EXPECT_THAT(mismatch.Floats(out.data(), 4).message(), HasSubstr("4 were expected"));
  std::string cut = w.str().substr(0, 20);
  ByteReader short_reader(cut);
  (void)short_reader.I64();
  (void)short_reader.F64();
  EXPECT_EQ(short_reader.Floats(out.data(), 3).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace sextant::train
