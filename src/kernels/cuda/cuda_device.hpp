// The CUDA backend's runtime plumbing: is there a usable GPU (and if not,
// why), how much memory it has, device buffers and streams that free
// themselves. No CUDA header is included here, so code above the backend
// compiles the same with or without the toolkit; a build without CUDA links
// the stub (stub/cuda_stub.cpp), whose entry points say so.
//
// Every CUDA or cuBLASLt failure is thrown as
//   stepmix::Error("cuda", "<operation>: <status name>: <message>")
// e.g. "[cuda] cudaMalloc(2.00 GiB): cudaErrorMemoryAllocation: out of memory";
// nothing in the backend aborts the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/byte_count.hpp"

struct CUstream_st;  // the CUDA runtime's stream (cudaStream_t is CUstream_st*)

namespace stepmix::cuda {

// A CUDA stream; nullptr is the legacy default stream. Pass a Stream's get().
using StreamHandle = CUstream_st*;

// True when this binary contains the CUDA backend (the build found the toolkit).
bool built_with_cuda();
// "CUDA 13.0.88, architectures 90a-real 90-virtual", or "built without CUDA".
std::string build_info();

// The kernels are compiled for Hopper (sm_90a, plus compute_90 PTX for newer
// GPUs), and W8A8 needs FP8 tensor cores: compute capability 9.0 or newer.
inline constexpr int kMinComputeMajor = 9;

struct DeviceInfo {
  bool usable = false;
  std::string reason;  // why not usable; "" when usable
  int device = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  int driver_version = 0;   // CUDA version the driver supports, 13000 = 13.0; 0: no driver
  int runtime_version = 0;  // CUDA runtime this binary was built with
  std::size_t total_memory = 0;
  std::size_t l2_bytes = 0;
};

// Looks at `device` (CUDA_VISIBLE_DEVICES applies); never throws. Not usable,
// with the reason: built without CUDA, no driver, driver older than the
// runtime, no device, or compute capability below 9.0.
DeviceInfo probe_device(int device = 0);
// probe_device(0).usable; the reason goes to *why_not when it is not.
bool cuda_available(std::string* why_not = nullptr);
// probe_device, or Error("cuda", reason) when the device is not usable.
DeviceInfo require_device(int device = 0);

struct MemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};
// The current device's free and total memory (cudaMemGetInfo).
MemoryInfo device_memory();
// "Does it fit" before a request starts: Error("cuda", memory_shortfall_message
// (...)) when needed_bytes exceeds what is free now.
void require_device_memory(std::size_t needed_bytes, const std::string& what);
// "<what>: needs 80.00 GiB of GPU memory, 12.50 GiB free of 139.80 GiB".
std::string memory_shortfall_message(std::size_t needed_bytes, const MemoryInfo& memory, const std::string& what);
// "1.50 GiB", "2.50 MiB", "1024 bytes" (core/byte_count.hpp).
using ::stepmix::format_bytes;

// Bytes held by DeviceBuffers in this process now, and the most held at once
// since the last reset (the "peak GPU memory" of a bench report).
std::size_t allocated_bytes();
std::size_t peak_allocated_bytes();
void reset_peak_allocated_bytes();

// Device memory from cudaMalloc (256-byte aligned), freed on destruction.
// Move-only. A zero-byte buffer holds no memory and a null pointer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

  // Synchronous copies of the first `bytes` bytes (checked against the
  // size), ordered after all work queued on the device on any stream: an
  // upload has landed when it returns, a download sees every kernel queued
  // before it. For tests, benchmarks and set-up; the run's own copies are
  // stream-ordered (copy_to_device, copy_to_host).
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

  template <class T>
  static DeviceBuffer from_host(const std::vector<T>& values) {
    DeviceBuffer buffer(values.size() * sizeof(T));
    buffer.upload(values.data(), buffer.bytes());
    return buffer;
  }
  template <class T>
  std::vector<T> to_host(std::size_t count) const {
    std::vector<T> values(count);
    download(values.data(), count * sizeof(T));
    return values;
  }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking CUDA stream, destroyed with the object. Move-only.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  StreamHandle get() const { return stream_; }
  void synchronize() const;

 private:
  StreamHandle stream_ = nullptr;
};

// Waits for everything queued on `stream`; a failure of any earlier kernel on
// it surfaces here as Error("cuda", "<operation>: ...").
void synchronize(StreamHandle stream, const char* operation = "cudaStreamSynchronize");
// Sets `bytes` bytes at `device` to zero, queued on `stream`.
void fill_zero(void* device, std::size_t bytes, StreamHandle stream);
// Device-to-device copy queued on `stream`.
void copy_device(void* destination, const void* source, std::size_t bytes, StreamHandle stream);
// Host memory (pageable or not) to and from device memory, in the order of
// `stream`'s work: both wait for the copy, so the host buffer may be reused
// or read as soon as they return.
void copy_to_device(void* device, const void* host, std::size_t bytes, StreamHandle stream);
void copy_to_host(void* host, const void* device, std::size_t bytes, StreamHandle stream);

// Milliseconds between two points of a stream, for benchmarks: start(),
// queue work, stop() (waits for it).
class StreamTimer {
 public:
  StreamTimer();
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;
  void start(StreamHandle stream);
  double stop_ms(StreamHandle stream);

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
};

}  // namespace stepmix::cuda
