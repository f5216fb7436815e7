// Where a kernel test runs, for the tests written once for both (typed test
// suites over KernelDevices):
// - OnGpu: the cuda:: entry points on device buffers; skips, saying why,
//   without a usable GPU;
// - OnCpu: the same kernel sources on host memory through the SIMT emulator
//   (kernels_on_cpu.hpp); runs everywhere, so CI checks every kernel's
//   arithmetic, lane layout and launch geometry without a GPU, and a GPU run
//   checks that the hardware agrees.
// Each provides Buffer (as cuda::DeviceBuffer: a size in bytes, as<T>(),
// data(), upload(host, bytes)), upload, poisoned (0xA5 bytes), download and
// the kernels by their cuda:: names, less the stream.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels_on_cpu.hpp"

namespace stepmix::test {

// Host memory aligned like cudaMalloc's (256 bytes), so the kernels take the
// same 16-byte paths as on the GPU.
class HostBuffer {
 public:
  explicit HostBuffer(std::size_t bytes)
      : storage_(static_cast<unsigned char*>(::operator new(bytes + 1, std::align_val_t(256)))) {}
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(storage_.get());
  }
  void* data() const { return storage_.get(); }
  void upload(const void* host, std::size_t bytes) { std::memcpy(storage_.get(), host, bytes); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { ::operator delete(p, std::align_val_t(256)); }
  };
  std::unique_ptr<unsigned char, Free> storage_;
};

#define STEPMIX_GPU_KERNEL(name)       \
  template <class... A>                \
  static void name(A... arguments) {   \
    cuda::name(arguments..., nullptr); \
  }
#define STEPMIX_CPU_KERNEL(name)     \
  template <class... A>              \
  static void name(A... arguments) { \
    on_cpu::name(arguments...);      \
  }
#define STEPMIX_KERNELS(KERNEL)   \
  KERNEL(rms_norm_to_bf16)        \
  KERNEL(head_norm_rotary_bf16)   \
  KERNEL(silu_gate_bf16)          \
  KERNEL(silu_f32)                \
  KERNEL(relu_squared_bf16)       \
  KERNEL(add_bf16_to_f32)         \
  KERNEL(add_row_f32)             \
  KERNEL(widen_bf16)              \
  KERNEL(round_to_bf16)           \
  KERNEL(quantize_e4m3_f32)       \
  KERNEL(quantize_e4m3_bf16)      \
  KERNEL(dequantize_e4m3_to_bf16) \
  KERNEL(linear_rows_f32)         \
  KERNEL(timestep_sinusoid)       \
  KERNEL(cfg_combine)             \
  KERNEL(euler_step)              \
  KERNEL(unipc_step_f32)          \
  KERNEL(flag_non_finite_f32)     \
  KERNEL(patchify)                \
  KERNEL(unpatchify)              \
  KERNEL(fill_zero)               \
  KERNEL(conv_gather_taps_bf16)   \
  KERNEL(conv_epilogue_f32)       \
  KERNEL(channel_rms_norm)        \
  KERNEL(upsample_nearest2)       \
  KERNEL(duplicate_up)            \
  KERNEL(channel_slice)           \
  KERNEL(unpatchify_clamped)      \
  KERNEL(patchify_pixels)         \
  KERNEL(average_down)            \
  KERNEL(split_qkv)               \
  KERNEL(softmax_rows)

struct OnGpu {
  using Buffer = cuda::DeviceBuffer;
  static std::string unavailable() {
    std::string why;
    return cuda::cuda_available(&why) ? "" : "no usable CUDA GPU: " + why;
  }
  template <class T>
  static Buffer upload(const std::vector<T>& values) {
    return to_device(values);
  }
  template <class T>
  static Buffer poisoned(std::size_t count) {
    return test::poisoned<T>(count);
  }
  template <class T>
  static std::vector<T> download(const Buffer& buffer, std::size_t count) {
    return to_host<T>(buffer, count);
  }
  STEPMIX_KERNELS(STEPMIX_GPU_KERNEL)
};

struct OnCpu {
  using Buffer = HostBuffer;
  static std::string unavailable() { return ""; }
  template <class T>
  static Buffer upload(const std::vector<T>& values) {
    Buffer b(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(b.as<T>(), values.data(), values.size() * sizeof(T));
    return b;
  }
  template <class T>
  static Buffer poisoned(std::size_t count) {
    Buffer b(count * sizeof(T));
    std::memset(b.as<unsigned char>(), 0xA5, count * sizeof(T));
    return b;
  }
  template <class T>
  static std::vector<T> download(const Buffer& buffer, std::size_t count) {
    return std::vector<T>(buffer.as<T>(), buffer.as<T>() + count);
  }
  STEPMIX_KERNELS(STEPMIX_CPU_KERNEL)
};

#undef STEPMIX_KERNELS
#undef STEPMIX_CPU_KERNEL
#undef STEPMIX_GPU_KERNEL

using KernelDevices = ::testing::Types<OnGpu, OnCpu>;

struct KernelDeviceNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, OnGpu> ? "Gpu" : "CpuEmulation";
  }
};

template <class Device>
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Device::unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
};

}  // namespace stepmix::test
