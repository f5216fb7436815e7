// What the CPU and the OS let stepmix run, detected once (CPUID + XGETBV).
#pragma once

#include <string>

namespace stepmix {

struct CpuFeatures {
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vbmi = false;  // byte permutes (vpermi2b): optional fast path
  bool fma = false, f16c = false;
  bool os_saves_avx512_state = false;  // XCR0 has SSE, AVX, opmask, ZMM state
  bool amx_tile = false, amx_bf16 = false;
  bool os_saves_amx_state = false;     // XCR0 has XTILECFG and XTILEDATA

  // Everything the *_avx512.cpp kernels use, enabled by the OS.
  bool can_run_avx512_bf16() const {
    return avx512f && avx512bw && avx512vl && avx512dq && avx512_bf16 && fma && f16c && os_saves_avx512_state;
  }
  // AMX also needs a per-process permission from Linux (request_amx_permission).
  bool can_run_amx_bf16() const { return can_run_avx512_bf16() && amx_tile && amx_bf16 && os_saves_amx_state; }
  // "avx512f avx512bw ... amx-bf16": the flags found, for logs and errors.
  std::string describe() const;
};

const CpuFeatures& cpu_features();

// Asks Linux for the AMX tile-data state (arch_prctl ARCH_REQ_XCOMP_PERM).
// True when granted (idempotent); false on other systems or when refused.
bool request_amx_permission();

}  // namespace stepmix
