// What cuda_device.hpp promises that touches no device, shared by the CUDA
// runtime's implementation (device.cpp) and the tests' emulated device
// (tests/cuda/on_cpu/device_on_cpu.cpp): argument checks, cuda_available and
// the memory check on top of probe_device and device_memory, the allocation
// counters, and DeviceBuffer's moves.
#include <atomic>
#include <string>

#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/device_accounting.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {
namespace {

std::atomic<std::size_t> g_allocated{0};
std::atomic<std::size_t> g_peak{0};

}  // namespace

namespace detail {

void require(bool condition, const char* function, const std::string& what) {
  if (!condition) throw Error("cuda", std::string(function) + ": " + what);
}

void note_allocation(std::size_t bytes) {
  const std::size_t now = g_allocated.fetch_add(bytes) + bytes;
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

void note_release(std::size_t bytes) { g_allocated.fetch_sub(bytes); }

}  // namespace detail

bool cuda_available(std::string* why_not) {
  const DeviceInfo info = probe_device(0);
  if (!info.usable && why_not) *why_not = info.reason;
  return info.usable;
}

void require_device_memory(std::size_t needed_bytes, const std::string& what) {
  const MemoryInfo memory = device_memory();
  if (needed_bytes > memory.free_bytes) throw Error("cuda", memory_shortfall_message(needed_bytes, memory, what));
}

std::size_t allocated_bytes() { return g_allocated.load(); }
std::size_t peak_allocated_bytes() { return g_peak.load(); }
void reset_peak_allocated_bytes() { g_peak.store(g_allocated.load()); }

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace stepmix::cuda
