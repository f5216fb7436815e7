// The registry of kernel variants and the start-up choice among them.
#include <array>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/cpu_features.hpp"
#include "kernels/kernel_set.hpp"
#include "kernels/tables.hpp"
#include "stepmix/error.hpp"

namespace stepmix::kernels {
namespace {

// Preference order for automatic selection is the reverse of this list.
// Built on first use: each table is a function-local constant of its file.
const std::array<KernelSet, 3>& variants_array() {
  static const std::array<KernelSet, 3> table{ref_kernel_set(), avx512_kernel_set(), amx_kernel_set()};
  return table;
}

// Per family, the most preferred variant that can run it.
template <class Family>
const KernelSet& best_for(std::span<const KernelSet> table, Family KernelSet::*family) {
  for (auto it = table.rbegin(); it != table.rend(); ++it)
    if (((*it).*family).supported()) return *it;
  return table.front();
}

const KernelSet& find_variant(std::span<const KernelSet> table, const std::string& name) {
  std::string known;
  for (const KernelSet& v : table) {
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

}  // namespace

std::span<const KernelSet> kernel_variants() { return variants_array(); }

const KernelSet& reference_kernels() { return variants_array().front(); }

const KernelSet& kernel_variant(const std::string& name) { return find_variant(variants_array(), name); }

ActiveKernels choose_kernels(std::span<const KernelSet> table, const char* forced) {
  if (forced && *forced) {
    const KernelSet& k = find_variant(table, forced);
    return {k.linear, k.attention, k.pointwise, k.convolution, k.name, k.name, k.name, k.name};
  }
  const KernelSet& linear = best_for(table, &KernelSet::linear);
  const KernelSet& attention = best_for(table, &KernelSet::attention);
  const KernelSet& pointwise = best_for(table, &KernelSet::pointwise);
  const KernelSet& convolution = best_for(table, &KernelSet::convolution);
  return {linear.linear,    attention.attention, pointwise.pointwise, convolution.convolution,
          linear.name,      attention.name,      pointwise.name,      convolution.name};
}

const ActiveKernels& active_kernels() {
  static const ActiveKernels chosen = choose_kernels(variants_array(), std::getenv("STEPMIX_ISA"));
  return chosen;
}

std::string ActiveKernels::describe() const {
  const std::string l = linear_variant, a = attention_variant, p = pointwise_variant, c = convolution_variant;
  if (l == a && a == p && p == c) return l;
  return "linear=" + l + " attention=" + a + " pointwise=" + p + " convolution=" + c;
}

namespace {
std::atomic<const ConvolutionFamily*> g_convolution_override{nullptr};
}  // namespace

const ConvolutionFamily& active_convolution() {
  const ConvolutionFamily* f = g_convolution_override.load(std::memory_order_acquire);
  return f ? *f : active_kernels().convolution;
}

void override_convolution(const ConvolutionFamily* family) {
  g_convolution_override.store(family, std::memory_order_release);
}

}  // namespace stepmix::kernels
