#include "pipeline/memory_estimate.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "stepmix/error.hpp"

namespace stepmix {

int64_t MemoryEstimate::additional_bytes() const {
  return std::max<int64_t>(0, mapped_weight_bytes - resident_weight_bytes) +
         std::max<int64_t>(0, activation_bytes - workspace_bytes) + understanding_kv_bytes + scratch_bytes +
         margin_bytes;
}

int64_t MemoryEstimate::total_bytes() const {
  return mapped_weight_bytes + std::max(activation_bytes, workspace_bytes) + understanding_kv_bytes + scratch_bytes +
         margin_bytes;
}

MemoryEstimate estimate_generation_memory(const Cosmos3Config& c, const GenerationShape& s,
                                          int64_t mapped_weight_bytes, int64_t resident_weight_bytes,
                                          int64_t workspace_bytes) {
  const int64_t T = s.bf16_activations ? 2 : 4;  // bytes per activation element
  const int64_t E = c.hidden_size, I = c.intermediate_size, QW = c.q_width(), KV = c.kv_width();
  const int64_t F = c.latent_patch_size * c.latent_patch_size * c.latent_channel, D = c.head_dim;
  const bool cfg = s.uncond_text_tokens > 0;
  const int64_t Nv = s.vision_tokens, L = std::max(s.cond_text_tokens, s.uncond_text_tokens);
  const int64_t R = cfg && s.cfg_batched ? 2 * Nv : Nv;  // generation rows of one forward
  const int64_t rows = std::max(L, R);
  const int64_t kv_rows = cfg && s.cfg_batched ? s.cond_text_tokens + s.uncond_text_tokens + 2 * Nv : L + Nv;
  const int64_t samples = cfg && s.cfg_batched ? 2 : 1;

  MemoryEstimate e;
  e.mapped_weight_bytes = mapped_weight_bytes;
  e.resident_weight_bytes = resident_weight_bytes;
  e.workspace_bytes = workspace_bytes;
  // The slots of model/workspace.hpp at their largest for this request.
  e.activation_bytes = L * E * 4 + R * E * 4                           // und, residual (float32)
                       + rows * (E + QW + QW + E) * std::max<int64_t>(T, 2)  // normed, q, attended, projected
                       + 2 * kv_rows * KV * T + L * KV * T             // keys, values, own_keys
                       + (samples > 1 ? 2 * R * KV * T : 0)            // gen_keys, gen_values
                       + 2 * rows * I * T                              // up, gate
                       + 2 * R * F * 4                                 // patches, output
                       + (cfg ? 2 : 1) * 2 * (L + Nv) * D * 4         // rope tables, one per prompt (cached)
                       + E * 4;                                        // embedding
  e.understanding_kv_bytes =
      c.num_hidden_layers * 2 * (s.cond_text_tokens + s.uncond_text_tokens) * KV * T;
  // Per-call kernel scratch of the largest Linear (K = I for down_proj, N·K =
  // I·E for the MLP): activation codes (W8A8), packed activations (float32
  // in the rows layout, bf16 on AMX tiles), weights packed once per call
  // (AMX, more than 256 rows), and attention's packed keys and values.
  e.scratch_bytes = rows * I + rows * I * T + I * E * 2 + 2 * kv_rows * KV * 2;
  e.margin_bytes = (e.activation_bytes + e.understanding_kv_bytes + e.scratch_bytes) / 10 + (int64_t(64) << 20);
  return e;
}

int64_t mapped_weight_file_bytes(const std::string& folder) {
  std::error_code ec;
  int64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec)) total += int64_t(entry.file_size(ec));
  return total;
}

std::optional<int64_t> memory_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

std::optional<int64_t> memory_budget_bytes() {
  std::optional<int64_t> budget = memory_available_bytes();
  const char* env = std::getenv("STEPMIX_MEMORY_LIMIT_MIB");
  if (!env) return budget;
  char* end = nullptr;
  errno = 0;
  const long long mib = std::strtoll(env, &end, 10);
  if (*env == '\0' || *end != '\0' || errno != 0 || mib <= 0 || mib > (int64_t(1) << 43))
    throw Error("generate", std::string("STEPMIX_MEMORY_LIMIT_MIB: expected a positive integer (MiB), got '") + env + "'");
  const int64_t limit = int64_t(mib) << 20;
  return budget ? std::min(*budget, limit) : limit;
}

namespace {
std::string gib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return s;
}
}  // namespace

std::string describe(const MemoryEstimate& e) {
  return "needs " + gib(e.additional_bytes()) + " more (weights " + gib(e.mapped_weight_bytes) + " mapped, " +
         gib(e.resident_weight_bytes) + " of them resident; activations " + gib(e.activation_bytes) + ", " +
         gib(e.workspace_bytes) + " already allocated; understanding K/V " + gib(e.understanding_kv_bytes) +
         "; kernel scratch " + gib(e.scratch_bytes) + "; margin " + gib(e.margin_bytes) + "), " +
         gib(e.total_bytes()) + " in all";
}

bool memory_check_enabled() {
  const char* env = std::getenv("STEPMIX_MEMORY_CHECK");
  return !(env && std::string(env) == "0");
}

void check_generation_fits(const MemoryEstimate& e, int64_t available, const std::string& what) {
  if (!memory_check_enabled() || e.additional_bytes() <= available) return;
  throw Error("generate", what + ": does not fit in memory: " + describe(e) + ", but " + gib(available) +
                              " is available (MemAvailable, capped by STEPMIX_MEMORY_LIMIT_MIB); use fewer tokens "
                              "or a machine with more memory (STEPMIX_MEMORY_CHECK=0 skips this check)");
}

std::string describe_shortfall(int64_t needed, int64_t available) {
  return "needs " + gib(needed) + " more, " + gib(available) + " available";
}

}  // namespace stepmix
