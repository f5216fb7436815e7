// The KernelSet of each ISA, one table per file (ref_table.cpp,
// cpu/avx512_table.cpp, cpu/amx_table.cpp). Each is a function-local constant
// so that the registry (dispatch.cpp) never reads one before it is built.
#pragma once

#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {

const KernelSet& ref_kernel_set();
const KernelSet& avx512_kernel_set();
const KernelSet& amx_kernel_set();

}  // namespace stepmix::kernels
