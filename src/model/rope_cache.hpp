// The rotary tables of recent samples, kept in backend memory across
// forwards.
//
// The mRoPE cos/sin tables depend on a sample's position ids ([3, S]) and the
// transformer's config only, never on the latent or the timestep, so every
// step of a denoising loop uses the same ones (at 44k tokens, tens of MB that
// would otherwise be built on the host and uploaded at every forward). The
// key is the position ids themselves, compared bit for bit (not a hash, and
// not ==, under which -0 equals 0 while sin(-0) is -0); the config and the
// backend are fixed for the transformer that owns the cache. Each entry has a
// buffer of its own, apart from the forward workspace, so growing or
// reallocating the workspace leaves it valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "model/config.hpp"
#include "model/rope.hpp"

namespace stepmix {

// [2, S, D] float32 in backend memory: cos then sin, one row of D per token.
struct ResidentRope {
  std::vector<float> position_ids;  // [3, S]: the key
  int64_t sequence_length = 0;
  int64_t head_dim = 0;
  std::unique_ptr<BackendBuffer> tables;

  const float* cos() const { return tables->as<float>(); }
  const float* sin() const { return tables->as<float>() + sequence_length * head_dim; }
};

class RopeCache {
 public:
  // Two samples: the conditional and unconditional pass of a CFG run.
  explicit RopeCache(std::size_t capacity = 2) : capacity_(capacity) {}

  // The tables of `position_ids` ([3, S]) from the cache, or built on the
  // host and uploaded now (then kept, evicting the least recently used).
  // `host`, when given, also receives the host tables (built again on a hit:
  // debug records). An entry handed out stays valid while held, evicted or
  // not, so the samples of one call never lose theirs.
  std::shared_ptr<const ResidentRope> get(const Cosmos3Config& config, Backend& backend,
                                          const std::vector<float>& position_ids, RopeTables* host = nullptr);

  // 0 keeps nothing: every forward builds and uploads its tables.
  void set_capacity(std::size_t capacity);
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }
  // Tables built and uploaded so far (misses).
  std::size_t builds() const { return builds_; }
  // Backend bytes the kept entries hold.
  std::size_t bytes() const;

 private:
  std::size_t capacity_;
  std::list<std::shared_ptr<const ResidentRope>> entries_;  // most recently used first
  std::size_t builds_ = 0;
};

}  // namespace stepmix
