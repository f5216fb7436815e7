// Device memory handling the CUDA backend (cuda_backend.cpp) and its VAE
// device (cuda_vae_device.cpp) share. Host code only; built with CUDA.
#pragma once

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_device.hpp"

namespace stepmix::cuda_buffers {

// A buffer that only grows; its contents are not kept when it does.
template <class T>
T* grown(cuda::DeviceBuffer& buffer, int64_t count) {
  const std::size_t bytes = std::size_t(count) * sizeof(T);
  if (buffer.bytes() < bytes) {
    buffer = cuda::DeviceBuffer();  // free first
    buffer = cuda::DeviceBuffer(bytes);
  }
  return buffer.as<T>();
}

// A device copy of `bytes` host bytes, queued on `stream` (where
// DeviceBuffer::from_host would wait for the whole device).
inline cuda::DeviceBuffer uploaded(const void* host, std::size_t bytes, cuda::StreamHandle stream) {
  cuda::DeviceBuffer buffer(bytes);
  cuda::copy_to_device(buffer.data(), host, bytes, stream);
  return buffer;
}

// Small float32 host constants (norm weights) on the device, keyed by the
// host pointer and checked against a copy of the values: a vector freed with
// one model may be reallocated at the same address for the next, and must
// not read the old values.
class ResidentConstants {
 public:
  const float* get(const float* host, std::size_t count, cuda::StreamHandle stream) {
    if (count == 0) return nullptr;
    Entry& e = entries_[host];
    const std::size_t bytes = count * sizeof(float);
    if (e.values.size() != count || std::memcmp(e.values.data(), host, bytes) != 0) {
      e.buffer = uploaded(host, bytes, stream);
      e.values.assign(host, host + count);
    }
    return e.buffer.as<float>();
  }

 private:
  struct Entry {
    std::vector<float> values;
    cuda::DeviceBuffer buffer;
  };
  std::unordered_map<const float*, Entry> entries_;
};

}  // namespace stepmix::cuda_buffers
