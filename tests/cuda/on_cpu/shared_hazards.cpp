// The shared-memory race check (shared_hazards.hpp).
#include "shared_hazards.hpp"

#include <utility>

namespace stepmix::simt {

void SharedHazards::reset(std::size_t bytes, unsigned block_x, unsigned block_y) {
  chunks_.assign((bytes + 15) / 16, Chunk{});
  block_x_ = block_x;
  block_y_ = block_y;
}

std::string thread_name(int thread, unsigned block_x, unsigned block_y) {
  const unsigned t = unsigned(thread);
  return "thread (" + std::to_string(t % block_x) + "," + std::to_string(t / block_x % block_y) + "," +
         std::to_string(t / (block_x * block_y)) + ")";
}

void IntervalReaders::add(int thread, unsigned in_interval) {
  if (interval != in_interval) {
    interval = in_interval;
    threads[0] = thread;
    threads[1] = -1;
  } else if (threads[0] != thread && threads[1] < 0) {
    threads[1] = thread;
  }
}

int IntervalReaders::other_than(int thread, unsigned in_interval) const {
  if (interval != in_interval) return -1;
  return threads[0] != thread ? threads[0] : threads[1];
}

std::string SharedHazards::copy_issued(uint32_t offset, int thread, unsigned interval) {
  Chunk& c = chunks_[offset / 16];
  // (Messages are built only for a hazard: this runs at every copy.)
  auto at = [offset] { return "cp.async into shared offset " + std::to_string(offset); };
  if (const int other = c.readers.other_than(thread, interval); other >= 0)
    return "race: " + at() + " overwrites what " + thread_name(other) +
           " read in this barrier interval (a __syncthreads must come between the read and the copy)";
  if (c.writer >= 0) {
    auto earlier = [&] {
      return c.writer == thread ? std::string("its own earlier cp.async") : thread_name(c.writer) + "'s cp.async";
    };
    if (c.landed == kPending)
      return "race: " + at() + " while " + earlier() + " into it has not landed (the two may land in either order)";
    if (c.writer != thread && c.landed == interval)
      return "race: " + at() + " in the barrier interval in which " + earlier() +
             " into it landed (a __syncthreads must come between its wait and this copy)";
  }
  c.writer = thread;
  c.issued = interval;
  c.landed = kPending;
  return "";
}

void SharedHazards::copy_landed(uint32_t offset, unsigned interval) { chunks_[offset / 16].landed = interval; }

std::string SharedHazards::read(uint32_t offset, int thread, unsigned interval) {
  Chunk& c = chunks_[offset / 16];
  auto at = [offset] { return "reads shared offset " + std::to_string(offset); };
  if (c.writer < 0) return at() + ", which no thread of the block has written (uninitialised shared memory)";
  if (c.landed == kPending) {
    if (c.writer == thread) return at() + " before waiting for its own cp.async into it (cp.async.wait_group)";
    return "race: " + at() + " while " + thread_name(c.writer) + "'s cp.async into it, issued " +
           std::to_string(interval - c.issued) +
           " barrier(s) ago, has not landed (the copier's wait and a __syncthreads must come first)";
  }
  if (c.writer != thread && c.landed == interval)
    return "race: " + at() + ", which " + thread_name(c.writer) +
           "'s cp.async filled in this barrier interval (a __syncthreads must come between its wait and the read)";
  c.readers.add(thread, interval);
  return "";
}

// ---- static shared arrays

void ElementHazards::reset(std::size_t elements, unsigned block_x, unsigned block_y, std::string array) {
  elements_.assign(elements, Element{});
  block_x_ = block_x;
  block_y_ = block_y;
  array_ = std::move(array);
}

std::string ElementHazards::load(std::size_t i, int thread, unsigned interval) {
  Element& e = elements_[i];
  if (e.writer < 0)
    return "loads " + element_name(i) + ", which no thread of the block has stored (uninitialised shared memory)";
  if (e.writer != thread && e.stored_in == interval)
    return "race: loads " + element_name(i) + ", which " + thread_name(e.writer, block_x_, block_y_) +
           " stored in this barrier interval (a __syncthreads must come between the store and the load)";
  e.loaders.add(thread, interval);
  return "";
}

std::string ElementHazards::store(std::size_t i, int thread, unsigned interval) {
  Element& e = elements_[i];
  if (const int other = e.loaders.other_than(thread, interval); other >= 0)
    return "race: stores " + element_name(i) + ", which " + thread_name(other, block_x_, block_y_) +
           " loaded in this barrier interval (a __syncthreads must come between the load and the store)";
  if (e.writer >= 0 && e.writer != thread && e.stored_in == interval)
    return "race: stores " + element_name(i) + ", which " + thread_name(e.writer, block_x_, block_y_) +
           " also stored in this barrier interval";
  e.writer = thread;
  e.stored_in = interval;
  return "";
}

}  // namespace stepmix::simt
