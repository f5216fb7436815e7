// The one table of kernel variants, and the start-up choice among them.
#include <array>
#include <cstdlib>
#include <string>

#include "core/cpu_features.hpp"
#include "kernels/linear_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix::kernels {

// Defined by the ISA-specific files (src/kernels/cpu/*_<isa>.cpp).
extern const KernelSet kAvx512Kernels;
extern const KernelSet kAmxKernels;

namespace {

bool always_supported() { return true; }

const KernelSet kRefKernels{
    "ref",
    always_supported,
    ref::quantize_e4m3_f32,
    ref::quantize_e4m3_bf16,
    ref::dequantize_e4m3_to_bf16,
    ref::gemm,
};

// Preference order for automatic selection is the reverse of this list.
// Built on first use, after every variant's constant has been initialised.
const std::array<KernelSet, 3>& variants() {
  static const std::array<KernelSet, 3> table{kRefKernels, kAvx512Kernels, kAmxKernels};
  return table;
}

const KernelSet& select_at_start_up() {
  if (const char* forced = std::getenv("STEPMIX_ISA"); forced && *forced) return kernel_variant(forced);
  for (auto it = variants().rbegin(); it != variants().rend(); ++it)
    if (it->supported()) return *it;
  return variants().front();
}

}  // namespace

std::span<const KernelSet> kernel_variants() { return variants(); }

const KernelSet& kernel_variant(const std::string& name) {
  std::string known;
  for (const KernelSet& v : variants()) {
    if (name == v.name) {
      if (!v.supported())
        throw Error("kernels", "STEPMIX_ISA=" + name + " is not supported by this CPU/OS (found: " +
                                   cpu_features().describe() + ")");
      return v;
    }
    known += known.empty() ? "" : "|";
    known += v.name;
  }
  throw Error("kernels", "unknown kernel variant '" + name + "' (expected " + known + ")");
}

const KernelSet& active_kernels() {
  static const KernelSet& chosen = select_at_start_up();
  return chosen;
}

}  // namespace stepmix::kernels
