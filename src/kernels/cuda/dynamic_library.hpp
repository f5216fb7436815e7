// Private to the CUDA backend: the libraries it opens with dlopen at first use
// rather than links (cuBLASLt, cuDNN; cublaslt_library.hpp says why).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace stepmix::cuda::detail {

// Looks one entry point up in the library being tried (dlsym); null when absent.
using SymbolLookup = std::function<void*(const char* name)>;

// Opens the first of `candidates` (names dlopen searches for, or paths) that
// loads and whose entry points `resolve` finds: resolve(lookup) looks each
// one up, keeps it, and returns the names it could not find, comma-separated
// ("" when it has them all). The library stays open for the life of the
// process. Returns the candidate opened; throws Error("cuda", "<what>: no
// usable library (<each file tried and why it failed>); <advice>").
std::string open_first_library(const std::vector<std::string>& candidates,
                               const std::function<std::string(const SymbolLookup&)>& resolve,
                               const std::string& what, const std::string& advice);

}  // namespace stepmix::cuda::detail
