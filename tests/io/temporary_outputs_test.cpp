// TemporaryOutput: a fatal signal removes the registered temporary file or
// folder (with what it holds) and still ends the process with that signal;
// what is no longer registered is left alone. Each case runs in a forked
// child, which installs the handlers and signals itself.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

#include "common/temp_dir.hpp"
#include "io/temporary_outputs.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

class TemporaryOutputTest : public test::TempDirTest {
 protected:
  // Runs `body` in a child process; returns its wait status.
  static int run_in_child(const std::function<void()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const rlimit no_core{0, 0};  // SIGQUIT's default action would dump one
      ::setrlimit(RLIMIT_CORE, &no_core);
      remove_temporary_outputs_on_fatal_signals();
      body();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  // A folder like quantize's: files and a sub-folder with files.
  static void fill_folder(const fs::path& folder) {
    fs::create_directories(folder / "transformer");
    std::ofstream(folder / "hf_quant_config.json") << "{}";
    std::ofstream(folder / "transformer" / "config.json") << "{}";
    for (int i = 0; i < 200; ++i) std::ofstream(folder / "transformer" / ("shard-" + std::to_string(i))) << i;
  }
};

TEST_F(TemporaryOutputTest, SigtermRemovesARegisteredFolderAndItsContents) {
  const fs::path tmp = dir_ / "out.tmp.1";
  const int status = run_in_child([&] {
    const TemporaryOutput guard(tmp.string());
    fill_folder(tmp);
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(TemporaryOutputTest, EveryTerminationSignalRemovesARegisteredFile) {
  for (int signal_number : {SIGTERM, SIGHUP, SIGQUIT, SIGINT}) {
    const fs::path tmp = dir_ / ("image.png.tmp." + std::to_string(signal_number));
    const int status = run_in_child([&] {
      const TemporaryOutput guard(tmp.string());
      std::ofstream(tmp) << "half an image";
      std::raise(signal_number);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << signal_number;
    EXPECT_EQ(WTERMSIG(status), signal_number);
    EXPECT_FALSE(fs::exists(tmp)) << signal_number;
  }
}

TEST_F(TemporaryOutputTest, ASignalIgnoredAtStartStaysIgnored) {
  const fs::path tmp = dir_ / "nohup.tmp.4";
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGHUP, SIG_IGN);  // as nohup starts a process
    remove_temporary_outputs_on_fatal_signals();
    const TemporaryOutput guard(tmp.string());
    std::ofstream(tmp) << "x";
    std::raise(SIGHUP);
    ::_exit(7);  // still running: the signal was ignored
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_TRUE(fs::exists(tmp));
}

TEST_F(TemporaryOutputTest, RenamedOrReleasedOutputsAreLeftAlone) {
  const fs::path done = dir_ / "report";
  const fs::path unrelated = dir_ / "unrelated.txt";
  std::ofstream(unrelated) << "keep";
  const int status = run_in_child([&] {
    {
      const TemporaryOutput guard((dir_ / "report.tmp.2").string());
      fill_folder(dir_ / "report.tmp.2");
      fs::rename(dir_ / "report.tmp.2", done);  // the output is in place
    }
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(done / "transformer" / "shard-199"));
  EXPECT_TRUE(fs::exists(unrelated));
}

TEST_F(TemporaryOutputTest, RelativePathsAreRemovedWhateverTheWorkingDirectory) {
  const fs::path tmp = dir_ / "relative.tmp.3";
  const int status = run_in_child([&] {
    if (::chdir(dir_.c_str()) != 0) ::_exit(3);
    const TemporaryOutput guard("relative.tmp.3");
    std::ofstream("relative.tmp.3") << "x";
    if (::chdir("/") != 0) ::_exit(3);
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(TemporaryOutputTest, ATooLongPathOrTooManyAtOnceIsAnError) {
  EXPECT_THROW(TemporaryOutput(std::string(5000, 'a')), Error);
  std::vector<std::unique_ptr<TemporaryOutput>> held;
  try {
    for (int i = 0; i <= kMaxTemporaryOutputs; ++i) held.push_back(std::make_unique<TemporaryOutput>((dir_ / std::to_string(i)).string()));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("temporary outputs at once"), std::string::npos) << e.what();
  }
  held.clear();  // every slot is free again
  const TemporaryOutput again((dir_ / "again").string());
}

}  // namespace
}  // namespace stepmix
