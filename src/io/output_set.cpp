#include "io/output_set.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>

#include "io/checkpoint.hpp"
#include "io/file_access.hpp"
#include "io/temporary_outputs.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

// A named namespace, not an anonymous one: OutputSet::Output (external
// linkage) holds these.
namespace output_set_detail {
enum class Kind { File, Folder };
// What commit does at the destination.
enum class Action { Create, Replace, WriteThrough };
}  // namespace output_set_detail
using output_set_detail::Action;
using output_set_detail::Kind;

namespace {

[[noreturn]] void fail(const std::string& label, const std::string& path, const std::string& problem) {
  throw Error("output", (label.empty() ? "" : label + " ") + path + ": " + problem);
}

// 16 hex digits from the kernel's generator (a clock-and-counter mix if it is
// unavailable: the name must not be guessable in advance, not secret).
std::string random_suffix() {
  unsigned long long bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != ssize_t(sizeof bits)) {
    static unsigned long long counter = 0;
    bits = (unsigned long long)std::time(nullptr) * 0x9E3779B97F4A7C15ull ^ (unsigned long long)::getpid() << 32 ^
           ++counter * 0xBF58476D1CE4E5B9ull ^ (unsigned long long)(std::uintptr_t)&bits;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", bits);
  return text;
}

// "<name>.tmp.<hex>" within NAME_MAX, however long the destination's name.
std::string temporary_name(const std::string& name, const char* tag) {
  const std::size_t room = NAME_MAX - 4 - 16 - 2;
  return name.substr(0, std::min(name.size(), room)) + "." + tag + "." + random_suffix();
}

std::string parent_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::optional<std::string> real_path(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved) return std::nullopt;
  std::string out = resolved;
  std::free(resolved);
  return out;
}

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t done = ::write(fd, data, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    data += done;
    n -= std::size_t(done);
  }
  return true;
}

