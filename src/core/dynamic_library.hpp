// Libraries opened with dlopen at their first use rather than linked: what a
// run may never need should cost nothing to start and should not have to be
// installed for the rest to work. The CUDA backend opens cuBLASLt and cuDNN
// this way (kernels/cuda/cublaslt_library.hpp says why), the video code
// FFmpeg's libraries (io/ffmpeg_library.hpp).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace stepmix::detail {

// Looks one entry point up in the library being tried (dlsym); null when absent.
using SymbolLookup = std::function<void*(const char* name)>;

// Opens the first of `candidates` (names dlopen searches for, or paths) that
// loads and whose entry points `resolve` finds: resolve(lookup) looks each
// one up, keeps it, and returns the names it could not find, comma-separated
// ("" when it has them all). The library stays open for the life of the
// process. Returns the candidate opened; throws Error(component, "<what>: no
// usable library (<each file tried and why it failed>); <advice>").
std::string open_first_library(const std::string& component, const std::vector<std::string>& candidates,
                               const std::function<std::string(const SymbolLookup&)>& resolve,
                               const std::string& what, const std::string& advice);

// A table of entry points (a struct with one member per function, named and
// typed as the library's, and `path`) from the first of `candidates` that has
// them all: resolve(library, lookup, missing) fills the members, adding the
// name of each it cannot find to `missing` (STEPMIX_LOOK_UP does one).
// Throws as open_first_library.
template <class Library, class Resolve>
Library open_table(const std::string& component, const std::vector<std::string>& candidates, Resolve resolve,
                   const std::string& what, const std::string& advice) {
  Library library;
  const std::string path = open_first_library(
      component, candidates,
      [&](const SymbolLookup& lookup) {
        library = {};
        std::string missing;
        resolve(library, lookup, missing);
        return missing;
      },
      what, advice);
  library.path = path;
  return library;
}

// In a resolve function of open_table: library.name = lookup("name"), or the
// name added to `missing`.
#define STEPMIX_LOOK_UP(name)                                               \
  library.name = reinterpret_cast<decltype(library.name)>(lookup(#name)); \
  if (!library.name) missing += std::string(missing.empty() ? "" : ", ") + #name;

// The table `open()` returns, made on the first call (thread-safe) and kept
// for the life of the process. A failed open is not kept: the next call
// tries the files again and throws again. One per Library type.
template <class Library, class Open>
const Library& open_once(Open open) {
  static std::mutex mutex;
  static std::unique_ptr<const Library> library;
  std::lock_guard lock(mutex);
  if (!library) library = std::make_unique<const Library>(open());
  return *library;
}

// The soname `soname`, then the same file in `folder` when one is given (the
// build's library folder; null or "" when the build knows none): the
// candidates of a library the build knows.
inline std::vector<std::string> soname_then_folder(const std::string& soname, const char* folder) {
  std::vector<std::string> candidates{soname};
  if (folder && *folder) candidates.push_back(std::string(folder) + "/" + soname);
  return candidates;
}

}  // namespace stepmix::detail
