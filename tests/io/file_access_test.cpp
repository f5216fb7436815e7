// Reading prompt and text files: regular files of bounded size only (a FIFO
// or /dev/zero is refused up front, never read), UTF-8 without NUL, and
// messages that say what is wrong rather than "no such file" for everything.
#include "io/file_access.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class FileAccessTest : public test::TempDirTest {};

TEST_F(FileAccessTest, ReadsABoundedTextFile) {
  const std::string p = write_text("prompts.txt", "a boot\nids:1,2\nÜberschuh\n");
  EXPECT_EQ(read_text_file_bounded(p, kMaxTextFileBytes, "--prompts"), "a boot\nids:1,2\nÜberschuh\n");
  EXPECT_NE(error_of([&] { read_text_file_bounded(p, 8, "--prompts"); })
                .find("[input] --prompts " + p + ": file is 26 bytes, more than the limit of 8 bytes"),
            std::string::npos);
}

TEST_F(FileAccessTest, DevicesAndFifosAreRefusedWithoutReading) {
  // /dev/zero grew memory without end and a FIFO blocked for ever before.
  std::string e = error_of([] { read_text_file_bounded("/dev/zero", kMaxTextFileBytes, "--calib-prompts"); });
  EXPECT_NE(e.find("[input] --calib-prompts /dev/zero: not a regular file (a character device)"), std::string::npos)
      << e;
  const std::string fifo = (dir_ / "prompts.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  e = error_of([&] { read_text_file_bounded(fifo, kMaxTextFileBytes, "--calib-prompts"); });
  EXPECT_NE(e.find(fifo + ": not a regular file (a FIFO)"), std::string::npos) << e;
  e = error_of([&] { read_text_file_bounded(dir_.string(), kMaxTextFileBytes, "--prompts"); });
  EXPECT_NE(e.find(": not a regular file (a directory)"), std::string::npos) << e;
}

TEST_F(FileAccessTest, NoSuchFileOnlyWhenThereIsNoFile) {
  std::string e = error_of([&] { read_text_file_bounded((dir_ / "none.txt").string(), 100, "--prompts"); });
  EXPECT_NE(e.find("none.txt: cannot open: no such file or directory"), std::string::npos) << e;
  const std::string file = write_text("f", "x");
  e = error_of([&] { read_text_file_bounded(file + "/child.txt", 100, "--prompts"); });
  EXPECT_NE(e.find("a component of the path is not a directory"), std::string::npos) << e;
  EXPECT_EQ(errno_phrase(ENOENT), "no such file or directory");
  EXPECT_EQ(errno_phrase(EACCES), "permission denied");
  EXPECT_EQ(errno_phrase(EISDIR), "is a directory");
  if (::geteuid() != 0) {
    const std::string locked = write_text("locked.txt", "x");
    ::chmod(locked.c_str(), 0);
    e = error_of([&] { read_text_file_bounded(locked, 100, "--prompts"); });
    EXPECT_NE(e.find("locked.txt: cannot open: permission denied"), std::string::npos) << e;
  }
  EXPECT_EQ(input_file_problem(file), "");
  EXPECT_EQ(input_file_problem((dir_ / "none").string()), "cannot open: no such file or directory");
}

TEST_F(FileAccessTest, BinaryFilesAreNamedWithTheOffset) {
  std::string e = error_of([&] { read_text_file_bounded(write_bytes("a.txt", std::string("ab\0c", 4)), 100, "--prompts"); });
  EXPECT_NE(e.find("NUL byte at offset 2; expected a text file"), std::string::npos) << e;
  e = error_of([&] { read_text_file_bounded(write_bytes("b.txt", "ok \xff"), 100, "--prompts"); });
  EXPECT_NE(e.find("byte 3 is not valid UTF-8"), std::string::npos) << e;
  EXPECT_EQ(first_invalid_utf8("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82"), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("ab\xc0\xaf"), 2u);      // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xed\xa0\x80"), 0u);    // a surrogate
  EXPECT_EQ(first_invalid_utf8("x\xe2\x82"), 1u);       // cut short
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
}

}  // namespace
}  // namespace stepmix
