#include "model/rope_cache.hpp"

#include <cstring>

namespace stepmix {

std::shared_ptr<const ResidentRope> RopeCache::get(const Cosmos3Config& config, Backend& backend,
                                                   const std::vector<float>& position_ids, RopeTables* host) {
  const int64_t S = int64_t(position_ids.size() / 3), D = config.head_dim;
  if (host) *host = build_rope_tables(config, position_ids.data(), S);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const std::vector<float>& key = (*it)->position_ids;
    if (key.size() == position_ids.size() &&
        std::memcmp(key.data(), position_ids.data(), key.size() * sizeof(float)) == 0) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front();
    }
  }
  RopeTables built;
  const RopeTables& tables = host ? *host : (built = build_rope_tables(config, position_ids.data(), S));
  auto entry = std::make_shared<ResidentRope>();
  entry->position_ids = position_ids;
  entry->sequence_length = S;
  entry->head_dim = D;
  entry->tables = backend.allocate(std::size_t(2 * S * D) * sizeof(float));
  float* device = entry->tables->as<float>();
  backend.upload(device, tables.cos.data(), tables.cos.size() * sizeof(float));
  backend.upload(device + S * D, tables.sin.data(), tables.sin.size() * sizeof(float));
  ++builds_;
  if (capacity_ > 0) {
    entries_.push_front(entry);
    while (entries_.size() > capacity_) entries_.pop_back();
  }
  return entry;
}

void RopeCache::set_capacity(std::size_t capacity) {
  capacity_ = capacity;
  while (entries_.size() > capacity_) entries_.pop_back();
}

std::size_t RopeCache::bytes() const {
  std::size_t total = 0;
  for (const auto& e : entries_) total += e->tables->bytes();
  return total;
}

}  // namespace stepmix
