// Runtime plumbing of the CUDA backend: what a machine without a usable GPU
// (or a build without CUDA) reports, errors as one-line stepmix::Errors, the
// up-front memory check, buffers and their accounting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace stepmix::test {
namespace {

TEST(CudaDevice, ProbeNamesWhyTheDeviceIsUnusable) {
  const cuda::DeviceInfo info = cuda::probe_device(0);
  std::string why_not;
  EXPECT_EQ(cuda::cuda_available(&why_not), info.usable);
  if (info.usable) {
    EXPECT_TRUE(info.reason.empty());
    EXPECT_GE(info.compute_major, cuda::kMinComputeMajor);
    EXPECT_GT(info.total_memory, 0u);
    EXPECT_GT(info.multiprocessors, 0);
    EXPECT_FALSE(info.name.empty());
    return;
  }
  EXPECT_FALSE(info.reason.empty());
  EXPECT_EQ(why_not, info.reason);
  if (!cuda::built_with_cuda()) EXPECT_TRUE(contains(info.reason, "built without CUDA"));
  // The reason is one line: the CLI prints it as the whole error.
  EXPECT_EQ(info.reason.find('\n'), std::string::npos);
  const std::string error = error_of([] { cuda::require_device(0); });
  EXPECT_EQ(error, "[cuda] " + info.reason);
}

TEST(CudaDevice, ANonexistentDeviceIsNotUsable) {
  const cuda::DeviceInfo info = cuda::probe_device(4096);
  EXPECT_FALSE(info.usable);
  EXPECT_FALSE(info.reason.empty());
}

TEST(CudaDevice, WithoutAGpuOperationsThrowNamingTheOperationAndStatus) {
  if (cuda::cuda_available()) GTEST_SKIP() << "a GPU is present: covered by the tests below";
  const std::string allocation = error_of([] { cuda::DeviceBuffer buffer(1024); });
  ASSERT_TRUE(contains(allocation, "[cuda] cudaMalloc"));
  if (cuda::built_with_cuda()) {
    // "<operation>: <status name>: <message>"
    EXPECT_TRUE(contains(allocation, "cudaMalloc(1024 bytes): cudaError"));
  } else {
    EXPECT_TRUE(contains(allocation, "built without CUDA"));
  }
  EXPECT_TRUE(contains(error_of([] { cuda::GemmRunner runner; }),
                       cuda::built_with_cuda() ? "[cuda] cudaMalloc(32.00 MiB): cudaError" : "[cuda] GemmRunner"));
  EXPECT_TRUE(contains(error_of([] { cuda::Stream stream; }), "[cuda] cudaStreamCreate"));
  EXPECT_TRUE(contains(error_of([] { cuda::device_memory(); }), "[cuda] "));
}

TEST(CudaDevice, ShortfallMessageGivesNeededFreeAndTotal) {
  const cuda::MemoryInfo memory{std::size_t(12) << 30, std::size_t(140) << 30};
  EXPECT_EQ(cuda::memory_shortfall_message(std::size_t(80) << 30, memory, "generate 720p, 189 frames"),
            "generate 720p, 189 frames: needs 80.00 GiB of GPU memory, 12.00 GiB free of 140.00 GiB");
  EXPECT_EQ(cuda::format_bytes(std::size_t(3) << 29), "1.50 GiB");
  EXPECT_EQ(cuda::format_bytes(std::size_t(5) << 19), "2.50 MiB");
  EXPECT_EQ(cuda::format_bytes(1024), "1024 bytes");
}

TEST(CudaDevice, ZeroByteBufferHoldsNothing) {
  cuda::DeviceBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.bytes(), 0u);
}

class CudaDeviceOnGpu : public CudaTest {};

TEST_F(CudaDeviceOnGpu, BuffersRoundTripAndAreCounted) {
  const std::size_t before = cuda::allocated_bytes();
  cuda::reset_peak_allocated_bytes();
  {
    const std::vector<int32_t> values = {1, -2, 3, 1 << 30, -7};
    cuda::DeviceBuffer buffer = cuda::DeviceBuffer::from_host(values);
    EXPECT_EQ(cuda::allocated_bytes(), before + values.size() * 4);
    EXPECT_EQ(buffer.to_host<int32_t>(values.size()), values);
    cuda::DeviceBuffer moved = std::move(buffer);
    EXPECT_EQ(buffer.data(), nullptr);
    EXPECT_EQ(moved.to_host<int32_t>(values.size()), values);
    EXPECT_TRUE(contains(error_of([&] { moved.upload(values.data(), 1000); }), "DeviceBuffer::upload"));
  }
  EXPECT_EQ(cuda::allocated_bytes(), before);
  EXPECT_GE(cuda::peak_allocated_bytes(), before + 20);
}

TEST_F(CudaDeviceOnGpu, MemoryCheckRefusesWhatDoesNotFit) {
  const cuda::MemoryInfo memory = cuda::device_memory();
  EXPECT_GT(memory.total_bytes, 0u);
  EXPECT_LE(memory.free_bytes, memory.total_bytes);
  EXPECT_NO_THROW(cuda::require_device_memory(1 << 20, "a small request"));
  const std::string error = error_of([&] { cuda::require_device_memory(memory.total_bytes + 1, "a huge request"); });
  EXPECT_TRUE(contains(error, "[cuda] a huge request: needs "));
  EXPECT_TRUE(contains(error, " free of "));
}

