// Private to the CUDA backend: cuBLASLt, opened when the first GEMM engine is
// made rather than linked. Linking it costs every run of the program, on any
// device, about 0.1 s and 200 MiB of resident memory at start-up (the
// library's own initialisation), and a program that needs it to start cannot
// start on a machine without it, not even for --device cpu. Opened here,
// a CPU run never loads it and a missing library is the usual one-line error
// of --device cuda.
//
// The table's members have the library's names and types, so a call reads
// cublaslt().cublasLtMatmul(...). The CPU build of the backend (tests/cuda/on_cpu/)
// fills the same table with its model of the library.
#pragma once

#include <cublasLt.h>

#include <string>
#include <vector>

// Every cuBLASLt entry point stepmix calls.
#define STEPMIX_CUBLASLT_ENTRY_POINTS(X)  \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

namespace stepmix::cuda::detail {

struct CublasLtLibrary {
#define STEPMIX_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_CUBLASLT_MEMBER)
#undef STEPMIX_CUBLASLT_MEMBER
  std::string path;  // the file it was opened from
};

// The library, opened on the first call (thread-safe) and kept open for the
// life of the process. Throws Error("cuda", ...) naming every file tried and
// why each failed, or the entry points a library lacks; the next call tries
// again. Callers keep the reference rather than calling this per call.
const CublasLtLibrary& cublaslt();

// Opens the first of `candidates` (names dlopen searches for, or paths) that
// loads and has every entry point. What cublaslt() does with the soname of
// the cuBLASLt the backend was compiled against, then the toolkit's library
// folder; the tests give it other lists.
CublasLtLibrary open_cublaslt(const std::vector<std::string>& candidates);

}  // namespace stepmix::cuda::detail
