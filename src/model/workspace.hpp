// Grow-only scratch of the transformer forward, in backend memory. A slot is
// sized for the largest call seen so far and reused by every layer and every
// later call, so a steady-state forward allocates nothing: fresh
// multi-megabyte buffers cost page faults on first touch, which at 4096
// tokens add up to a visible share of a layer. A slot holds float32 or bf16
// activations as the call needs (one arena for both activation dtypes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"

namespace stepmix {

// rows = the stream being processed: L text rows, or the vision rows of every
// sample of the call stacked (R = Σ Nv). The understanding and generation
// streams run one after the other and share the activation slots.
enum class Slot {
  und,        // [L, E] float32: the understanding residual stream
  residual,   // [R, E] float32: the generation residual stream
  normed,     // [rows, E]
  q,          // [rows, Hq·D]
  keys,       // per sample [L + Nv, Hkv·D], one after the other
  values,     // per sample [L + Nv, Hkv·D], one after the other
  gen_keys,   // [R, Hkv·D]: generation keys of a batch before they join their sample's
  gen_values, // [R, Hkv·D]
  own_keys,   // [L, Hkv·D]: understanding keys without k_norm_und_for_gen
  attended,   // [rows, Hq·D]
  projected,  // [rows, E]
  up,         // [rows, I]
  gate,       // [rows, I]
  patches,    // [R, p²C] float32: the patchified latents
  embedding,  // [U, E] float32: one timestep embedding per distinct timestep
  time_sinusoid,  // [U, 256] float32: the timestep MLP's input
  time_hidden,    // [U, E] float32: its hidden layer
  output,     // [Σ Nn, p²C] float32: the read-out
  count
};

class ForwardWorkspace {
 public:
  explicit ForwardWorkspace(Backend& backend) : backend_(&backend) {}

  // At least `count` elements of T; contents are whatever the last user left.
  template <class T>
  T* get(Slot slot, int64_t count) {
    std::unique_ptr<BackendBuffer>& b = buffers_[std::size_t(slot)];
    const std::size_t bytes = std::size_t(count) * sizeof(T);
    if (!b || b->bytes() < bytes) {
      b.reset();  // free first: the old contents are not kept
      b = backend_->allocate(bytes);
    }
    return b->as<T>();
  }

  std::size_t bytes() const {
    std::size_t total = 0;
    for (const auto& b : buffers_)
      if (b) total += b->bytes();
    return total;
  }

 private:
  Backend* backend_;
  std::array<std::unique_ptr<BackendBuffer>, std::size_t(Slot::count)> buffers_;
};

}  // namespace stepmix
