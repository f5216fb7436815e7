// The BPE model of a byte-level tokenizer: a word (one pre-token, as raw
// bytes) starts as one symbol per byte and adjacent symbols are merged by
// rank, lowest first, until no adjacent pair has a merge.
//
// Fast because the merge table is an open-addressing hash table keyed by the
// pair of ids (no strings in the loop) and because words are cached: the
// pre-tokenizer yields the same words over and over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stepmix::text {

struct MergeEntry {
  uint32_t rank;
  int32_t new_id;
};

// Pair of ids -> (rank, id of the merged symbol). A pair given twice keeps
// the later rank, as the Hugging Face loader's hash map does.
class MergeTable {
 public:
  void reserve(std::size_t merges);
  void insert(int32_t left, int32_t right, MergeEntry entry);
  const MergeEntry* find(int32_t left, int32_t right) const;
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    MergeEntry entry;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  std::size_t slot_of(uint64_t key) const;
  void grow();
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;  // 64 - log2(slots)
};

class BpeModel {
 public:
  // `byte_ids[b]`: the id of the vocabulary entry for byte b's stand-in.
  BpeModel(MergeTable merges, const int32_t (&byte_ids)[256]);

  // Appends the ids of one word.
  void encode_word(std::string_view bytes, std::vector<int64_t>& out) const;

  // The merge loop on its own (no cache), as Hugging Face's Word::merge_all
  // runs it: a min-heap of (rank, position) with stale entries skipped.
  void merge(std::string_view bytes, std::vector<int32_t>& ids) const;
  // The plain twin: repeatedly merge the lowest-ranked, leftmost adjacent
  // pair. Quadratic; merge() must give the same ids.
  void merge_reference(std::string_view bytes, std::vector<int32_t>& ids) const;

 private:
  MergeTable merges_;
  int32_t byte_ids_[256];

  // Words of at most kMaxCachedBytes, up to kMaxCachedWords of them; the
  // ids live in one arena. Guarded for concurrent encodes.
  static constexpr std::size_t kMaxCachedBytes = 128;
  static constexpr std::size_t kMaxCachedWords = 1 << 18;
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> cache_;
  mutable std::vector<int32_t> cache_ids_;
};

}  // namespace stepmix::text
