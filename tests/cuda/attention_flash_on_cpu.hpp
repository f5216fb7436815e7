// The flash attention kernel's own source (attention_flash_kernel.cuh) run on
// the CPU by the SIMT emulator, with the launch geometry of
// attention_flash_bf16. Used by the CPU tests of the kernel and by the GPU
// test that holds the emulation to the hardware.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "on_cpu/simt_emulator.hpp"

namespace stepmix::test {

// q, k, v and the result in the layouts of cuda::attention_flash_bf16. The
// result starts as 0xA5A5 everywhere, so a row the kernel forgets shows up.
// Throws stepmix::Error ("[simt] ...") for anything the emulator refuses.
std::vector<uint16_t> flash_attention_on_cpu(const AttentionProblem& p, const std::vector<uint16_t>& q,
                                             const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                                             cuda::FlashVariant variant);

// The mma.sync instructions the launch must have issued: per block, per key
// tile it visits, per warp and per 16-row tile, kD/16 · kTileKeys/8 for S and
// kTileKeys/16 · D/8 for P·V (a check that causal blocks stop at their
// diagonal tile and ragged blocks still visit every key).
uint64_t flash_expected_mma_count(const AttentionProblem& p, cuda::FlashVariant variant);

}  // namespace stepmix::test
