// OutputSet: what an output path may be, checks made before any work,
// temporaries that cannot be hijacked, permissions kept, and a run's outputs
// committed together or not at all.
#include "io/output_set.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/output_format.hpp"
#include "io/temporary_outputs.hpp"
#include "stepmix/error.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class OutputSetTest : public test::TempDirTest {
 protected:
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Every entry of the test folder, for "nothing else appeared" checks.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static mode_t mode_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode;
  }
  // Declares --out and --save-latents, validates, and stages "new png" and
  // (when `both`) "new latents".
  static void stage_png_and_latents(OutputSet& set, const fs::path& png, const fs::path& latents, bool both = true) {
    const auto a = set.add_file("--out", png.string());
    const auto b = set.add_file("--save-latents", latents.string());
    set.validate();
    set.stage_file(a, "new png");
    if (both) set.stage_file(b, "new latents");
  }
  // The message of validating one file output at `path`.
  static std::string validate_error(const std::string& path) {
    return error_of([&] {
      OutputSet set;
      set.add_file("--out", path);
      set.validate();
    });
  }
};

TEST_F(OutputSetTest, NewFileGetsTheUsualModeAndNoTemporaryStays) {
  const mode_t old_umask = ::umask(022);
  write_file_atomic((dir_ / "a.png").string(), "new");
  ::umask(old_umask);
  EXPECT_EQ(read(dir_ / "a.png"), "new");
  EXPECT_EQ(mode_of(dir_ / "a.png") & 0777, 0644u);
  EXPECT_EQ(entries(), std::vector<std::string>{"a.png"});
}

TEST_F(OutputSetTest, ReplacedFileKeepsItsPermissions) {
  const fs::path p = write_text("secret.safetensors", "old");
  ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
  write_file_atomic(p.string(), "new");
  EXPECT_EQ(read(p), "new");
  EXPECT_EQ(mode_of(p) & 0777, 0600u);  // was 0644 (a fresh file) before
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  write_file_atomic(p.string(), "newer");
  EXPECT_EQ(mode_of(p) & 0777, 0640u);
}

