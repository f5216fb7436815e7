// Will a generation fit in memory? An estimate made before sampling, so a
// request too large for the machine is refused up front with the numbers
// instead of running into swap or the OOM killer half-way.
//
// What a generation needs on top of what the process already holds:
//  - the checkpoint's mapped weight files, less the pages of them already
//    resident in this process (FP8 weights stay memory-mapped, 1 byte per
//    parameter; every page is read each step, so all of it must fit);
//  - the forward's activations for the request's rows (both CFG passes when
//    they run batched), less the workspace already allocated;
//  - the understanding K/V of the prompts (one per CFG pass);
//  - the kernels' per-call scratch (packed activations and weight panels,
//    activation codes) of the largest Linear;
// against MemAvailable (/proc/meminfo): what the kernel can give without
// swapping. A margin of 10% of the non-weight parts + 64 MiB covers
// allocator slack and what the estimate leaves out (host-side latents, the
// scheduler, thread stacks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/config.hpp"

namespace stepmix {

struct GenerationShape {
  int64_t vision_tokens = 0;  // Nv of one pass
  int64_t cond_text_tokens = 0;
  int64_t uncond_text_tokens = 0;  // 0 without CFG
  bool cfg_batched = false;        // both passes' rows in one forward
  bool bf16_activations = false;
};

struct MemoryEstimate {
  int64_t mapped_weight_bytes = 0;    // the checkpoint files mapped
  int64_t resident_weight_bytes = 0;  // of which already in this process's memory
  int64_t activation_bytes = 0;       // the forward's workspace for this request
  int64_t workspace_bytes = 0;        // of which already allocated
  int64_t understanding_kv_bytes = 0;
  int64_t scratch_bytes = 0;
  int64_t margin_bytes = 0;

  // What the generation adds to this process, margin included.
  int64_t additional_bytes() const;
  // Everything the generation holds while it runs (already resident included).
  int64_t total_bytes() const;
};

MemoryEstimate estimate_generation_memory(const Cosmos3Config& config, const GenerationShape& shape,
                                          int64_t mapped_weight_bytes, int64_t resident_weight_bytes,
                                          int64_t workspace_bytes);

// Bytes of the *.safetensors files in a transformer folder (what is mapped).
int64_t mapped_weight_file_bytes(const std::string& folder);

// MemAvailable of /proc/meminfo in bytes, or nothing where it cannot be read.
std::optional<int64_t> memory_available_bytes();

// What a generation may use: MemAvailable, or less where
// STEPMIX_MEMORY_LIMIT_MIB=N caps it (room kept for other processes, or a
// container's limit that MemAvailable does not show); nothing where neither
// is known. A value that is not a positive integer is an error.
std::optional<int64_t> memory_budget_bytes();

// False where STEPMIX_MEMORY_CHECK=0 turns the up-front checks off.
bool memory_check_enabled();

// Throws stepmix::Error("generate", ...) with the estimate (needed against
// available, in GiB, and what the need is made of) when the generation does
// not fit in `available` bytes; nothing when the check is off.
void check_generation_fits(const MemoryEstimate& estimate, int64_t available, const std::string& what);

// "needs 1.20 GiB more, 0.80 GiB available": the reason a note gives.
std::string describe_shortfall(int64_t needed, int64_t available);

// "needs 1.20 GiB more (weights 13.90 GiB mapped, 13.90 GiB of them resident;
// activations ...), 15.10 GiB in all"
std::string describe(const MemoryEstimate& estimate);

}  // namespace stepmix
