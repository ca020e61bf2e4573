#include "common/mapped_floats.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

// This process's resident bytes (/proc/self/statm's second field, in pages).
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid())))
      .string();
}

constexpr size_t kFloats = size_t{1} << 24;  // 64 MiB
constexpr size_t kBytes = kFloats * sizeof(float);

TEST(MappedFloatsTest, ReleasedPagesLeaveResidentMemoryAndKeepTheirValues) {
  const std::string path = TempPath("mapped-floats");
  {
    absl::StatusOr<MappedFloats> m = MappedFloats::Create(path, kFloats);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(std::filesystem::file_size(path), kBytes);
    absl::Span<float> v = m->span();
    const size_t before = ResidentBytes();
    for (size_t i = 0; i < kFloats; ++i) v[i] = static_cast<float>(i % 1000);
    EXPECT_GE(ResidentBytes(), before + kBytes * 9 / 10);  // written: resident
    m->Release(0, kFloats / 2);
    const size_t half = ResidentBytes();
    EXPECT_LE(half, before + kBytes * 6 / 10);
    m->Release();
    EXPECT_LE(ResidentBytes(), before + kBytes / 10);
    // The values are in the file and come back when read.
    for (size_t i = 0; i < kFloats; i += 4099) ASSERT_EQ(v[i], static_cast<float>(i % 1000)) << i;
    MappedFloats moved = *std::move(m);
    EXPECT_EQ(moved.size(), kFloats);
    EXPECT_EQ(moved.span()[12345], 345.0f);
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // the file goes with the array
  EXPECT_EQ(MappedFloats::Create(path, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MappedFloats::Create("/nonexistent-dir/x.f32", 4).status().code(),
            absl::StatusCode::kInternal);
}

TEST(MappedFloatsTest, ReleasePagesGivesBackAnonymousMemory) {
  std::vector<float> v(kFloats, 1.0f);
  const size_t before = ResidentBytes();
  ReleasePages(v.data(), kBytes);
  EXPECT_LE(ResidentBytes() + kBytes * 9 / 10, before);
  ReleasePages(v.data(), 100);  // less than a page: nothing to drop, nothing breaks
}

// glibc raises its mapping threshold to the largest block freed, so by default a second large
// block comes from the heap and stays there once freed; after the call it is mapped on its own.
TEST(MappedFloatsTest, AfterGiveFreedMemoryBackPromptlyALargeBlockFreedTwiceIsStillMappedApart) {
  ASSERT_TRUE(GiveFreedMemoryBackPromptly());
  constexpr size_t kBlockBytes = size_t{8} << 20;
  for (int pass = 0; pass < 2; ++pass) {
    const size_t mapped_before = ::mallinfo2().hblkhd;
    char* volatile block = static_cast<char*>(std::malloc(kBlockBytes));
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, kBlockBytes);
    EXPECT_GE(::mallinfo2().hblkhd, mapped_before + kBlockBytes) << "pass " << pass;
    std::free(block);
    EXPECT_EQ(::mallinfo2().hblkhd, mapped_before) << "pass " << pass;
  }
}

TEST(LazyFloatsTest, IsResidentOnlyWhereWrittenAndUntilReleased) {
  constexpr size_t kFloats = size_t{64} << 20;  // 256 MB
  const size_t before = ResidentBytes();
  LazyFloats a(kFloats);
  ASSERT_EQ(a.size(), kFloats);
  EXPECT_LT(ResidentBytes(), before + (size_t{16} << 20)) << "zeros must not be written";
  EXPECT_EQ(a.span()[kFloats - 1], 0.0f);
  for (size_t i = 0; i < kFloats / 2; ++i) a.span()[i] = 1.0f;
  EXPECT_GT(ResidentBytes(), before + (size_t{120} << 20));
  a.Release();
  EXPECT_LT(ResidentBytes(), before + (size_t{16} << 20));
  EXPECT_EQ(a.span()[0], 0.0f);
  // Moved, the memory goes with it.
  LazyFloats b = std::move(a);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.size(), kFloats);
}

}  // namespace
}  // namespace sextant