TEST_F(OutputSetTest, CharacterDeviceIsWrittenThroughNeverReplaced) {
  // A private node with /dev/null's numbers where we may create one (root),
  // so that a regression replaces it and not the system's /dev/null (which
  // others cannot replace: /dev is not theirs).
  std::string null = "/dev/null";
  if (::mknod((dir_ / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) null = (dir_ / "null").string();
  write_file_atomic(null, "bytes nobody keeps");
  EXPECT_TRUE(S_ISCHR(mode_of(null)));  // /dev/null became a regular file before
  OutputSet set;
  const auto a = set.add_file("--out", null);
  const auto b = set.add_file("--save-latents", null);  // twice is fine for a device
  set.validate();
  set.stage_file(a, "x");
  set.stage_file(b, "y");
  set.commit();
  EXPECT_TRUE(S_ISCHR(mode_of(null)));
}

TEST_F(OutputSetTest, AFailingDeviceLeavesNoFileOutputBehind) {
  // /dev/full refuses every write; the file output of the same set must not
  // appear (devices are written before any rename).
  if (!S_ISCHR(mode_of("/dev/full"))) GTEST_SKIP() << "no /dev/full";
  OutputSet set;
  const auto device = set.add_file("--out", "/dev/full");
  const auto file = set.add_file("--save-latents", (dir_ / "latent.safetensors").string());
  set.validate();
  set.stage_file(device, "pixels");
  set.stage_file(file, "latent");
  const std::string e = error_of([&] { set.commit(); });
  EXPECT_NE(e.find("--out /dev/full: write failed: no space left on the device"), std::string::npos) << e;
  EXPECT_TRUE(entries().empty());  // neither the latent nor a temporary
}

TEST_F(OutputSetTest, DirectoriesFifosSocketsAndBlockDevicesAreRefusedUpFront) {
  fs::create_directories(dir_ / "folder");
  std::string e = validate_error((dir_ / "folder").string());
  EXPECT_NE(e.find("[output] --out " + (dir_ / "folder").string() + ": is a directory; expected a regular file"),
            std::string::npos)
      << e;
  const fs::path fifo = dir_ / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  e = validate_error(fifo.string());  // must not block on the FIFO
  EXPECT_NE(e.find("is a FIFO"), std::string::npos) << e;
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (dir_ / "s").string();
  ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  e = validate_error(sock_path);
  EXPECT_NE(e.find("is a socket"), std::string::npos) << e;
  ::close(sock);
  if (fs::exists("/dev/loop0")) {
    e = validate_error("/dev/loop0");  // validated only: nothing is ever opened
    EXPECT_NE(e.find("is a block device"), std::string::npos) << e;
  }
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_TRUE(fs::is_directory(dir_ / "folder"));
}

TEST_F(OutputSetTest, SymbolicLinkIsWrittenThroughToItsTarget) {
  const fs::path target = write_text("real.png", "old");
  fs::create_symlink(target, dir_ / "link.png");
  write_file_atomic((dir_ / "link.png").string(), "new");
  EXPECT_TRUE(S_ISLNK(mode_of(dir_ / "link.png")));  // the link stays a link
  EXPECT_EQ(read(target), "new");
  fs::create_symlink(dir_ / "nowhere.png", dir_ / "dangling.png");
  const std::string e = validate_error((dir_ / "dangling.png").string());
  EXPECT_NE(e.find("is a symbolic link to a missing file"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_ / "nowhere.png"));
}

TEST_F(OutputSetTest, APlantedLinkOrFifoAtTheOldTemporaryNameIsNeverUsed) {
  // The old temporary name was "<out>.tmp.<pid>": a link planted there was
  // followed (the victim overwritten, the output turned into a link), and a
  // FIFO there hung the run.
  const fs::path victim = write_text("victim.txt", "precious");
  const fs::path out = dir_ / "out.png";
  const std::string predictable = out.string() + ".tmp." + std::to_string(::getpid());
  fs::create_symlink(victim, predictable);
  write_file_atomic(out.string(), "image");
  EXPECT_EQ(read(victim), "precious");
  EXPECT_TRUE(S_ISREG(mode_of(out)));
  EXPECT_EQ(read(out), "image");
  fs::remove(predictable);
  ASSERT_EQ(::mkfifo(predictable.c_str(), 0600), 0);
  write_file_atomic(out.string(), "image 2");
  EXPECT_EQ(read(out), "image 2");
}

TEST_F(OutputSetTest, TemporariesHaveRandomNamesBesideTheDestination) {
  OutputSet set;
  const auto id = set.add_file("--out", (dir_ / "out.png").string());
  set.validate();
  set.stage_file(id, "x");
  const std::vector<std::string> staged = entries();
  ASSERT_EQ(staged.size(), 1u);
  EXPECT_TRUE(std::regex_match(staged[0], std::regex(R"(out\.png\.tmp\.[0-9a-f]{16})"))) << staged[0];
  EXPECT_FALSE(fs::exists(dir_ / "out.png"));  // nothing visible before commit
  set.commit();
  EXPECT_EQ(entries(), std::vector<std::string>{"out.png"});
}

TEST_F(OutputSetTest, AMissingFolderIsReportedBeforeAnyWork) {
  OutputSet set;
  set.add_file("--out", (dir_ / "a.png").string());
  set.add_file("--save-latents", (dir_ / "no" / "such" / "x.safetensors").string());
  const std::string e = error_of([&] { set.validate(); });
  EXPECT_NE(e.find("--save-latents " + (dir_ / "no/such/x.safetensors").string() + ": the folder " +
                   (dir_ / "no/such").string() + " does not exist"),
            std::string::npos)
      << e;
  EXPECT_THROW(set.stage_file(0, "x"), Error);  // not validated
  EXPECT_TRUE(entries().empty());
}

TEST_F(OutputSetTest, UnwritableFoldersAndReadOnlyFilesAreRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write anywhere";
  fs::create_directories(dir_ / "ro");
  ASSERT_EQ(::chmod((dir_ / "ro").c_str(), 0555), 0);
  std::string e = validate_error((dir_ / "ro" / "a.png").string());
  EXPECT_NE(e.find("cannot write in the folder"), std::string::npos) << e;
  ::chmod((dir_ / "ro").c_str(), 0755);
  const fs::path locked = write_text("locked.png", "keep");
  ASSERT_EQ(::chmod(locked.c_str(), 0444), 0);
  e = validate_error(locked.string());
  EXPECT_NE(e.find("the file is not writable"), std::string::npos) << e;
}

TEST_F(OutputSetTest, TwoOutputsNamingOneFileAreRefused) {
  const fs::path a = write_text("a.png", "old");
  fs::create_symlink(a, dir_ / "alias.png");
  fs::create_hard_link(a, dir_ / "hard.png");
  for (const fs::path& other : {a, dir_ / "." / "a.png", dir_ / "alias.png", dir_ / "hard.png"}) {
    OutputSet set;
    set.add_file("--out", a.string());
    set.add_file("--save-latents", other.string());
    const std::string e = error_of([&] { set.validate(); });
    EXPECT_NE(e.find("names the same file as --out " + a.string()), std::string::npos) << other << ": " << e;
  }
  OutputSet fresh;  // two new files at one path
  fresh.add_file("--out", (dir_ / "new.png").string());
  fresh.add_file("--json", (dir_ / "new.png").string());
  EXPECT_NE(error_of([&] { fresh.validate(); }).find("names the same file"), std::string::npos);
  EXPECT_EQ(read(a), "old");
}

TEST_F(OutputSetTest, AnOutputThatIsAnInputIsRefused) {
  const fs::path weights = write_text("model/diffusion_pytorch_model.safetensors", "weights");
  fs::create_symlink(weights, dir_ / "out.safetensors");
  OutputSet set;
  set.add_input("checkpoint", weights.string());
  set.add_input("--noise", (dir_ / "absent.safetensors").string());  // missing inputs are ignored
  set.add_file("--save-latents", (dir_ / "model" / "." / "diffusion_pytorch_model.safetensors").string());
  std::string e = error_of([&] { set.validate(); });
  EXPECT_NE(e.find("is the same file as the input checkpoint " + weights.string()), std::string::npos) << e;
  OutputSet via_link;
  via_link.add_input("checkpoint", weights.string());
  via_link.add_file("--out", (dir_ / "out.safetensors").string());
  e = error_of([&] { via_link.validate(); });
  EXPECT_NE(e.find("is the same file as the input"), std::string::npos) << e;
  EXPECT_EQ(read(weights), "weights");
}

TEST_F(OutputSetTest, ANewFileTheModelWouldReadIsNotAddedToItsFolders) {
  write_text("model/model_index.json", "{}");
  write_text("model/transformer/config.json", "{}");
  const fs::path weights = write_text("model/transformer/diffusion_pytorch_model.safetensors", "weights");
  fs::create_directories(dir_ / "elsewhere");
  const auto attempt = [&](const fs::path& out) {
    OutputSet set;
    set.add_input("--model", (dir_ / "model").string());
    set.add_file("--out", out.string());
    return error_of([&] { set.validate(); });
  };
  // A second safetensors file beside the weights would be loaded with them.
  std::string e = attempt(dir_ / "model" / "transformer" / "latent.safetensors");
  EXPECT_NE(e.find("would add latent.safetensors to " + (dir_ / "model" / "transformer").string() +
                   ", whose *.safetensors the loaders of the input --model " + (dir_ / "model").string() + " read"),
            std::string::npos)
      << e;
  EXPECT_NE(attempt(dir_ / "model" / "hf_quant_config.json").find("would add hf_quant_config.json"), std::string::npos);
  // What stepmix does not read there, and model-like names elsewhere, are fine:
  // the root and other folders are not listed for weights (a run's latents
  // kept in the model folder do not make it a weights folder).
  EXPECT_EQ(attempt(dir_ / "model" / "transformer" / "preview.png"), "");
  EXPECT_EQ(attempt(dir_ / "model" / "bench.json"), "");
  EXPECT_EQ(attempt(dir_ / "model" / "latent.safetensors"), "");
  write_text("model/outputs/run1.safetensors", "latent");
  EXPECT_EQ(attempt(dir_ / "model" / "outputs" / "run2.safetensors"), "");
  EXPECT_EQ(attempt(dir_ / "elsewhere" / "latent.safetensors"), "");
  EXPECT_FALSE(fs::exists(dir_ / "model" / "transformer" / "latent.safetensors"));
}

TEST_F(OutputSetTest, AFolderOfLinkedWeightsIsProtectedWhereTheLoadersListIt) {
  // A Hugging Face cache snapshot: each file is a link into blobs/.
  const fs::path blob = write_text("hf/blobs/0123", "weights");
  const fs::path config = write_text("hf/blobs/4567", "{}");
  fs::create_directories(dir_ / "hf" / "snapshot" / "transformer");
  fs::create_symlink(blob, dir_ / "hf" / "snapshot" / "transformer" / "diffusion_pytorch_model.safetensors");
  fs::create_symlink(config, dir_ / "hf" / "snapshot" / "transformer" / "config.json");
  OutputSet set;
  set.add_input("--model", (dir_ / "hf" / "snapshot").string());
  set.add_file("--save-latents", (dir_ / "hf" / "snapshot" / "transformer" / "latent.safetensors").string());
  const std::string e = error_of([&] { set.validate(); });
  EXPECT_NE(e.find("would add latent.safetensors to "), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_ / "hf" / "blobs" / "latent.safetensors"));
}

TEST_F(OutputSetTest, OutputsAreCommittedTogether) {
  const fs::path png = write_text("x.png", "old png");
  const fs::path latents = write_text("x.safetensors", "old latents");
  {
    OutputSet set;
    stage_png_and_latents(set, png, latents);
    EXPECT_EQ(read(png), "old png");  // staged, not visible
    EXPECT_EQ(read(latents), "old latents");
    // Destroyed without commit (an error in the run): the temporaries go.
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"x.png", "x.safetensors"}));
  EXPECT_EQ(read(png), "old png");
  OutputSet set;
  stage_png_and_latents(set, png, latents, false);
  EXPECT_NE(error_of([&] { set.commit(); }).find("--save-latents " + latents.string() + ": was declared but never staged"),
            std::string::npos);
  set.stage_file(1, "new latents");
  set.commit();
  EXPECT_EQ(read(png), "new png");
  EXPECT_EQ(read(latents), "new latents");
  EXPECT_EQ(entries(), (std::vector<std::string>{"x.png", "x.safetensors"}));
}

