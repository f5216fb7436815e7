// Per-prompt cache of the understanding stream's keys and values.
//
// The understanding (text) stream attends causally to itself only, so its
// per-layer K/V (after norms and rotary) depend on the prompt tokens, their
// position ids and the reasoner tower's precision, never on the latent or the
// timestep (shared spec cosmos3-transformer.md §6). A denoising loop computes
// them once per prompt (cond and uncond) and reuses them on every step.
// They also depend on the activation dtype, which is part of the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "model/activation_dtype.hpp"
#include "quant/linear.hpp"

namespace stepmix {

// What the generation stream reads from one layer of the understanding stream,
// in the activation dtype it was computed with (the other pair stays empty).
struct UnderstandingLayerKV {
  std::vector<float> keys;    // [L, Hkv, D], after norm_k (or k_norm_und_for_gen) and rotary
  std::vector<float> values;  // [L, Hkv, D]
  std::vector<uint16_t> keys_bf16, values_bf16;  // same, bf16 (ActivationDType::BF16)
};

struct UnderstandingKV {
  std::vector<UnderstandingLayerKV> layers;  // one per decoder layer
};

// Everything the understanding stream's K/V depend on.
struct UnderstandingKey {
  std::vector<int64_t> input_ids;  // [L]
  std::vector<float> positions;    // [3, L]: the text columns of position_ids
  LinearMode reasoner_mode = LinearMode::Dense;
  ActivationDType activation = ActivationDType::F32;

  // Positions compare bit for bit (no -0 == +0 or NaN surprises).
  bool operator==(const UnderstandingKey& other) const;
};

// Least-recently-used, a handful of prompts (default 2: cond + uncond).
class UnderstandingCache {
 public:
  explicit UnderstandingCache(std::size_t capacity = 2) : capacity_(capacity) {}

  // nullptr on a miss; a hit becomes the most recently used entry.
  std::shared_ptr<const UnderstandingKV> find(const UnderstandingKey& key);
  // Replaces an entry with the same key; evicts the least recently used
  // entry beyond capacity. Capacity 0 stores nothing.
  void insert(UnderstandingKey key, std::shared_ptr<const UnderstandingKV> kv);

  void set_capacity(std::size_t capacity);
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }
  std::size_t hits() const { return hits_; }

 private:
  struct Entry {
    UnderstandingKey key;
    std::shared_ptr<const UnderstandingKV> kv;
  };
  std::size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::size_t hits_ = 0;
};

}  // namespace stepmix
