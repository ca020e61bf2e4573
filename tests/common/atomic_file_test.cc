// WriteFileAtomically: a whole new file or the old one, the mode asked for under the umask, no
// temporary left behind, a body's failure leaving the old contents, and a planted link at the
// target replaced, never written through.
#include "common/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sextant-atomic-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Entries of the directory other than the ones named.
  int Others(const std::string& except) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename() != except;
    return n;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, ReplacesTheWholeFileAndLeavesNoTemporary) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "first version, longer than the second").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0nd", 6)).ok());
  EXPECT_EQ(Read(path), std::string("sec\0nd", 6));
  EXPECT_EQ(Others("f"), 0);
}

TEST_F(AtomicFileTest, TheModeIsTheOneAskedForLessTheUmask) {
  const mode_t old = ::umask(022);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/public", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/secret", "x", AtomicWriteOptions{0600}).ok());
  ::umask(077);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/under077", "x").ok());
  ::umask(old);
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/public").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::stat((dir_ + "/secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/under077").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AtomicFileTest, AFailingBodyLeavesTheOldFileAndNoTemporary) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  for (bool sync : {true, false}) {
    absl::Status s = WriteFileAtomically(
        path,
        [](int fd, const std::string& tmp) {
          EXPECT_TRUE(WriteAllToFd(fd, "half of the new", tmp).ok());
          return absl::DataLossError("the source ended early");
        },
        AtomicWriteOptions{0644, sync});
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(Read(path), "old");
    EXPECT_EQ(Others("f"), 0);
  }
}

TEST_F(AtomicFileTest, ALinkPlantedAtThePathIsReplacedNotWrittenThrough) {
  const std::string target = dir_ + "/target";
  std::ofstream(target) << "keep";
  fs::create_symlink(target, dir_ + "/f");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/f", "new").ok());
  EXPECT_EQ(Read(target), "keep");
  EXPECT_FALSE(fs::is_symlink(dir_ + "/f"));
  EXPECT_EQ(Read(dir_ + "/f"), "new");
}

TEST_F(AtomicFileTest, AMissingDirectoryIsAnErrorNamingThePath) {
  const std::string path = dir_ + "/no/such/dir/f";
  absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(path));
}

}  // namespace
}  // namespace sextant
