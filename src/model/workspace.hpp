// Grow-only scratch of the transformer forward. Buffers are sized for the
// largest call seen so far and reused by every layer and every later call, so
// a steady-state forward allocates nothing: fresh multi-megabyte buffers cost
// page faults on first touch, which at 4096 tokens add up to a visible share
// of a layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stepmix {

template <class T>
class ScratchBuffer {
 public:
  // At least `count` elements; contents are whatever the last user left.
  T* get(int64_t count) {
    if (std::size_t(count) > data_.size()) data_.resize(std::size_t(count));
    return data_.data();
  }
  std::size_t bytes() const { return data_.size() * sizeof(T); }

 private:
  std::vector<T> data_;
};

// Buffers of one forward call (rows = the stream being processed: L text rows
// or Nv vision rows). The understanding and generation streams run one after
// the other and share them.
struct ForwardWorkspace {
  // Float32 activations (ActivationDType::F32) and the residual stream (both).
  ScratchBuffer<float> residual;   // [Nv, E]: the generation stream
  ScratchBuffer<float> normed;     // [rows, E]
  ScratchBuffer<float> q;          // [rows, Hq·D]
  ScratchBuffer<float> keys;       // [L + Nv, Hkv·D]
  ScratchBuffer<float> values;     // [L + Nv, Hkv·D]
  ScratchBuffer<float> own_keys;   // [L, Hkv·D]: understanding keys without k_norm_und_for_gen
  ScratchBuffer<float> attended;   // [rows, Hq·D]
  ScratchBuffer<float> projected;  // [rows, E]
  ScratchBuffer<float> up, gate;   // [rows, I]
  // Bf16 activations (ActivationDType::BF16), same shapes.
  ScratchBuffer<uint16_t> normed_bf16, q_bf16, keys_bf16, values_bf16, own_keys_bf16, attended_bf16;
  ScratchBuffer<uint16_t> projected_bf16, up_bf16, gate_bf16;

  std::size_t bytes() const {
    std::size_t total = 0;
    for (const ScratchBuffer<float>* b :
         {&residual, &normed, &q, &keys, &values, &own_keys, &attended, &projected, &up, &gate})
      total += b->bytes();
    for (const ScratchBuffer<uint16_t>* b : {&normed_bf16, &q_bf16, &keys_bf16, &values_bf16, &own_keys_bf16,
                                             &attended_bf16, &projected_bf16, &up_bf16, &gate_bf16})
      total += b->bytes();
    return total;
  }
};

}  // namespace stepmix
