// A Backend that forwards every operation to another one and accounts for
// it: wall time, calls, FLOPs and (for the memory-bound kinds) bytes read and
// written per kind of operation. The transformer benchmark (CPU) and the CUDA
// forward benchmark load their models on it to say where a forward's time
// goes (Linears, attention, norms, rotary, element-wise ops, copies). Each
// operation is timed from the moment the inner backend has finished what was
// queued before it until it has finished the operation itself
// (Backend::wait: a GPU backend's stream is drained on both sides, so its
// queue no longer hides launch gaps, and the sum of the kinds is a little
// over an unprofiled forward). set_enabled(false) forwards without timing or
// waiting.
//
// FLOPs: 2·M·K·N per Linear output (what "2 · parameters · tokens" adds up
// to), 4·D·heads per (query, visible key) pair of attention (q·k and w·v; a
// causal problem sees q_rows·(q_rows+1)/2 pairs). Linear time includes the
// W8A8 activation quantization; quantizations() counts them per [M, K] so the
// benchmark can time that part on its own.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "backend/backend.hpp"
#include "quant/linear.hpp"

namespace stepmix {

struct OperationTotals {
  double seconds = 0;      // wall
  double cpu_seconds = 0;  // this process's CPU time (every thread): what the operation cost
                           // on a machine other jobs share
  int64_t calls = 0;
  double flops = 0;
  double bytes = 0;  // read + written, for the memory-bound kinds (none for Linears, attention, copies)
};

inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(Backend& inner) : inner_(inner) {}

  // Per operation kind: "linear w8a8", "attention", "rms_norm", ...
  const std::map<std::string, OperationTotals>& totals() const { return totals_; }
  // [M, K] of each x quantized by a W8A8 call -> how many times.
  const std::map<std::pair<int64_t, int64_t>, int64_t>& quantizations() const { return quantizations_; }
  void reset() {
    totals_.clear();
    quantizations_.clear();
  }
  void set_enabled(bool enabled) { enabled_ = enabled; }

