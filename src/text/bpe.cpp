#include "text/bpe.hpp"

#include <algorithm>
#include <mutex>

namespace stepmix::text {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

struct Symbol {
  int32_t id;
  int32_t prev, next;  // -1 at the ends
  bool alive;
};

struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t new_id;
};
// std::push_heap keeps the largest on top: "larger" = higher rank, then
// further right, so the top is the lowest rank, leftmost.
bool later(const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; }

}  // namespace

void MergeTable::reserve(std::size_t merges) {
  std::size_t capacity = 16;
  while (capacity < 2 * merges) capacity *= 2;
  if (capacity > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{kEmpty, {}});
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) insert(int32_t(s.key >> 32), int32_t(uint32_t(s.key)), s.entry);
  }
}

std::size_t MergeTable::slot_of(uint64_t key) const {
  // Fibonacci hashing: the top bits of key * 2^64/phi.
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = std::size_t((key * 0x9E3779B97F4A7C15ull) >> shift_);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

void MergeTable::grow() { reserve(std::max<std::size_t>(8, slots_.size())); }

void MergeTable::insert(int32_t left, int32_t right, MergeEntry entry) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const uint64_t key = pair_key(left, right);
  Slot& s = slots_[slot_of(key)];
  if (s.key == kEmpty) ++size_;
  s = Slot{key, entry};
}

const MergeEntry* MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const Slot& s = slots_[slot_of(pair_key(left, right))];
  return s.key == kEmpty ? nullptr : &s.entry;
}

BpeModel::BpeModel(MergeTable merges, const int32_t (&byte_ids)[256]) : merges_(std::move(merges)) {
  std::copy(std::begin(byte_ids), std::end(byte_ids), byte_ids_);
}

void BpeModel::merge(std::string_view bytes, std::vector<int32_t>& ids) const {
  ids.clear();
  const int32_t n = static_cast<int32_t>(bytes.size());
  if (n == 1) {
    ids.push_back(byte_ids_[static_cast<unsigned char>(bytes[0])]);
    return;
  }
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.resize(static_cast<std::size_t>(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    symbols[i] = Symbol{byte_ids_[static_cast<unsigned char>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto push = [&](int32_t pos) {
    const Symbol& s = symbols[pos];
    if (s.next < 0) return;
    if (const MergeEntry* m = merges_.find(s.id, symbols[s.next].id)) {
      heap.push_back({m->rank, pos, m->new_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    // A stale entry: the pair at this position changed since it was queued.
    const MergeEntry* m = merges_.find(left.id, symbols[left.next].id);
    if (!m || m->new_id != top.new_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.new_id;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

void BpeModel::merge_reference(std::string_view bytes, std::vector<int32_t>& ids) const {
  ids.clear();
  for (char c : bytes) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  for (;;) {
    std::size_t best = ids.size();
    MergeEntry best_entry{};
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const MergeEntry* m = merges_.find(ids[i], ids[i + 1]);
      if (m && (best == ids.size() || m->rank < best_entry.rank)) {
        best = i;
        best_entry = *m;
      }
    }
    if (best == ids.size()) return;
    ids[best] = best_entry.new_id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int64_t>& out) const {
  if (bytes.empty()) return;
  const bool cacheable = bytes.size() <= kMaxCachedBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    const auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      const int32_t* p = cache_ids_.data() + it->second.first;
      out.insert(out.end(), p, p + it->second.second);
      return;
    }
  }
  thread_local std::vector<int32_t> ids;
  merge(bytes, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kMaxCachedWords && cache_.find(bytes) == cache_.end()) {
      cache_.emplace(std::string(bytes), std::make_pair(uint32_t(cache_ids_.size()), uint32_t(ids.size())));
      cache_ids_.insert(cache_ids_.end(), ids.begin(), ids.end());
    }
  }
}

}  // namespace stepmix::text
