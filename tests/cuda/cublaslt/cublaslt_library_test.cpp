// How the CUDA backend opens cuBLASLt (src/kernels/cuda/cublaslt_library.hpp):
// at its first use, by dlopen, rather than linked. None of this needs a GPU,
// so it runs wherever the backend is built with CUDA.
#include "kernels/cuda/cublaslt_library.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error_of.hpp"

namespace stepmix::test {
namespace {

using cuda::detail::cublaslt;
using cuda::detail::CublasLtLibrary;
using cuda::detail::open_cublaslt;

std::string failure_of(const std::vector<std::string>& candidates) {
  return error_of([&] { open_cublaslt(candidates); });
}

TEST(CublasLtLibrary, TheToolkitsLibraryOpensWithEveryEntryPoint) {
  const CublasLtLibrary& lt = cublaslt();
  EXPECT_NE(lt.path.find("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)), std::string::npos) << lt.path;
#define STEPMIX_EXPECT_RESOLVED(name) EXPECT_NE(lt.name, nullptr) << #name;
  STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
#undef STEPMIX_EXPECT_RESOLVED
  // A call into the library that needs no device.
  EXPECT_STREQ(lt.cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  // Opened once: every call answers the same table.
  EXPECT_EQ(&cublaslt(), &lt);
}

TEST(CublasLtLibrary, AMissingLibraryIsOneErrorNamingEveryFileTried) {
  const std::string message = failure_of({"libstepmix-no-such-library.so.13", "/nonexistent/libcublasLt.so.13"});
  EXPECT_EQ(message.rfind("[cuda] cuBLASLt: no usable library (", 0), 0u) << message;
  EXPECT_NE(message.find("libstepmix-no-such-library.so.13: cannot open shared object file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("/nonexistent/libcublasLt.so.13: cannot open shared object file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(CublasLtLibrary, ALibraryWithoutTheEntryPointsIsRefusedAndTheNextTried) {
  // zlib: on every machine that builds stepmix (zlib1g, a build dependency).
  const std::string message = failure_of({"libz.so.1"});
  EXPECT_NE(message.find("libz.so.1: lacks cublasLtCreate, cublasLtDestroy,"), std::string::npos) << message;
  EXPECT_NE(message.find("cublasLtMatmul"), std::string::npos) << message;
  const CublasLtLibrary lt = open_cublaslt({"libz.so.1", cublaslt().path});
  EXPECT_EQ(lt.path, cublaslt().path);
  EXPECT_EQ(lt.cublasLtMatmul, cublaslt().cublasLtMatmul);
}

}  // namespace
}  // namespace stepmix::test
