#include "eval/classifier.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/numerics.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::vector<float> widen(const TensorView& t, const std::string& where) {
  std::vector<float> out(std::size_t(t.numel()));
  switch (t.dtype) {
    case DType::F32:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = t.as<float>()[i];
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(t.as<uint16_t>()[i]);
      break;
    case DType::F16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_float(t.as<uint16_t>()[i]);
      break;
    default:
      throw Error("classifier", where + ": tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) +
                                    "; expected F32, BF16 or F16");
  }
  return out;
}

int64_t json_int(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1)
    throw Error("classifier", where + "." + key + ": expected a positive integer");
  return j[key].get<int64_t>();
}

}  // namespace

MlpClassifier::MlpClassifier(std::vector<MlpLayer> layers, std::vector<int64_t> input_shape,
                             std::vector<std::string> classes, float range_low, float range_high)
    : layers_(std::move(layers)),
      input_shape_(std::move(input_shape)),
      classes_(std::move(classes)),
      range_low_(range_low),
      range_high_(range_high) {
  if (layers_.empty() || layers_.front().kind != MlpLayer::Kind::Linear)
    throw Error("classifier", "the first layer must be linear");
  if (!(range_high_ > range_low_)) throw Error("classifier", "input range must have low < high");
  int64_t width = layers_.front().in;
  int64_t expected_inputs = 1;
  for (int64_t d : input_shape_) expected_inputs *= d;
  if (input_shape_.empty() || expected_inputs != width)
    throw Error("classifier", "input shape has " + std::to_string(expected_inputs) + " values, the first layer takes " +
                                  std::to_string(width));
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const MlpLayer& l = layers_[i];
    if (l.kind == MlpLayer::Kind::Relu) continue;
    const std::string where = "layer " + std::to_string(i);
    if (l.in != width)
      throw Error("classifier", where + " takes " + std::to_string(l.in) + " inputs, gets " + std::to_string(width));
    if (l.weight.size() != std::size_t(l.in * l.out))
      throw Error("classifier", where + ": weight has " + std::to_string(l.weight.size()) + " values, expected " +
                                    std::to_string(l.in * l.out));
    if (!l.bias.empty() && l.bias.size() != std::size_t(l.out))
      throw Error("classifier",
                  where + ": bias has " + std::to_string(l.bias.size()) + " values, expected " + std::to_string(l.out));
    width = l.out;
  }
  if (!classes_.empty() && int64_t(classes_.size()) != width)
    throw Error("classifier",
                std::to_string(classes_.size()) + " class names for " + std::to_string(width) + " logits");
  if (classes_.empty())
    for (int64_t c = 0; c < width; ++c) classes_.push_back(std::to_string(c));
}

