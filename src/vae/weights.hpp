// Binds the tensors of vae/*.safetensors to the layers the config describes:
// every name the model needs must be there with its exact shape, as F32 or
// BF16 with finite values, and nothing else may be (a tensor the config does
// not explain means the two disagree).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "kernels/conv_kernels.hpp"
#include "vae/layers.hpp"

namespace stepmix::vae {

class WeightLoader {
 public:
  // `pack` false: names, shapes and dtypes are checked but nothing is read
  // (for the half of the model a caller does not need, or to size a request
  // before loading); the layers then carry their sizes without weights.
  WeightLoader(const TensorStore& store, kernels::GemmArithmetic arithmetic)
      : store_(store), arithmetic_(arithmetic) {}
  void set_packing(bool pack) { pack_ = pack; }

  // module.weight [c_out, c_in, kt, kh, kw] (or [c_out, c_in, kh, kw] when
  // `two_d`) and module.bias [c_out].
  ConvLayer conv(const std::string& module, int64_t c_out, int64_t c_in, int kt, int kh, int kw, bool two_d = false);
  // A norm's gamma: [c, 1, 1, 1] (`rank` 4) or [c, 1, 1] (attention, rank 3).
  std::vector<float> gamma(const std::string& name, int64_t c, int rank);
  // Throws naming the first tensor no layer asked for.
  void check_all_used() const;
  // Bytes of the packed weights of every layer bound so far, packed or not.
  std::size_t packed_bytes() const { return packed_bytes_; }

 private:
  [[noreturn]] void fail(const std::string& message) const;
  const TensorView& tensor(const std::string& name, const std::vector<int64_t>& shape, const std::string& meaning);
  std::vector<float> read_floats(const TensorView& t) const;

  const TensorStore& store_;
  kernels::GemmArithmetic arithmetic_;
  bool pack_ = true;
  std::set<std::string> used_;
  std::size_t packed_bytes_ = 0;
};

// prefix.{norm1,conv1,norm2,conv2}[, prefix.conv_shortcut when c_in != c_out].
ResidualBlock load_residual_block(WeightLoader& weights, const std::string& prefix, int64_t c_in, int64_t c_out);
// prefix.{resnets.0, attentions.0, resnets.1} of a width-c mid block.
MidBlock load_mid_block(WeightLoader& weights, const std::string& prefix, int64_t c);

}  // namespace stepmix::vae
