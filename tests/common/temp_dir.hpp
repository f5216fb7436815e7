// A fresh temporary folder per test, for the fixtures that write files:
// created before the test, removed with everything in it after. Its name
// holds the process id, the suite and the test, so tests running at the same
// time (ctest -j, several test binaries) never share one.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace stepmix::test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Parameterized suites and tests have '/' in their names.
    std::string name = std::string("stepmix_") + info->test_suite_name() + "_" + std::to_string(::getpid()) + "_" +
                       info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `bytes` to `file` (relative to the folder, or absolute), creating
  // its parent folders; returns the file's path.
  std::string write_bytes(const std::filesystem::path& file, std::string_view bytes) const {
    const std::filesystem::path p = dir_ / file;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return p.string();
  }
  std::string write_text(const std::filesystem::path& file, std::string_view text) const {
    return write_bytes(file, text);
  }

  std::filesystem::path dir_;
};

}  // namespace stepmix::test