MlpClassifier MlpClassifier::load(const std::string& dir) {
  const std::string desc_path = (fs::path(dir) / "classifier.json").string();
  const std::string weights_path = (fs::path(dir) / "classifier.safetensors").string();
  const json desc = read_json_file(desc_path, "classifier");
  if (!desc.is_object() || !desc.contains("layers") || !desc["layers"].is_array())
    throw Error("classifier", desc_path + ": expected an object with a \"layers\" array");
  const auto file = SafetensorsFile::open(weights_path);

  std::vector<MlpLayer> layers;
  for (std::size_t i = 0; i < desc["layers"].size(); ++i) {
    const json& j = desc["layers"][i];
    const std::string where = desc_path + ": layers[" + std::to_string(i) + "]";
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
      throw Error("classifier", where + ": expected an object with a \"type\"");
    const std::string type = j["type"].get<std::string>();
    MlpLayer layer;
    if (type == "relu") {
      layer.kind = MlpLayer::Kind::Relu;
    } else if (type == "linear") {
      layer.in = json_int(j, "in", where);
      layer.out = json_int(j, "out", where);
      if (!j.contains("weight") || !j["weight"].is_string())
        throw Error("classifier", where + ".weight: expected a tensor name");
      const TensorView& w = file->get(j["weight"].get<std::string>());
      if (w.shape != std::vector<int64_t>{layer.out, layer.in})
        throw Error("classifier", where + ": tensor '" + w.name + "' is " + shape_to_string(w.shape) + ", expected [" +
                                      std::to_string(layer.out) + ", " + std::to_string(layer.in) + "]");
      layer.weight = widen(w, weights_path);
      if (j.contains("bias") && !j["bias"].is_null()) {
        if (!j["bias"].is_string()) throw Error("classifier", where + ".bias: expected a tensor name or null");
        const TensorView& b = file->get(j["bias"].get<std::string>());
        if (b.shape != std::vector<int64_t>{layer.out})
          throw Error("classifier", where + ": tensor '" + b.name + "' is " + shape_to_string(b.shape) +
                                        ", expected [" + std::to_string(layer.out) + "]");
        layer.bias = widen(b, weights_path);
      }
    } else {
      throw Error("classifier", where + ".type: expected \"linear\" or \"relu\", got \"" + type + "\"");
    }
    layers.push_back(std::move(layer));
  }
  if (layers.empty()) throw Error("classifier", desc_path + ": no layers");

  std::vector<int64_t> shape{layers.front().in};
  float low = -1, high = 1;
  if (desc.contains("input") && desc["input"].is_object()) {
    const json& in = desc["input"];
    if (in.contains("shape")) {
      if (!in["shape"].is_array()) throw Error("classifier", desc_path + ": input.shape: expected an array");
      shape.clear();
      for (const json& d : in["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 1)
          throw Error("classifier", desc_path + ": input.shape: expected positive integers");
        shape.push_back(d.get<int64_t>());
      }
    }
    if (in.contains("range")) {
      const json& r = in["range"];
      if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number())
        throw Error("classifier", desc_path + ": input.range: expected [low, high]");
      low = r[0].get<float>();
      high = r[1].get<float>();
    }
  }
  std::vector<std::string> classes;
  if (desc.contains("classes")) {
    if (!desc["classes"].is_array()) throw Error("classifier", desc_path + ": classes: expected an array of names");
    for (const json& c : desc["classes"]) {
      if (!c.is_string()) throw Error("classifier", desc_path + ": classes: expected an array of names");
      classes.push_back(c.get<std::string>());
    }
  }
  try {
    return MlpClassifier(std::move(layers), std::move(shape), std::move(classes), low, high);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (" + desc_path + ")");
  }
}

std::vector<float> MlpClassifier::logits(const std::vector<float>& pixels) const {
  if (int64_t(pixels.size()) != input_size())
    throw Error("classifier",
                "input has " + std::to_string(pixels.size()) + " values, expected " + std::to_string(input_size()));
  // [-1, 1] -> [low, high]; the identity for the usual range.
  std::vector<float> x(pixels.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = range_low_ + (pixels[i] + 1.0f) * 0.5f * (range_high_ - range_low_);
  std::vector<float> y;
  for (const MlpLayer& l : layers_) {
    if (l.kind == MlpLayer::Kind::Relu) {
      for (float& v : x) v = v > 0 ? v : 0;
      continue;
    }
    y.assign(std::size_t(l.out), 0.0f);
    for (int64_t o = 0; o < l.out; ++o) {
      const float* w = l.weight.data() + o * l.in;
      double acc = l.bias.empty() ? 0.0 : l.bias[std::size_t(o)];
      for (int64_t i = 0; i < l.in; ++i) acc += double(w[i]) * x[std::size_t(i)];
      y[std::size_t(o)] = float(acc);
    }
    x.swap(y);
  }
  return x;
}

int MlpClassifier::predict(const std::vector<float>& pixels) const {
  const std::vector<float> z = logits(pixels);
  int best = 0;
  for (std::size_t i = 1; i < z.size(); ++i)
    if (z[i] > z[std::size_t(best)]) best = int(i);
  return best;
}

}  // namespace stepmix