  Device device() const override { return inner_.device(); }
  std::string describe() const override { return inner_.describe() + " (profiled)"; }
  std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    timed("copy", 0, [&] { inner_.upload(dst, host, bytes); });
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    timed("copy", 0, [&] { inner_.download(host, src, bytes); });
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    timed("copy", 0, [&] { inner_.copy(dst, src, bytes); });
  }
  void wait() override { inner_.wait(); }
  // The inner backend's memory, as it reports and checks it.
  std::size_t memory_held() const override { return inner_.memory_held(); }
  std::size_t memory_peak() const override { return inner_.memory_peak(); }
  void reset_memory_peak() override { inner_.reset_memory_peak(); }
  std::optional<std::size_t> memory_free() const override { return inner_.memory_free(); }
  void require_memory(const DeviceMemoryEstimate& estimate, const std::string& what) override {
    inner_.require_memory(estimate, what);
  }
  void require_runnable(const Linear& linear, Precision precision) const override {
    inner_.require_runnable(linear, precision);
  }
  const float* resident(const std::vector<float>& host) override { return inner_.resident(host); }

  int linear(std::span<const Linear* const> ls, const float* x, int64_t M, std::span<float* const> ys,
             Precision p) override {
    return linear_any(ls, M, p, [&] { return inner_.linear(ls, x, M, ys, p); });
  }
  int linear(std::span<const Linear* const> ls, const uint16_t* x, int64_t M, std::span<uint16_t* const> ys,
             Precision p) override {
    return linear_any(ls, M, p, [&] { return inner_.linear(ls, x, M, ys, p); });
  }

  void timestep_mlp(const Linear& first, const Linear& second, const float* sinusoid, int64_t U, float* hidden,
                    float* embedding) override {
    const double flops = 2.0 * double(U) * double(first.out_features()) *
                         double(first.in_features() + second.in_features());
    timed("timestep_mlp", flops, [&] { inner_.timestep_mlp(first, second, sinusoid, U, hidden, embedding); });
  }
  void attention(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) override {
    timed("attention", attention_flops(p), [&] { inner_.attention(p, q, k, v, out); });
  }
  void attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                 uint16_t* out) override {
    timed("attention", attention_flops(p), [&] { inner_.attention(p, q, k, v, out); });
  }

  void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, NormKind kind,
                float* out) override {
    timed("rms_norm", 0, [&] { inner_.rms_norm(x, rows, n, w, eps, kind, out); }, 8.0 * double(rows) * double(n));
  }
  void rms_norm(const float* x, int64_t rows, int64_t n, const float* w, float eps, NormKind kind,
                uint16_t* out) override {
    timed("rms_norm", 0, [&] { inner_.rms_norm(x, rows, n, w, eps, kind, out); }, 6.0 * double(rows) * double(n));
  }
  void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t d, const float* w, float eps, NormKind kind,
                        const float* cos, const float* sin) override {
    timed("head_norm_rotary", 0, [&] { inner_.head_norm_rotary(x, rows, heads, d, w, eps, kind, cos, sin); },
          rotary_bytes(rows, heads, d, sizeof *x));
  }
  void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t d, const float* w, float eps,
                        NormKind kind, const float* cos, const float* sin) override {
    timed("head_norm_rotary", 0, [&] { inner_.head_norm_rotary(x, rows, heads, d, w, eps, kind, cos, sin); },
          rotary_bytes(rows, heads, d, sizeof *x));
  }
  void silu_gate(const float* g, const float* u, int64_t n, float* out) override {
    timed("silu_gate", 0, [&] { inner_.silu_gate(g, u, n, out); }, 12.0 * double(n));
  }
  void silu_gate(const uint16_t* g, const uint16_t* u, int64_t n, uint16_t* out) override {
    timed("silu_gate", 0, [&] { inner_.silu_gate(g, u, n, out); }, 6.0 * double(n));
  }
  void relu_squared(float* x, int64_t n) override {
    timed("relu_squared", 0, [&] { inner_.relu_squared(x, n); }, 8.0 * double(n));
  }
  void relu_squared(uint16_t* x, int64_t n) override {
    timed("relu_squared", 0, [&] { inner_.relu_squared(x, n); }, 4.0 * double(n));
  }
  void add_to_residual(float* r, const float* y, int64_t n) override {
    timed("residual_add", 0, [&] { inner_.add_to_residual(r, y, n); }, 12.0 * double(n));
  }
  void add_to_residual(float* r, const uint16_t* y, int64_t n) override {
    timed("residual_add", 0, [&] { inner_.add_to_residual(r, y, n); }, 10.0 * double(n));
  }
  void add_row(float* x, int64_t rows, int64_t n, const float* row) override {
    timed("residual_add", 0, [&] { inner_.add_row(x, rows, n, row); }, 8.0 * double(rows) * double(n));
  }
  void widen_bf16(const uint16_t* x, int64_t n, float* out) override {
    timed("bf16_conversion", 0, [&] { inner_.widen_bf16(x, n, out); }, 6.0 * double(n));
  }
  void round_to_bf16(const float* x, int64_t n, uint16_t* out) override {
    timed("bf16_conversion", 0, [&] { inner_.round_to_bf16(x, n, out); }, 6.0 * double(n));
  }
  void patchify(const float* latent, const PatchGrid& grid, float* patches) override {
    timed("copies", 0, [&] { inner_.patchify(latent, grid, patches); });
  }
  void unpatchify(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames,
                  float* out) override {
    timed("copies", 0, [&] { inner_.unpatchify(patches, grid, noisy_frames, out); });
  }
  void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance,
                   float* guided) override {
    timed("loop", 0, [&] { inner_.cfg_combine(v_uncond, v_cond, count, guidance, guided); });
  }
  bool all_finite(const float* x, int64_t count) override {
    bool finite = true;
    timed("loop", 0, [&] { finite = inner_.all_finite(x, count); });
    return finite;
  }
  void scheduler_step(const sched::LatentStep& step, int64_t count, float* x, const float* v,
                      const sched::LatentHistory& history) override {
    timed("loop", 0, [&] { inner_.scheduler_step(step, count, x, v, history); });
  }

 private:
  // `bytes`: what the operation reads and writes (its operands once each).
  template <class Fn>
  void timed(const char* kind, double flops, const Fn& fn, double bytes = 0) {
    if (!enabled_) {
      fn();
      return;
    }
    inner_.wait();
    const double cpu0 = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    fn();
    inner_.wait();
    OperationTotals& t = totals_[kind];
    t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    t.cpu_seconds += process_cpu_seconds() - cpu0;
    t.calls += 1;
    t.flops += flops;
    t.bytes += bytes;
  }

  template <class Fn>
  int linear_any(std::span<const Linear* const> ls, int64_t M, Precision p, const Fn& fn);

  // x [rows, heads, D] read and written, cos and sin [rows, D] float32 read.
  static double rotary_bytes(int64_t rows, int64_t heads, int64_t d, std::size_t element) {
    return double(rows) * double(d) * (2.0 * double(heads) * double(element) + 8.0);
  }
  static double attention_flops(const AttentionProblem& p) {
    const double pairs = p.causal ? double(p.q_rows) * double(p.q_rows + 1) / 2 : double(p.q_rows) * double(p.kv_rows);
    return 4.0 * pairs * double(p.head_dim) * double(p.q_heads);
  }

  Backend& inner_;
  bool enabled_ = true;
  std::map<std::string, OperationTotals> totals_;
  std::map<std::pair<int64_t, int64_t>, int64_t> quantizations_;
};

template <class Fn>
int ProfilingBackend::linear_any(std::span<const Linear* const> ls, int64_t M, Precision p, const Fn& fn) {
  double flops = 0;
  for (const Linear* l : ls) flops += 2.0 * double(M) * double(l->in_features()) * double(l->out_features());
  int quantized = 0;
  const bool dense = !ls.front()->is_fp8();
  timed(dense ? "linear dense" : p == Precision::W8A8 ? "linear w8a8" : "linear w8a16", flops, [&] { quantized = fn(); });
  if (quantized > 0 && enabled_) quantizations_[{M, ls.front()->in_features()}] += quantized;
  return quantized;
}

}  // namespace stepmix
