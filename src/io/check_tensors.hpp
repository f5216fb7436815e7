// The load-time weight scan behind `--check-tensors` (as llama.cpp's option
// of that name): every floating tensor of a checkpoint is read once and
// checked for NaN and infinities (core/non_finite.hpp), split into chunks on
// the thread pool. A single NaN code in an FP8 weight, or an infinity in a
// norm, otherwise turns the whole latent into NaN and the image black.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "io/checkpoint.hpp"

namespace stepmix {

struct NonFiniteTensor {
  std::string tensor;          // canonical name, e.g. "layers.0.mlp.up_proj.weight"
  std::string file;            // the safetensors file holding it
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t element = 0;         // flat index of the first non-finite element
  std::vector<int64_t> position;  // the same as a multi-index into shape
  std::string value;           // "NaN (code 0x7f)", "+inf", ...
  int64_t tensors_affected = 0;   // how many tensors hold at least one (>= 1)
};

struct CheckTensorsStats {
  int64_t tensors = 0;  // floating tensors scanned
  int64_t bytes = 0;    // their bytes
};

// The first tensor (in name order) holding a NaN or infinity, and its first
// such element; nullopt when every tensor is finite. `chunk_elements` is the
// unit of work per pool task (exposed for tests of chunk boundaries).
std::optional<NonFiniteTensor> find_non_finite_tensor(const TensorStore& store, ThreadPool& pool,
                                                      CheckTensorsStats* stats = nullptr,
                                                      int64_t chunk_elements = int64_t(1) << 20);

// Throws stepmix::Error("checkpoint", "<file>: tensor '<name>' <dtype> <shape>
// element [i, j] is NaN (...); expected finite weights") for the first
// non-finite element.
CheckTensorsStats check_tensors(const TensorStore& store, ThreadPool& pool = ThreadPool::global());

}  // namespace stepmix