TEST_F(OutputSetTest, AFailedRenamePutsBackWhatWasAlreadyReplaced) {
  const fs::path png = write_text("x.png", "old png");
  const fs::path latents = dir_ / "x.safetensors";
  OutputSet set;
  stage_png_and_latents(set, png, latents);
  // Something appears at the second destination after validation: the rename
  // of the second output must fail, and the first must be put back.
  write_text("x.safetensors/blocker", "someone else's");
  const std::string e = error_of([&] { set.commit(); });
  EXPECT_NE(e.find("--save-latents " + latents.string() + ": cannot rename the temporary file into place"),
            std::string::npos)
      << e;
  EXPECT_EQ(read(png), "old png");
  EXPECT_EQ(read(latents / "blocker"), "someone else's");
  EXPECT_EQ(entries(), (std::vector<std::string>{"x.png", "x.safetensors"}));
}

TEST_F(OutputSetTest, ASignalBeforeCommitLeavesOnlyTheOldOutputs) {
  const fs::path png = write_text("x.png", "old png");
  const fs::path latents = write_text("x.safetensors", "old latents");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    remove_temporary_outputs_on_fatal_signals();
    OutputSet set;
    stage_png_and_latents(set, png, latents);
    std::raise(SIGTERM);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(read(png), "old png");
  EXPECT_EQ(read(latents), "old latents");
  EXPECT_EQ(entries(), (std::vector<std::string>{"x.png", "x.safetensors"}));
}

