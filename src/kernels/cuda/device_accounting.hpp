// Private to the device runtimes (device.cpp on CUDA, the tests' emulated
// device): the process-wide count of DeviceBuffer bytes behind
// allocated_bytes() and peak_allocated_bytes() (device_common.cpp).
#pragma once

#include <cstddef>

namespace stepmix::cuda::detail {

void note_allocation(std::size_t bytes);
void note_release(std::size_t bytes);

}  // namespace stepmix::cuda::detail
