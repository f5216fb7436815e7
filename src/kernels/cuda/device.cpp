// Device detection, memory, buffers, streams and timers of cuda_device.hpp on
// the CUDA runtime (what touches no device is device_common.cpp).
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/device_accounting.hpp"

namespace stepmix::cuda {

using detail::check_cuda;

namespace {

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string status_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}


}  // namespace

bool built_with_cuda() { return true; }

std::string build_info() { return STEPMIX_CUDA_BUILD_INFO; }

DeviceInfo probe_device(int device) {
  DeviceInfo info;
  info.device = device;
  cudaRuntimeGetVersion(&info.runtime_version);
  // 0 when no driver is installed (libcuda.so.1 cannot be loaded).
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess) info.driver_version = 0;
  if (info.driver_version == 0) {
    info.reason = "no NVIDIA driver (libcuda.so.1 not found)";
    return info;
  }
  // CUDA's minor version compatibility: a driver of the runtime's major
  // release runs its machine code even when older than the runtime.
  if (info.driver_version / 1000 < info.runtime_version / 1000) {
    info.reason = "NVIDIA driver too old: it supports CUDA " + version_text(info.driver_version) +
                  ", this build needs CUDA " + std::to_string(info.runtime_version / 1000) + ".x";
    return info;
  }
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted == cudaErrorNoDevice || (counted == cudaSuccess && count == 0)) {
    info.reason = "no CUDA device";
    return info;
  }
  if (counted != cudaSuccess) {
    info.reason = "cudaGetDeviceCount: " + status_text(counted);
    return info;
  }
  if (device < 0 || device >= count) {
    info.reason = "device " + std::to_string(device) + " does not exist (" + std::to_string(count) + " present)";
    return info;
  }
  cudaDeviceProp prop{};
  const cudaError_t described = cudaGetDeviceProperties(&prop, device);
  if (described != cudaSuccess) {
    info.reason = "cudaGetDeviceProperties: " + status_text(described);
    return info;
  }
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_memory = prop.totalGlobalMem;
  info.l2_bytes = std::size_t(prop.l2CacheSize);
  if (prop.major < kMinComputeMajor) {
    info.reason = "device " + std::to_string(device) + " (" + info.name + ") has compute capability " +
                  std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                  "; the CUDA backend needs 9.0 or newer (Hopper: sm_90a kernels, FP8 tensor cores)";
    return info;
  }
  // The default build (cmake/cuda.cmake) holds sm_90a machine code; any other
  // GPU runs its PTX, which only a driver at least as new as the runtime can
  // compile.
  if (!(prop.major == 9 && prop.minor == 0) && info.driver_version < info.runtime_version) {
    info.reason = "NVIDIA driver too old: it supports CUDA " + version_text(info.driver_version) +
                  ", and compiling this build's CUDA " + version_text(info.runtime_version) +
                  " PTX for compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                  " needs a driver that supports it";
    return info;
  }
  info.usable = true;
  return info;
}

DeviceInfo require_device(int device) {
  DeviceInfo info = probe_device(device);
  if (!info.usable) throw Error("cuda", info.reason);
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  return info;
}

MemoryInfo device_memory() {
  MemoryInfo memory;
  check_cuda(cudaMemGetInfo(&memory.free_bytes, &memory.total_bytes), "cudaMemGetInfo");
  return memory;
}

// ---------------------------------------------------------------- DeviceBuffer
DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    // A failed allocation is also the runtime's "last error": cleared here, or
    // the next launch's check would report it as its own.
    cudaGetLastError();
    detail::throw_cuda_error("cudaMalloc(" + format_bytes(bytes) + ")", status);
  }
  data_ = p;
  bytes_ = bytes;
  detail::note_allocation(bytes);
}

void DeviceBuffer::release() noexcept {
  if (!data_) return;
  // A failure here (a sticky error from an earlier fault) has already been
  // reported where it happened; a destructor cannot throw.
  cudaFree(data_);
  detail::note_release(bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  detail::require(bytes <= bytes_, "DeviceBuffer::upload",
                  std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (!bytes) return;
  // Kernels on a non-blocking stream may still use the buffer: cudaMemcpy's
  // legacy stream does not wait for them.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before DeviceBuffer::upload)");
  check_cuda(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(host to device)");
  // From pageable memory cudaMemcpy returns once the bytes are staged, before
  // the DMA lands, and a kernel on a non-blocking stream does not wait for
  // the legacy stream that carries it.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after DeviceBuffer::upload)");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  detail::require(bytes <= bytes_, "DeviceBuffer::download",
                  std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  if (!bytes) return;
  // cudaMemcpy on the legacy stream does not wait for the non-blocking
  // streams that may have written the buffer.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before DeviceBuffer::download)");
  check_cuda(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)");
}

// ---------------------------------------------------------------- Stream
Stream::Stream() {
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}

void Stream::synchronize() const { cuda::synchronize(stream_); }

void synchronize(StreamHandle stream, const char* operation) {
  check_cuda(cudaStreamSynchronize(stream), operation);
}

void fill_zero(void* device, std::size_t bytes, StreamHandle stream) {
  if (bytes) check_cuda(cudaMemsetAsync(device, 0, bytes, stream), "cudaMemsetAsync");
}

void copy_device(void* destination, const void* source, std::size_t bytes, StreamHandle stream) {
  if (bytes)
    check_cuda(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync(device to device)");
}

void copy_to_device(void* device, const void* host, std::size_t bytes, StreamHandle stream) {
  if (!bytes) return;
  check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync(host to device, " + format_bytes(bytes) + ")");
  synchronize(stream, "cudaStreamSynchronize (after a host-to-device copy)");
}

void copy_to_host(void* host, const void* device, std::size_t bytes, StreamHandle stream) {
  if (!bytes) return;
  check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream),
             "cudaMemcpyAsync(device to host, " + format_bytes(bytes) + ")");
  synchronize(stream, "cudaStreamSynchronize (after a device-to-host copy)");
}

// ---------------------------------------------------------------- StreamTimer
StreamTimer::StreamTimer() {
  cudaEvent_t a = nullptr, b = nullptr;
  check_cuda(cudaEventCreate(&a), "cudaEventCreate");
  const cudaError_t second = cudaEventCreate(&b);
  if (second != cudaSuccess) {
    cudaEventDestroy(a);
    detail::throw_cuda_error("cudaEventCreate", second);
  }
  start_ = a;
  stop_ = b;
}

StreamTimer::~StreamTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void StreamTimer::start(StreamHandle stream) {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream), "cudaEventRecord");
}

double StreamTimer::stop_ms(StreamHandle stream) {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
             "cudaEventElapsedTime");
  return ms;
}

}  // namespace stepmix::cuda