TEST_F(OutputSetTest, FolderOutputsAreMarkedAndOnlyMarkedFoldersAreReplaced) {
  const fs::path report = dir_ / "report";
  auto write_report = [&](const std::string& text, bool replace) {
    OutputSet set;
    const auto id = set.add_folder("--out", report.string(), replace, "--force");
    set.validate();
    const fs::path tmp = set.stage_folder(id);
    std::ofstream(tmp / "report.md") << text;
    fs::create_directories(tmp / "images");
    std::ofstream(tmp / "images" / "0.png") << "png";
    set.commit();
  };
  write_report("first", false);
  EXPECT_EQ(read(report / "report.md"), "first");
  EXPECT_EQ(read(report / kOutputFolderMarker), std::string(kOutputFolderMarkerHeader) + "\nimages\nreport.md\n");
  // Existing: refused unless replacing is asked for.
  EXPECT_NE(error_of([&] { write_report("second", false); })
                .find("exists; only a folder stepmix wrote can be replaced, and only when asked to (--force)"),
            std::string::npos);
  {  // A command without a replacing option does not suggest one.
    OutputSet set;
    set.add_folder("--frames-dir", report.string(), false);
    const std::string e = error_of([&] { set.validate(); });
    EXPECT_NE(e.find("exists; expected a path that does not exist"), std::string::npos) << e;
    EXPECT_EQ(e.find("--force"), std::string::npos) << e;
  }
  write_report("second", true);
  EXPECT_EQ(read(report / "report.md"), "second");
  EXPECT_EQ(entries(), std::vector<std::string>{"report"});  // the old one is gone, nothing aside

  // A file the user added: not stepmix's folder any more.
  write_text("report/notes.txt", "mine");
  std::string e = error_of([&] { write_report("third", true); });
  EXPECT_NE(e.find("holds 'notes.txt' that stepmix did not write; refusing to replace the folder"), std::string::npos)
      << e;
  EXPECT_EQ(read(report / "notes.txt"), "mine");
  // A user's folder without the marker is never deleted.
  const fs::path mine = dir_ / "mine";
  fs::create_directories(mine);
  write_text("mine/thesis.tex", "years of work");
  OutputSet set;
  set.add_folder("--out", mine.string(), true);
  e = error_of([&] { set.validate(); });
  EXPECT_NE(e.find("is not a folder stepmix wrote (it has no .stepmix-output marker); refusing to replace it"),
            std::string::npos)
      << e;
  EXPECT_EQ(read(mine / "thesis.tex"), "years of work");
}

