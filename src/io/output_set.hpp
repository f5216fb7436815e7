// The outputs of one run, declared up front, checked before any work, staged
// under unpredictable temporary names and committed together.
//
//   OutputSet outputs;
//   outputs.add_input("checkpoint", shard_path);        // never overwritten
//   const auto png = outputs.add_file("--out", out_path);
//   const auto latents = outputs.add_file("--save-latents", latents_path);
//   outputs.validate();                                 // before sampling: throws on the first problem
//   ... the run ...
//   outputs.stage_file(png, encode_png(image, chunks));
//   outputs.stage_file(latents, encode_safetensors(...));
//   outputs.commit();                                   // every rename, or none
//
// Rules (each violation is stepmix::Error("output", "<label> <path>: ...")):
//  - A file output is a path that does not exist, or a regular file the user
//    may write (its permission bits are kept; the owner becomes the writer;
//    other hard links keep the old contents). A character device (/dev/null,
//    a terminal) is written through, never replaced. A directory, FIFO,
//    socket or block device is refused.
//  - A symbolic link is written through: its target is replaced and the link
//    stays. A link to a missing file is refused.
//  - The folder that will hold the output must exist and be writable.
//  - Two outputs naming the same file (after resolving links, or the same
//    device and inode) are refused, except character devices.
//  - An output that is the same file (device and inode) as a declared input
//    is refused, as is replacing a folder that holds a declared input.
//  - A folder output (compare's report) must not exist, unless replacing was
//    asked for and the folder is one stepmix wrote: it holds the marker file
//    kOutputFolderMarker listing what stepmix put there, and nothing else.
//
// Staging creates each temporary exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, a
// random name "<name>.tmp.<16 hex digits>" in the destination's folder, so a
// link or FIFO planted at a predictable name is never followed and cannot
// block), writes and fsyncs it, and registers it for removal on a fatal
// signal (io/temporary_outputs.hpp). commit() holds the fatal signals off,
// renames every temporary into place (an old folder is renamed aside first),
// fsyncs the folders, and on a failed rename puts back what it had already
// replaced. An old folder is deleted last, after the new one is in place.
// Until commit() nothing new is visible; a set destroyed uncommitted removes
// its temporaries.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stepmix {

// The marker stepmix writes into every folder output. Its first line is
// kOutputFolderMarkerHeader, then one top-level entry name per line.
inline constexpr const char* kOutputFolderMarker = ".stepmix-output";
inline constexpr const char* kOutputFolderMarkerHeader = "stepmix output folder";

class OutputSet {
 public:
  using Id = std::size_t;

  OutputSet();
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // An input the outputs must not overwrite (checkpoint shards, --noise, the
  // prompts file). A folder (a model) adds every weights and config file
  // below it (*.safetensors, the index, config.json, model_index.json, the
  // tokenizer's and scheduler's files, ...), through linked folders too (a
  // vae/ that links elsewhere); what a run wrote there (a preview PNG, a
  // bench.json) stays replaceable. A path that does not exist is ignored
  // (its reader reports it). `label` names it in messages.
  void add_input(const std::string& label, const std::string& path);
  // A file output. `label` names it in messages ("--out"; may be empty).
  Id add_file(const std::string& label, const std::string& path);
  // A folder output; `replace` allows replacing a folder stepmix wrote.
  // `replace_option` is the option that sets it ("--force"), named when an
  // existing folder is refused; empty for a command that never replaces.
  Id add_folder(const std::string& label, const std::string& path, bool replace,
                const std::string& replace_option = "");

  // Checks every output against the rules above. Call before any work.
  void validate();

  // After validate(): writes `contents` to a fresh temporary beside the file
  // output's destination (or keeps it for a character device).
  void stage_file(Id id, std::string_view contents);
  // After validate(): creates the temporary folder of a folder output and
  // returns its path, for the caller to fill. The marker is added at commit.
  std::string stage_folder(Id id);

  // Every output must have been staged. Renames all into place (see above).
  void commit();

  // Where an output is written once validated: its path with symbolic links
  // resolved (absolute).
  const std::string& destination(Id id) const;
  // Things commit could not tidy up without failing the run (an old folder
  // that could not be fully deleted), one line each.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Output;
  struct Input {
    std::string label, path, resolved;
    dev_t dev;
    ino_t ino;
    std::string folder;  // the folder input it was found in; empty for one given itself
  };
  // A folder of a model input holding files its loaders read (resolved as
  // the loaders list it): weights, config.json, other fixed names.
  struct ModelFolder {
    std::string label, input, path, resolved;
    bool weights = false, config = false, named = false;
  };
  Output& validated(Id id, bool folder);
  void check_duplicates_and_inputs() const;
  void check_not_read_by_a_model(const Output& output) const;
  void discard_staged() noexcept;

  std::vector<std::unique_ptr<Output>> outputs_;
  std::vector<Input> inputs_;
  std::vector<ModelFolder> model_folders_;
  std::vector<std::string> notes_;
  bool validated_ = false;
  bool committed_ = false;
};

// A set of one file: writes `contents` to `path` with the rules and staging
// above (validate, stage, commit).
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace stepmix
