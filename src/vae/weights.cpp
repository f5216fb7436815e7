#include "vae/weights.hpp"

#include <cmath>

#include "core/numerics.hpp"
#include "stepmix/error.hpp"

namespace stepmix::vae {

void WeightLoader::fail(const std::string& message) const { throw Error("vae", store_.folder() + ": " + message); }

const TensorView& WeightLoader::tensor(const std::string& name, const std::vector<int64_t>& shape,
                                       const std::string& meaning) {
  const TensorView* t = store_.find(name);
  if (!t) fail("missing tensor '" + name + "' (expected shape " + shape_to_string(shape) + ", " + meaning + ")");
  if (t->shape != shape)
    fail("tensor '" + name + "' has shape " + shape_to_string(t->shape) + ", expected " + shape_to_string(shape) +
         " (" + meaning + ")");
  if (t->dtype != DType::F32 && t->dtype != DType::BF16)
    fail("tensor '" + name + "' is " + std::string(dtype_name(t->dtype)) + ", expected F32 or BF16");
  used_.insert(name);
  return *t;
}

std::vector<float> WeightLoader::read_floats(const TensorView& t) const {
  std::vector<float> out(std::size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.dtype == DType::BF16 ? bf16_to_float(t.as<uint16_t>()[i]) : t.as<float>()[i];
    if (!std::isfinite(v)) fail("tensor '" + t.name + "' holds a non-finite value at element " + std::to_string(i));
    out[std::size_t(i)] = v;
  }
  return out;
}

ConvLayer WeightLoader::conv(const std::string& module, int64_t c_out, int64_t c_in, int kt, int kh, int kw,
                             bool two_d) {
  std::vector<int64_t> shape{c_out, c_in};
  if (!two_d) shape.push_back(kt);
  shape.push_back(kh);
  shape.push_back(kw);
  const std::string meaning = std::string(two_d ? "a 2-D" : "a 3-D") + " convolution " + std::to_string(c_in) + " -> " +
                              std::to_string(c_out) + " channels";
  const TensorView& weight = tensor(module + ".weight", shape, meaning);
  const TensorView& bias = tensor(module + ".bias", {c_out}, "its bias");
  ConvLayer layer;
  if (!pack_) {
    auto sizes = std::make_shared<kernels::ConvWeights>();
    sizes->c_out = c_out;
    sizes->c_in = c_in;
    sizes->kt = two_d ? 1 : kt;
    sizes->kh = kh;
    sizes->kw = kw;
    sizes->arithmetic = arithmetic_;
    packed_bytes_ += sizes->packed_bytes();
    layer.weights = std::move(sizes);
    return layer;
  }
  // Widened to float32 (exact from BF16) and checked before packing; the
  // packer rounds to bf16 for BF16 arithmetic.
  const std::vector<float> w = read_floats(weight);
  const std::vector<float> b = read_floats(bias);
  auto packed = std::make_shared<kernels::ConvWeights>(
      kernels::pack_conv_weights(w.data(), false, c_out, c_in, two_d ? 1 : kt, kh, kw, b.data(), arithmetic_));
  packed_bytes_ += packed->packed_bytes();
  layer.weights = std::move(packed);
  return layer;
}

std::vector<float> WeightLoader::gamma(const std::string& name, int64_t c, int rank) {
  std::vector<int64_t> shape{c};
  for (int i = 1; i < rank; ++i) shape.push_back(1);
  const TensorView& t = tensor(name, shape, "a channel norm's gamma");
  return pack_ ? read_floats(t) : std::vector<float>{};
}

void WeightLoader::check_all_used() const {
  for (const std::string& name : store_.names())
    if (!used_.count(name))
      fail("unexpected tensor '" + name + "': not part of the model vae/config.json describes (check num_res_blocks, "
           "dim_mult, temperal_downsample)");
}

ResidualBlock load_residual_block(WeightLoader& weights, const std::string& prefix, int64_t c_in, int64_t c_out) {
  ResidualBlock r;
  r.norm1 = weights.gamma(prefix + ".norm1.gamma", c_in, 4);
  r.conv1 = CausalConv(weights.conv(prefix + ".conv1", c_out, c_in, 3, 3, 3));
  r.norm2 = weights.gamma(prefix + ".norm2.gamma", c_out, 4);
  r.conv2 = CausalConv(weights.conv(prefix + ".conv2", c_out, c_out, 3, 3, 3));
  if (c_in != c_out) r.shortcut = weights.conv(prefix + ".conv_shortcut", c_out, c_in, 1, 1, 1);
  return r;
}

MidBlock load_mid_block(WeightLoader& weights, const std::string& prefix, int64_t c) {
  MidBlock m;
  m.resnet0 = load_residual_block(weights, prefix + ".resnets.0", c, c);
  const std::string attention = prefix + ".attentions.0";
  m.attention.norm = weights.gamma(attention + ".norm.gamma", c, 3);
  m.attention.to_qkv = weights.conv(attention + ".to_qkv", 3 * c, c, 1, 1, 1, true);
  m.attention.proj = weights.conv(attention + ".proj", c, c, 1, 1, 1, true);
  m.resnet1 = load_residual_block(weights, prefix + ".resnets.1", c, c);
  return m;
}

}  // namespace stepmix::vae