TEST_F(CudaDeviceOnGpu, AllocationFailureIsAnErrorNotAnAbort) {
  const cuda::MemoryInfo memory = cuda::device_memory();
  const std::string error = error_of([&] { cuda::DeviceBuffer huge(memory.total_bytes * 4); });
  EXPECT_TRUE(contains(error, "[cuda] cudaMalloc("));
  EXPECT_TRUE(contains(error, "cudaErrorMemoryAllocation"));
  // The device is still usable afterwards.
  cuda::DeviceBuffer small(4096);
  EXPECT_NE(small.data(), nullptr);
}

TEST_F(CudaDeviceOnGpu, BadArgumentsAreRejectedBeforeLaunch) {
  EXPECT_TRUE(contains(error_of([] { cuda::quantize_e4m3_f32(nullptr, 10, 1.0f, nullptr, nullptr); }),
                       "[cuda] quantize_e4m3_f32: null device pointer"));
  const AttentionProblem bad{4, 4, 6, 4, 64, false};
  EXPECT_TRUE(contains(error_of([&] { cuda::attention_bf16(bad, nullptr, nullptr, nullptr, nullptr, nullptr); }),
                       "not a positive multiple of kv_heads"));
  cuda::GemmRunner runner;
  cuda::DeviceBuffer buffer(4096);
  const auto* codes = buffer.as<uint8_t>();
  EXPECT_TRUE(contains(error_of([&] {
                         cuda::gemm_w8a8(runner, codes, codes, 4, 12, 24, buffer.as<float>(), buffer.as<float>(), {},
                                         buffer.as<uint16_t>(), nullptr);
                       }),
                       "[cuda] gemm_w8a8: FP8 tensor-core GEMMs need K % 16 == 0 and N % 8 == 0, got N=12 K=24"));
  EXPECT_TRUE(contains(error_of([&] {
                         cuda::gemm_bf16(runner, buffer.as<uint16_t>(), buffer.as<uint16_t>(), 4, 8, 8,
                                         {kernels::BiasType::BF16, nullptr}, buffer.as<uint16_t>(), nullptr);
                       }),
                       "[cuda] gemm_bf16: bias type set but no bias pointer"));
}

TEST_F(CudaDeviceOnGpu, SeededFillsAreReproducibleAndFinite) {
  const int64_t n = 100003;
  cuda::DeviceBuffer a(n), b(n), f(n * 4);
  cuda::fill_random_e4m3(a.as<uint8_t>(), n, 5, nullptr);
  cuda::fill_random_e4m3(b.as<uint8_t>(), n, 5, nullptr);
  cuda::fill_uniform_f32(f.as<float>(), n, 9, -2.0f, 3.0f, nullptr);
  const auto codes = to_host<uint8_t>(a, n);
  EXPECT_EQ(codes, to_host<uint8_t>(b, n));
  std::vector<int> seen(256, 0);
  for (uint8_t c : codes) ++seen[c];
  EXPECT_EQ(seen[0x7F] + seen[0xFF], 0);
  EXPECT_GT(seen[0x7E], 0);
  EXPECT_GT(seen[0x00], 0);
  for (float x : to_host<float>(f, n)) {
    ASSERT_GE(x, -2.0f);
    ASSERT_LT(x, 3.0f);
  }
}

// The emulated device's own rules (tests/cuda/on_cpu/device_on_cpu.cpp),
// where a GPU's behaviour is undefined or arbitrary: new memory reads as NaN
// (all ones), not the zeros of fresh heap pages, and a copy between
// overlapping ranges is refused, not done as memmove would.
TEST(CudaEmulatedDevice, NewMemoryIsNanAndOverlappingCopiesAreRefused) {
  if (!contains(cuda::build_info(), "SIMT emulator")) GTEST_SKIP() << "the emulated device's rules (a GPU's differ)";
  cuda::DeviceBuffer buffer(64);
  std::vector<unsigned char> bytes(64, 0);
  buffer.download(bytes.data(), bytes.size());
  EXPECT_EQ(bytes, std::vector<unsigned char>(64, 0xFF));
  auto* base = buffer.as<unsigned char>();
  EXPECT_EQ(error_of([&] { cuda::copy_device(base + 8, base, 16, nullptr); }),
            "[cuda] cudaMemcpyAsync(device to device): destination and source overlap (16 bytes, 8 apart)");
  EXPECT_EQ(error_of([&] { cuda::copy_device(base, base + 15, 16, nullptr); }),
            "[cuda] cudaMemcpyAsync(device to device): destination and source overlap (16 bytes, 15 apart)");
  EXPECT_EQ(error_of([&] { cuda::copy_device(base + 32, base, 16, nullptr); }), "");  // touching is fine
}

}  // namespace
}  // namespace stepmix::test
