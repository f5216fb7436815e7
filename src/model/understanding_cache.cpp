#include "model/understanding_cache.hpp"

#include <cstring>

namespace stepmix {

bool UnderstandingKey::operator==(const UnderstandingKey& other) const {
  return reasoner == other.reasoner && activation == other.activation && input_ids == other.input_ids &&
         positions.size() == other.positions.size() &&
         std::memcmp(positions.data(), other.positions.data(), positions.size() * sizeof(float)) == 0;
}

std::shared_ptr<const UnderstandingKV> UnderstandingCache::find(const UnderstandingKey& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return entries_.front().kv;
    }
  }
  return nullptr;
}

void UnderstandingCache::insert(UnderstandingKey key, std::shared_ptr<const UnderstandingKV> kv) {
  entries_.remove_if([&](const Entry& e) { return e.key == key; });
  entries_.push_front(Entry{std::move(key), std::move(kv)});
  while (entries_.size() > capacity_) entries_.pop_back();
}

void UnderstandingCache::set_capacity(std::size_t capacity) {
  capacity_ = capacity;
  while (entries_.size() > capacity_) entries_.pop_back();
}

}  // namespace stepmix
