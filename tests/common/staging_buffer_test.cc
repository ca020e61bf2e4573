#include "common/staging_buffer.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace sextant {
namespace {

class StagingBufferTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) return;
    dir_ = (std::filesystem::temp_directory_path() / ("staging-test-" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;  // empty: in memory
};

TEST_P(StagingBufferTest, ReadsBackWhatWasWrittenAndZerosElsewhere) {
  absl::StatusOr<StagingBuffer> b = StagingBuffer::Create(dir_, 10000);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->in_file(), GetParam());
  EXPECT_EQ(b->size(), 10000u);
  ASSERT_TRUE(b->Write(4000, std::string("middle")).ok());
  ASSERT_TRUE(b->Write(9996, std::string("last")).ok());
  std::string got(10, 'x');
  ASSERT_TRUE(b->Read(3998, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, std::string("\0\0middle\0\0", 10));
  // Moved, it keeps its contents.
  StagingBuffer moved = *std::move(b);
  std::string tail(4, 'x');
  ASSERT_TRUE(moved.Read(9996, absl::MakeSpan(tail)).ok());
  EXPECT_EQ(tail, "last");
}

TEST_P(StagingBufferTest, RefusesRangesPastTheEnd) {
  absl::StatusOr<StagingBuffer> b = StagingBuffer::Create(dir_, 16);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->Write(13, std::string("four")).code(), absl::StatusCode::kOutOfRange);
  std::string out(4, 'x');
  EXPECT_EQ(b->Read(size_t{1} << 62, absl::MakeSpan(out)).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(b->Write(12, std::string("four")).ok());
}

INSTANTIATE_TEST_SUITE_P(MemoryAndFile, StagingBufferTest, ::testing::Bool());

TEST(StagingBufferFileTest, LeavesNoFileBehindAndNamesAFolderItCannotUse) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("staging-names-" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  {
    absl::StatusOr<StagingBuffer> b = StagingBuffer::Create(dir, 1 << 20);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_TRUE(b->Write(0, std::string("data")).ok());
    EXPECT_TRUE(std::filesystem::is_empty(dir));
  }
  std::filesystem::remove_all(dir);
  absl::StatusOr<StagingBuffer> missing = StagingBuffer::Create(dir + "/no/such", 8);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find(dir + "/no/such"), std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace sextant