// The top-level names in the folder open at `dir_fd` (not "." or "..").
std::vector<std::string> folder_entries(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (!dir) {
    if (fd >= 0) ::close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

}  // namespace

struct OutputSet::Output {
  std::string label, path;
  Kind kind = Kind::File;
  bool replace_allowed = false;
  std::string replace_option;  // the option that allows it, for the message
  // Set by validate().
  std::string resolved, folder, name;
  Action action = Action::Create;
  mode_t old_mode = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  bool exists = false;
  int dir_fd = -1;
  // Set by staging and commit.
  bool staged = false;
  std::string temporary;                       // name in `folder`
  std::unique_ptr<TemporaryOutput> guard;      // removes it on a fatal signal
  std::string device_contents;                 // WriteThrough
  std::string backup;                          // Replace: a second link to the old file, or the old folder moved aside
  bool renamed = false;

  std::string temporary_path() const { return folder + "/" + temporary; }
};

OutputSet::OutputSet() = default;

OutputSet::~OutputSet() {
  discard_staged();
  for (auto& o : outputs_)
    if (o->dir_fd >= 0) ::close(o->dir_fd);
}

void OutputSet::discard_staged() noexcept {
  for (auto& o : outputs_) {
    if (!o->staged || o->renamed || o->temporary.empty()) continue;
    std::error_code ec;
    std::filesystem::remove_all(o->temporary_path(), ec);
    o->guard.reset();
    o->staged = false;
  }
}

void OutputSet::add_input(const std::string& label, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  inputs_.push_back({label, path, real_path(path).value_or(path), st.st_dev, st.st_ino, ""});
  if (!S_ISDIR(st.st_mode)) return;
  // A model folder: the files its loaders read (config, shards, index,
  // tokenizer, chat template, scheduler, VAE, calibration prompts). Linked
  // folders are followed (the depth bound ends a link loop); a model has a
  // few dozen files, the count bound only keeps a wrong folder from taking long.
  constexpr int kMaxFiles = 100000, kMaxDepth = 3;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(
      path, fs::directory_options::skip_permission_denied | fs::directory_options::follow_directory_symlink, ec);
  for (int files = 0; !ec && it != fs::recursive_directory_iterator() && files < kMaxFiles; it.increment(ec)) {
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    struct stat file {};
    const std::string file_path = it->path().string();
    if (!is_model_file_name(it->path().filename().string()) || ::stat(file_path.c_str(), &file) != 0 || !S_ISREG(file.st_mode)) continue;
    inputs_.push_back({label, file_path, real_path(file_path).value_or(file_path), file.st_dev, file.st_ino, path});
    ++files;
    // The folder as the loaders list it: its own links resolved, not the
    // file's (a Hugging Face snapshot links each file into blobs/).
    const std::string parent = it->path().parent_path().string();
    const std::string folder = real_path(parent).value_or(parent);
    auto known = std::find_if(model_folders_.begin(), model_folders_.end(),
                              [&](const ModelFolder& f) { return f.resolved == folder; });
    if (known == model_folders_.end())
      known = model_folders_.insert(model_folders_.end(), {label, path, parent, folder});
    const std::string name = it->path().filename().string();
    (is_weights_file_name(name) ? known->weights : known->named) = true;
    if (name == "config.json") known->config = true;
  }
}

OutputSet::Id OutputSet::add_file(const std::string& label, const std::string& path) {
  if (validated_) throw Error("output", label + " " + path + ": declared after the outputs were validated");
  auto o = std::make_unique<Output>();
  o->label = label;
  o->path = path;
  outputs_.push_back(std::move(o));
  return outputs_.size() - 1;
}

OutputSet::Id OutputSet::add_folder(const std::string& label, const std::string& path, bool replace,
                                    const std::string& replace_option) {
  const Id id = add_file(label, path);
  outputs_[id]->kind = Kind::Folder;
  outputs_[id]->replace_allowed = replace;
  outputs_[id]->replace_option = replace_option;
  return id;
}

namespace {

// The marker of a folder stepmix wrote, checked against what the folder holds.
void check_replaceable_folder(const std::string& label, const std::string& path, const std::string& resolved) {
  const int fd = ::open(resolved.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(label, path, "cannot open the folder: " + errno_phrase(errno));
  const std::vector<std::string> present = folder_entries(fd);
  ::close(fd);
  std::string marker;
  try {
    marker = read_regular_file(resolved + "/" + kOutputFolderMarker, 1 << 20, "output");
  } catch (const Error&) {
    fail(label, path, std::string("exists and is not a folder stepmix wrote (it has no ") + kOutputFolderMarker +
                          " marker); refusing to replace it");
  }
  std::set<std::string> written;
  std::size_t start = 0;
  bool header = true;
  while (start <= marker.size()) {
    const std::size_t end = std::min(marker.find('\n', start), marker.size());
    const std::string line = marker.substr(start, end - start);
    if (header && line != kOutputFolderMarkerHeader)
      fail(label, path, std::string(kOutputFolderMarker) + " does not start with \"" + kOutputFolderMarkerHeader +
                            "\"; refusing to replace the folder");
    if (!header && !line.empty()) written.insert(line);
    header = false;
    start = end + 1;
  }
  std::vector<std::string> foreign;
  for (const std::string& name : present)
    if (name != kOutputFolderMarker && !written.count(name)) foreign.push_back(name);
  if (!foreign.empty())
    fail(label, path, "holds '" + foreign.front() + "'" +
                          (foreign.size() > 1 ? " and " + std::to_string(foreign.size() - 1) + " more entries" : "") +
                          " that stepmix did not write; refusing to replace the folder");
}

}  // namespace

void OutputSet::validate() {
  for (auto& owned : outputs_) {
    Output& o = *owned;
    const bool folder_output = o.kind == Kind::Folder;
    if (o.path.empty()) fail(o.label, "\"\"", "empty path");
    const std::string base = std::filesystem::path(o.path).filename().string();
    if (base.empty() || base == "." || base == "..")
      fail(o.label, o.path, std::string("expected a ") + (folder_output ? "folder" : "file") + " name");

    struct stat st {};
    if (::lstat(o.path.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        // Written through: the target is the destination.
        if (::stat(o.path.c_str(), &st) != 0)
          fail(o.label, o.path, errno == ENOENT ? "is a symbolic link to a missing file; stepmix writes through a "
                                                  "link only to an existing file"
                                                : "cannot follow the symbolic link: " + errno_phrase(errno));
      }
      o.exists = true;
      o.dev = st.st_dev;
      o.ino = st.st_ino;
      o.old_mode = st.st_mode;
      o.resolved = real_path(o.path).value_or(o.path);
    } else if (errno == ENOENT) {
      const std::string parent = parent_of(o.path);
      struct stat pst {};
      if (::stat(parent.c_str(), &pst) != 0)
        fail(o.label, o.path, "the folder " + parent + " does not exist (" + errno_phrase(errno) + ")");
      if (!S_ISDIR(pst.st_mode)) fail(o.label, o.path, parent + " is " + file_type_phrase(pst.st_mode) + ", not a folder");
      o.resolved = real_path(parent).value_or(parent) + "/" + base;
    } else {
      fail(o.label, o.path, errno_phrase(errno));
    }
    o.folder = parent_of(o.resolved);
    o.name = std::filesystem::path(o.resolved).filename().string();

    if (!o.exists) {
      o.action = Action::Create;
    } else if (S_ISCHR(o.old_mode) && !folder_output) {
      o.action = Action::WriteThrough;
      if (::faccessat(AT_FDCWD, o.resolved.c_str(), W_OK, AT_EACCESS) != 0)
        fail(o.label, o.path, "cannot write the device: " + errno_phrase(errno));
    } else if (S_ISREG(o.old_mode) && !folder_output) {
      o.action = Action::Replace;
      if (::faccessat(AT_FDCWD, o.resolved.c_str(), W_OK, AT_EACCESS) != 0)
        fail(o.label, o.path, "the file is not writable (" + errno_phrase(errno) + "); stepmix replaces only a file "
                              "it may write");
    } else if (S_ISDIR(o.old_mode) && folder_output) {
      if (!o.replace_allowed)
        fail(o.label, o.path,
             o.replace_option.empty()
                 ? "exists; expected a path that does not exist (this folder is always written new)"
                 : "exists; only a folder stepmix wrote can be replaced, and only when asked to (" + o.replace_option +
                       ")");
      check_replaceable_folder(o.label, o.path, o.resolved);
      o.action = Action::Replace;
    } else {
      fail(o.label, o.path, "is " + file_type_phrase(o.old_mode) + "; expected " +
                                (folder_output ? "a folder stepmix wrote or a path that does not exist"
                                               : "a regular file, a character device or a path that does not exist"));
    }
    if (o.action != Action::WriteThrough) {
      if (::faccessat(AT_FDCWD, o.folder.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
        fail(o.label, o.path, "cannot write in the folder " + o.folder + ": " + errno_phrase(errno));
      if (o.dir_fd >= 0) ::close(o.dir_fd);
      o.dir_fd = ::open(o.folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (o.dir_fd < 0) fail(o.label, o.path, "cannot open the folder " + o.folder + ": " + errno_phrase(errno));
    }
  }
  check_duplicates_and_inputs();
  validated_ = true;
}

void OutputSet::check_duplicates_and_inputs() const {
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    const Output& a = *outputs_[i];
    for (const Input& in : inputs_) {
      if (a.exists && a.dev == in.dev && a.ino == in.ino)
        fail(a.label, a.path,
             in.folder.empty()
                 ? "is the same file as the input " + in.label + " " + in.path + "; choose another output"
                 : "is " + in.path + ", a weights or config file of the input " + in.label + " " + in.folder +
                       ", which stepmix does not overwrite; choose another output");
      if (a.kind == Kind::Folder && a.exists && in.resolved.rfind(a.resolved + "/", 0) == 0)
        fail(a.label, a.path, "holds the input " + in.label + " " + in.path + ", so it cannot be replaced");
    }
    if (a.kind == Kind::File && a.action == Action::Create) check_not_read_by_a_model(a);
    if (a.action == Action::WriteThrough) continue;  // writing /dev/null twice destroys nothing
    for (std::size_t j = 0; j < i; ++j) {
      const Output& b = *outputs_[j];
      if (b.action == Action::WriteThrough) continue;
      if (a.resolved == b.resolved || (a.exists && b.exists && a.dev == b.dev && a.ino == b.ino))
        fail(a.label, a.path, "names the same file as " + (b.label.empty() ? b.path : b.label + " " + b.path));
    }
  }
}

void OutputSet::check_not_read_by_a_model(const Output& a) const {
  // A new file a model's loaders would read changes the model as surely as
  // an overwrite: a .safetensors in a component folder (config.json beside
  // weights: every *.safetensors there is loaded), or a file of a fixed name
  // (model_index.json, hf_quant_config.json, ...) in a folder where the
  // loaders look such names up.
  if (!is_model_file_name(a.name)) return;
  const bool weights = is_weights_file_name(a.name);
  for (const ModelFolder& f : model_folders_) {
    if (f.resolved != a.folder || !(weights ? f.config && f.weights : f.named)) continue;
    fail(a.label, a.path,
         "would add " + a.name + " to " + f.path + (weights ? ", whose *.safetensors" : ", whose " + a.name) +
             " the loaders of the input " + f.label + " " + f.input + " read; choose another folder");
  }
}

OutputSet::Output& OutputSet::validated(Id id, bool folder) {
  if (!validated_) throw Error("output", "outputs staged before validate()");
  if (id >= outputs_.size()) throw Error("output", "no output number " + std::to_string(id));
  Output& o = *outputs_[id];
  if ((o.kind == Kind::Folder) != folder)
    fail(o.label, o.path, folder ? "is a file output, not a folder" : "is a folder output, not a file");
  if (o.staged) fail(o.label, o.path, "staged twice");
  return o;
}

void OutputSet::stage_file(Id id, std::string_view contents) {
  Output& o = validated(id, false);
  if (o.action == Action::WriteThrough) {
    o.device_contents.assign(contents);
    o.staged = true;
    return;
  }
  // Created with the old file's permissions when replacing one (exact after
  // fchmod), else 0666 less the umask, as any new file.
  const mode_t create_mode = o.action == Action::Replace ? (o.old_mode & 0777) : 0666;
  for (int attempt = 0;; ++attempt) {
    o.temporary = temporary_name(o.name, "tmp");
    // Registered before it exists: the name is random, so nothing else can
    // be at it for the handler to remove by mistake.
    o.guard = std::make_unique<TemporaryOutput>(o.temporary_path());
    const int fd =
        ::openat(o.dir_fd, o.temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, create_mode);
    if (fd < 0 && errno == EEXIST && attempt < 8) {
      o.guard.reset();
      continue;
    }
    if (fd < 0) {
      const int error = errno;
      o.guard.reset();
      o.temporary.clear();
      fail(o.label, o.path, "cannot create a temporary file in " + o.folder + ": " + errno_phrase(error));
    }
    o.staged = true;  // from here the destructor removes it
    const bool written = write_all(fd, contents.data(), contents.size());
    int error = written ? 0 : (errno ? errno : EIO);
    if (!error && o.action == Action::Replace && ::fchmod(fd, o.old_mode & 0777) != 0) error = errno;
    if (!error && ::fsync(fd) != 0) error = errno;
    if (::close(fd) != 0 && !error) error = errno;
    if (error) {
      ::unlinkat(o.dir_fd, o.temporary.c_str(), 0);
      o.guard.reset();
      o.staged = false;
      fail(o.label, o.path, "write failed: " + errno_phrase(error));
    }
    return;
  }
}

std::string OutputSet::stage_folder(Id id) {
  Output& o = validated(id, true);
  for (int attempt = 0;; ++attempt) {
    o.temporary = temporary_name(o.name, "tmp");
    o.guard = std::make_unique<TemporaryOutput>(o.temporary_path());
    if (::mkdirat(o.dir_fd, o.temporary.c_str(), 0777) == 0) break;
    const int error = errno;
    o.guard.reset();
    if (error == EEXIST && attempt < 8) continue;
    o.temporary.clear();
    fail(o.label, o.path, "cannot create a temporary folder in " + o.folder + ": " + errno_phrase(error));
  }
  o.staged = true;
  return o.temporary_path();
}

namespace {

// Writes the marker into a staged folder: what it holds, so that a later
// replace can tell the folder is still only stepmix's.
void write_marker(int folder_fd, const std::string& label, const std::string& path) {
  std::string text = std::string(kOutputFolderMarkerHeader) + "\n";
  for (const std::string& name : folder_entries(folder_fd))
    if (name != kOutputFolderMarker) text += name + "\n";
  const int fd = ::openat(folder_fd, kOutputFolderMarker, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  bool ok = fd >= 0 && write_all(fd, text.data(), text.size()) && ::fsync(fd) == 0;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  ok = ok && ::fsync(folder_fd) == 0;
  if (!ok) fail(label, path, std::string("cannot write the ") + kOutputFolderMarker + " marker: " + errno_phrase(errno));
}

// rename without replacing what may have appeared at `to` since validation;
// plain renameat where the file system does not support the flag.
int rename_no_replace(int dir_fd, const std::string& from, const std::string& to) {
  if (::renameat2(dir_fd, from.c_str(), dir_fd, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  return ::renameat(dir_fd, from.c_str(), dir_fd, to.c_str());
}

}  // namespace

void OutputSet::commit() {
  if (committed_) throw Error("output", "outputs committed twice");
  for (auto& o : outputs_)
    if (!o->staged) fail(o->label, o->path, "was declared but never staged");
  for (auto& o : outputs_) {
    if (o->kind != Kind::Folder) continue;
    const int fd = ::openat(o->dir_fd, o->temporary.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail(o->label, o->path, "the staged folder is gone: " + errno_phrase(errno));
    if (o->action == Action::Replace) ::fchmod(fd, o->old_mode & 0777);
    try {
      write_marker(fd, o->label, o->path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }

  // Character devices first: written through, they cannot be put back, and
  // the way they fail (/dev/full, a closed terminal) is found before any
  // file is renamed into place, so that a failure leaves nothing new.
  for (auto& o : outputs_) {
    if (o->action != Action::WriteThrough) continue;
    const int fd = ::open(o->resolved.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    struct stat st {};
    std::string problem;
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
      problem = "cannot write the device: " + errno_phrase(errno);
    } else if (!write_all(fd, o->device_contents.data(), o->device_contents.size())) {
      problem = "write failed: " + errno_phrase(errno);
    }
    if (fd >= 0) ::close(fd);
    if (!problem.empty()) {
      discard_staged();
      fail(o->label, o->path, problem);
    }
  }

  std::string failure;
  {
    const FatalSignalsHeld held;  // the renames below happen all or not at all
    for (auto& owned : outputs_) {
      Output& o = *owned;
      if (o.action == Action::WriteThrough) continue;
      int rc = 0;
      if (o.action == Action::Replace && o.kind == Kind::Folder) {
        o.backup = temporary_name(o.name, "old");
        rc = ::renameat(o.dir_fd, o.name.c_str(), o.dir_fd, o.backup.c_str());
        if (rc == 0) rc = rename_no_replace(o.dir_fd, o.temporary, o.name);
      } else if (o.action == Action::Replace) {
        // A second link to the old file, to put it back if a later rename fails.
        o.backup = temporary_name(o.name, "old");
        if (::linkat(o.dir_fd, o.name.c_str(), o.dir_fd, o.backup.c_str(), 0) != 0) o.backup.clear();
        rc = ::renameat(o.dir_fd, o.temporary.c_str(), o.dir_fd, o.name.c_str());
      } else {
        rc = rename_no_replace(o.dir_fd, o.temporary, o.name);
      }
      if (rc != 0) {
        failure = (o.label.empty() ? "" : o.label + " ") + o.path + ": cannot rename the temporary " +
                  (o.kind == Kind::Folder ? "folder" : "file") + " into place: " + errno_phrase(errno);
        if (o.kind == Kind::Folder && !o.backup.empty())  // the old folder may already be aside
          ::renameat(o.dir_fd, o.backup.c_str(), o.dir_fd, o.name.c_str());
        o.backup.clear();
        break;
      }
      o.renamed = true;
    }
    if (!failure.empty()) {
      // Put back what was already replaced, newest first.
      for (auto it = outputs_.rbegin(); it != outputs_.rend(); ++it) {
        Output& o = **it;
        if (!o.renamed) continue;
        // A replaced file without a second link to the old one cannot be put
        // back: the new file stays rather than leaving nothing.
        if (o.action == Action::Replace && o.backup.empty()) continue;
        ::renameat(o.dir_fd, o.name.c_str(), o.dir_fd, o.temporary.c_str());  // the new one back to its temporary
        if (!o.backup.empty()) ::renameat(o.dir_fd, o.backup.c_str(), o.dir_fd, o.name.c_str());
        o.backup.clear();
        o.renamed = false;
      }
    } else {
      for (auto& o : outputs_) {
        if (o->kind == Kind::File && !o->backup.empty()) ::unlinkat(o->dir_fd, o->backup.c_str(), 0);
        if (o->dir_fd >= 0) ::fsync(o->dir_fd);
        if (o->renamed) o->guard.reset();
      }
    }
  }
  if (!failure.empty()) {
    discard_staged();
    throw Error("output", failure);
  }
  committed_ = true;

  // Old folders go last, once the new ones are in place; a signal meanwhile
  // finishes the removal.
  for (auto& o : outputs_) {
    if (o->kind != Kind::Folder || o->backup.empty()) continue;
    const std::string aside = o->folder + "/" + o->backup;
    const TemporaryOutput finish_on_signal(aside);
    std::error_code ec;
    std::filesystem::remove_all(aside, ec);
    if (ec) notes_.push_back(aside + ": the replaced folder could not be fully removed: " + ec.message());
  }
}

const std::string& OutputSet::destination(Id id) const {
  if (id >= outputs_.size()) throw Error("output", "no output number " + std::to_string(id));
  return outputs_[id]->resolved;
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  OutputSet set;
  const OutputSet::Id id = set.add_file("", path);
  set.validate();
  set.stage_file(id, contents);
  set.commit();
}

}  // namespace stepmix
