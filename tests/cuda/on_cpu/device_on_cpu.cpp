// The runtime of the emulated device (kernels/cuda/cuda_device.hpp) for the
// CPU build of the CUDA kernels: device memory is host memory, 256-byte
// aligned as cudaMalloc's, and every allocation is registered, so that copies
// and kernel launches can refuse a pointer that is not device memory (on a
// GPU it would fault; here it would silently work), and filled with ones
// (DeviceBuffer's constructor says why). Streams run in order at once: every
// operation is complete when it returns.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/device_accounting.hpp"
#include "simt_emulator.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {
namespace {

// What device_memory() reports: an H200's 140 GiB would let the memory
// estimates pass everything, and the tests that fill memory would allocate it.
constexpr std::size_t kTotalBytes = std::size_t(16) << 30;

constexpr std::size_t kPoisonedBytes = std::size_t(1) << 30;

std::mutex g_mutex;
std::map<const unsigned char*, std::size_t> g_allocations;  // start → bytes

}  // namespace

namespace detail {
bool in_device_memory(const void* p, std::size_t bytes) {
  const auto* q = static_cast<const unsigned char*>(p);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.upper_bound(q);
  if (it == g_allocations.begin()) return false;
  --it;
  return q + bytes <= it->first + it->second;
}

std::vector<std::pair<const void*, std::size_t>> device_allocations() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<std::pair<const void*, std::size_t>> all;
  for (const auto& [start, bytes] : g_allocations) all.emplace_back(start, bytes);
  return all;
}

namespace {
std::map<const void*, std::size_t> g_max_dynamic_shared;  // kernel → bytes (g_mutex)
}  // namespace

cudaError_t set_max_dynamic_shared_bytes(const void* kernel, int bytes) {
  if (bytes < 0 || std::size_t(bytes) > simt::kOptInMaxDynamicSharedBytes) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_dynamic_shared[kernel] = std::size_t(bytes);
  return cudaSuccess;
}

std::size_t max_dynamic_shared_bytes(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_max_dynamic_shared.find(kernel);
  return it == g_max_dynamic_shared.end() ? simt::kDefaultMaxDynamicSharedBytes : it->second;
}
}  // namespace detail

namespace {
void require_device_pointer(const void* p, std::size_t bytes, const char* operation) {
  if (bytes > 0 && !detail::in_device_memory(p, bytes))
    throw Error("cuda", std::string(operation) + ": " + std::to_string(bytes) +
                            " bytes that are not device memory (the CPU build of the kernels checks every copy)");
}
}  // namespace

bool built_with_cuda() { return true; }
std::string build_info() { return "SIMT emulator on the CPU (tests)"; }

DeviceInfo probe_device(int device) {
  DeviceInfo info;
  info.device = device;
  if (device != 0) {
    info.reason = "no CUDA device " + std::to_string(device) + " (the emulator has one)";
    return info;
  }
  info.usable = true;
  info.name = "SIMT emulator (CPU)";
  info.compute_major = 9;
  info.compute_minor = 0;
  info.multiprocessors = 1;
  info.driver_version = info.runtime_version = 13000;
  info.total_memory = kTotalBytes;
  return info;
}

DeviceInfo require_device(int device) {
  DeviceInfo info = probe_device(device);
  if (!info.usable) throw Error("cuda", info.reason);
  return info;
}

MemoryInfo device_memory() {
  const std::size_t used = std::min(allocated_bytes(), kTotalBytes);
  return {kTotalBytes - used, kTotalBytes};
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  if (bytes > device_memory().free_bytes)
    throw Error("cuda", "cudaMalloc(" + format_bytes(bytes) + "): cudaErrorMemoryAllocation: out of memory");
  data_ = ::operator new(bytes, std::align_val_t(256));
  bytes_ = bytes;
  // cudaMalloc's memory holds whatever was there; fresh heap pages are
  // zeros, which would hide a kernel that reads what nothing wrote. All ones
  // is NaN as float32, BF16 and E4M3 alike, so such a read shows in outputs.
  // (Above kPoisonedBytes the pages stay untouched: filling would commit
  // them all; no test here allocates more than 64 MiB.)
  if (bytes <= kPoisonedBytes) std::memset(data_, 0xFF, bytes);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_allocations[static_cast<const unsigned char*>(data_)] = bytes;
  }
  detail::note_allocation(bytes);
}

void DeviceBuffer::release() noexcept {
  if (!data_) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_allocations.erase(static_cast<const unsigned char*>(data_));
  }
  detail::note_release(bytes_);
  ::operator delete(data_, std::align_val_t(256));
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  detail::require(bytes <= bytes_, "DeviceBuffer::upload",
                  std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (bytes) std::memcpy(data_, host, bytes);
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  detail::require(bytes <= bytes_, "DeviceBuffer::download",
                  std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  if (bytes) std::memcpy(host, data_, bytes);
}

// A stream is a distinct non-null handle; work on it is done when queued.
Stream::Stream() : stream_(reinterpret_cast<StreamHandle>(new char)) {}
Stream::~Stream() { delete reinterpret_cast<char*>(stream_); }
Stream::Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    delete reinterpret_cast<char*>(stream_);
    stream_ = other.stream_;
    other.stream_ = nullptr;
  }
  return *this;
}
void Stream::synchronize() const {}

void synchronize(StreamHandle, const char*) {}

void fill_zero(void* device, std::size_t bytes, StreamHandle) {
  require_device_pointer(device, bytes, "cudaMemsetAsync");
  if (bytes) std::memset(device, 0, bytes);
}

void copy_device(void* destination, const void* source, std::size_t bytes, StreamHandle) {
  require_device_pointer(destination, bytes, "cudaMemcpyAsync(device to device) destination");
  require_device_pointer(source, bytes, "cudaMemcpyAsync(device to device) source");
  // A GPU's copy of overlapping ranges is undefined; memmove would hide one.
  const auto* d = static_cast<const unsigned char*>(destination);
  const auto* s = static_cast<const unsigned char*>(source);
  if (bytes && d < s + bytes && s < d + bytes)
    throw Error("cuda", "cudaMemcpyAsync(device to device): destination and source overlap (" +
                            std::to_string(bytes) + " bytes, " + std::to_string(d > s ? d - s : s - d) + " apart)");
  if (bytes) std::memcpy(destination, source, bytes);
}

void copy_to_device(void* device, const void* host, std::size_t bytes, StreamHandle) {
  require_device_pointer(device, bytes, "cudaMemcpyAsync(host to device) destination");
  if (bytes) std::memcpy(device, host, bytes);
}

void copy_to_host(void* host, const void* device, std::size_t bytes, StreamHandle) {
  require_device_pointer(device, bytes, "cudaMemcpyAsync(device to host) source");
  if (bytes) std::memcpy(host, device, bytes);
}

StreamTimer::StreamTimer() : start_(new std::chrono::steady_clock::time_point()) {}
StreamTimer::~StreamTimer() { delete static_cast<std::chrono::steady_clock::time_point*>(start_); }
void StreamTimer::start(StreamHandle) {
  *static_cast<std::chrono::steady_clock::time_point*>(start_) = std::chrono::steady_clock::now();
}
double StreamTimer::stop_ms(StreamHandle) {
  const auto begin = *static_cast<std::chrono::steady_clock::time_point*>(start_);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
}

}  // namespace stepmix::cuda
