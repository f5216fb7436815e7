// A kernel's static __shared__ array on the CPU: the kernels declare
// `__shared__ SharedArray<T, N> name;` (T[N] on the GPU,
// kernels/cuda/device_numerics.cuh), and cuda_on_cpu.hpp makes it this class,
// a static local (one object for every block the emulator runs). So it starts
// every block afresh, as a GPU block's shared memory does: its bytes garbage
// (0xA5), no element stored. Every load and store through operator[] is
// checked: the index in bounds, and, when the launch checks races, the rules
// of ElementHazards (shared_hazards.hpp): a store and another thread's load
// or store of the element with no __syncthreads between them race, and a load
// of an element the block never stored reads garbage.
// Not modelled, as no kernel does either: __syncwarp (the CPU build does not
// define it, so a kernel using it does not compile there; warp-synchronous
// exchanges through shared memory would need ordering within a warp), and
// stores of one value by several threads (the "any thread saw it" flag),
// which a GPU tolerates and this reports as a race.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "shared_hazards.hpp"

namespace stepmix::simt {

// The bookkeeping of one array, untyped.
class SharedArrayChecks {
 public:
  // Before the calling thread loads or stores element `index` of the `count`
  // elements of `element_bytes` at `data`; ends the launch on an error.
  void access(void* data, std::size_t element_bytes, std::size_t count, int64_t index, bool store);

 private:
  ElementHazards hazards_;
  uint64_t block_serial_ = 0;  // the block the state belongs to; 0: none yet
};

template <class T, int N>
class SharedArray {
  static_assert(std::is_trivially_copyable_v<T> && N > 0, "shared arrays of plain values");

 public:
  // What a[i] is: a load where it is read, a store where it is assigned.
  // Only as a temporary (the && qualifiers): `auto x = a[i];` would keep a
  // proxy that loads wherever x is used, where nvcc loads once, at once.
  class Element {
   public:
    operator T() const&& {
      array_.checks_.access(array_.data_, sizeof(T), N, index_, false);
      return array_.data_[index_];
    }
    Element&& operator=(T value) && {
      array_.checks_.access(array_.data_, sizeof(T), N, index_, true);
      array_.data_[index_] = value;
      return std::move(*this);
    }
    Element&& operator=(const Element& other) && { return std::move(*this) = T(std::move(other)); }

   private:
    friend class SharedArray;
    Element(SharedArray& array, int64_t index) : array_(array), index_(index) {}
    SharedArray& array_;
    int64_t index_;
  };

  Element operator[](int64_t index) { return Element(*this, index); }

 private:
  T data_[N];
  SharedArrayChecks checks_;
};

}  // namespace stepmix::simt
