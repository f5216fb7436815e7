#include "io/check_tensors.hpp"

#include <algorithm>
#include <atomic>
#include <limits>

#include "core/non_finite.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

struct Chunk {
  std::size_t tensor;  // index into the sorted tensor list
  int64_t begin, end;  // element range
};

std::vector<int64_t> unravel(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> position(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    position[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return position;
}

}  // namespace

std::optional<NonFiniteTensor> find_non_finite_tensor(const TensorStore& store, ThreadPool& pool,
                                                      CheckTensorsStats* stats, int64_t chunk_elements) {
  chunk_elements = std::max<int64_t>(chunk_elements, 1);
  std::vector<std::pair<std::string, const TensorView*>> tensors;
  std::vector<Chunk> chunks;
  CheckTensorsStats counted;
  for (const std::string& name : store.names()) {
    const TensorView& t = store.get(name);
    if (!is_floating(t.dtype)) continue;
    const int64_t n = int64_t(t.nbytes / dtype_size(t.dtype));
    for (int64_t begin = 0; begin < n; begin += chunk_elements)
      chunks.push_back({tensors.size(), begin, std::min(n, begin + chunk_elements)});
    tensors.emplace_back(name, &t);
    ++counted.tensors;
    counted.bytes += int64_t(t.nbytes);
  }
  if (stats) *stats = counted;

  // Chunks are in (tensor, offset) order, so the lowest chunk with a hit holds
  // the first non-finite element. A chunk is skipped once an earlier chunk of
  // its tensor hit; every tensor is still scanned until its first hit, so
  // the message can say how many tensors are affected.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> hit(chunks.size(), kNone);  // each written by its own task only
  std::vector<std::atomic<int64_t>> first_hit_chunk(tensors.size());
  for (auto& f : first_hit_chunk) f.store(kNone, std::memory_order_relaxed);
  pool.parallel_for(int64_t(chunks.size()), [&](int64_t c) {
    const Chunk& chunk = chunks[std::size_t(c)];
    std::atomic<int64_t>& first = first_hit_chunk[chunk.tensor];
    if (first.load(std::memory_order_relaxed) < c) return;
    const TensorView& t = *tensors[chunk.tensor].second;
    const std::size_t size = dtype_size(t.dtype);
    const auto found = first_non_finite(t.dtype, t.data + std::size_t(chunk.begin) * size,
                                        std::size_t(chunk.end - chunk.begin));
    if (!found) return;
    hit[std::size_t(c)] = chunk.begin + int64_t(*found);
    int64_t seen = first.load(std::memory_order_relaxed);
    while (c < seen && !first.compare_exchange_weak(seen, c, std::memory_order_relaxed)) {
    }
  });

  std::optional<NonFiniteTensor> result;
  for (std::size_t c = 0; c < chunks.size() && !result; ++c) {
    if (hit[c] == kNone) continue;
    const auto& [name, t] = tensors[chunks[c].tensor];
    NonFiniteTensor r;
    r.tensor = name;
    r.file = t->file;
    r.dtype = t->dtype;
    r.shape = t->shape;
    r.element = hit[c];
    r.position = unravel(hit[c], t->shape);
    r.value = describe_non_finite(t->dtype, t->data, std::size_t(hit[c]));
    result = std::move(r);
  }
  if (result)
    for (const auto& f : first_hit_chunk) result->tensors_affected += f.load() != kNone ? 1 : 0;
  return result;
}

CheckTensorsStats check_tensors(const TensorStore& store, ThreadPool& pool) {
  CheckTensorsStats stats;
  const auto bad = find_non_finite_tensor(store, pool, &stats);
  if (!bad) return stats;
  std::string message = bad->file + ": tensor '" + bad->tensor + "' " + std::string(dtype_name(bad->dtype)) + " " +
                        shape_to_string(bad->shape) + " element " + shape_to_string(bad->position) + " is " +
                        bad->value + "; expected finite weights";
  if (bad->tensors_affected > 1)
    message += " (" + std::to_string(bad->tensors_affected) + " tensors hold non-finite values)";
  throw Error("checkpoint", message);
}

}  // namespace stepmix