TEST_F(OutputSetTest, AFolderHoldingAnInputIsNotReplaced) {
  const fs::path report = dir_ / "report";
  {
    OutputSet set;
    const auto id = set.add_folder("--out", report.string(), false);
    set.validate();
    std::ofstream(fs::path(set.stage_folder(id)) / "prompts.txt") << "a boot\n";
    set.commit();
  }
  OutputSet set;
  set.add_input("--prompts", (report / "prompts.txt").string());
  set.add_folder("--out", report.string(), true);
  EXPECT_NE(error_of([&] { set.validate(); }).find("holds the input --prompts"), std::string::npos);
  EXPECT_TRUE(fs::exists(report / "prompts.txt"));
}

TEST(OutputFormat, TheExtensionDecidesAndUnsupportedOnesAreErrors) {
  using F = OutputFormat;
  EXPECT_EQ(output_format_for("a/b.png", "--out", {F::Png, F::Safetensors}), F::Png);
  EXPECT_EQ(output_format_for("B.PNG", "--out", {F::Png, F::Safetensors}), F::Png);
  EXPECT_EQ(output_format_for("x.safetensors", "--out", {F::Png, F::Safetensors}), F::Safetensors);
  std::string e = error_of([] { output_format_for("x.jpg", "--out", {F::Png, F::Safetensors}); });
  EXPECT_NE(e.find("[output] --out x.jpg: extension '.jpg' is not supported here; expected .png or .safetensors"),
            std::string::npos)
      << e;
  e = error_of([] { output_format_for("x.png", "--save-latents", {F::Safetensors}); });
  EXPECT_NE(e.find("extension '.png' is not supported here; expected .safetensors"), std::string::npos) << e;
  e = error_of([] { output_format_for("noext", "--out", {F::Png}); });
  EXPECT_NE(e.find("--out noext: no file extension; expected .png"), std::string::npos) << e;
  e = error_of([] { output_format_for("clip.mp4", "--out", {F::Png, F::Safetensors}); });
  EXPECT_NE(e.find("--out clip.mp4: extension '.mp4' is not supported here; expected .png or .safetensors"),
            std::string::npos)
      << e;
  EXPECT_EQ(output_format_for("clip.MP4", "--out", {F::Png, F::Mp4}), F::Mp4);
}

TEST(OutputFormat, AVideoOutputIsNamedByTheSameRule) {
  EXPECT_TRUE(is_video_output("clip.mp4"));
  EXPECT_TRUE(is_video_output("out/Clip.MP4"));
  EXPECT_FALSE(is_video_output("clip.png"));
  EXPECT_FALSE(is_video_output("clip.mp4.png"));
  EXPECT_FALSE(is_video_output("mp4"));
  EXPECT_FALSE(is_video_output(""));
  // A name that is all extension has none (output_format_for refuses it).
  EXPECT_FALSE(is_video_output("out/.mp4"));
}

}  // namespace
}  // namespace stepmix
