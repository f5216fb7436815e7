// Per-prompt cache of the understanding stream's keys and values.
//
// The understanding (text) stream attends causally to itself only, so its
// per-layer K/V (after norms and rotary) depend on the prompt tokens, their
// position ids and the reasoner tower's precision, never on the latent or the
// timestep. A denoising loop computes them once per prompt (cond and uncond)
// and reuses them on every step. They also depend on the activation dtype,
// which is part of the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "backend/backend.hpp"

namespace stepmix {

// In backend memory, float32 or bf16 as the activation dtype of the key says.
struct UnderstandingLayerKV {
  std::unique_ptr<BackendBuffer> keys;    // [L, Hkv, D], after norm_k (or k_norm_und_for_gen) and rotary
  std::unique_ptr<BackendBuffer> values;  // [L, Hkv, D]
};

struct UnderstandingKV {
  std::vector<UnderstandingLayerKV> layers;  // one per decoder layer
};

struct UnderstandingKey {
  std::vector<int64_t> input_ids;  // [L]
  std::vector<float> positions;    // [3, L]: the text columns of position_ids
  Precision reasoner = Precision::BF16;
  ActivationDType activation = ActivationDType::F32;

  bool operator==(const UnderstandingKey& other) const;
};

class UnderstandingCache {
 public:
  explicit UnderstandingCache(std::size_t capacity = 2) : capacity_(capacity) {}

  std::shared_ptr<const UnderstandingKV> find(const UnderstandingKey& key);
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
