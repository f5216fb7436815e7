// A read-only, non-owning view of a tensor's bytes (usually memory-mapped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace stepmix {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // empty = scalar (one element)
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  std::string file;  // where the bytes live, for error messages

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int rank() const { return int(shape.size()); }
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(data); }
};

// "[2, 3]" — used in messages and `inspect` output.
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace stepmix
