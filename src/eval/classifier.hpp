// The image classifier a model directory may ship in classifier/ (the
// embedded Fashion-MNIST model does), used by `stepmix compare` to report
// class accuracy per precision mode.
//
//   classifier/classifier.json         {"input": {"shape": [28, 28], "range": [-1, 1]},
//                                        "layers": [{"type": "linear", "weight": "fc1.weight",
//                                                    "bias": "fc1.bias", "in": 784, "out": 256},
//                                                   {"type": "relu"}, ...],
//                                        "classes": ["T-shirt/top", ...]}
//   classifier/classifier.safetensors  the named tensors (F32, BF16 or F16)
//
// A linear layer computes y = x·Wᵀ + b with W [out, in]; "relu" is max(0, x).
// The output of the last layer are the logits, one per class.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stepmix {

struct MlpLayer {
  enum class Kind { Linear, Relu } kind = Kind::Linear;
  int64_t in = 0, out = 0;    // Linear only
  std::vector<float> weight;  // [out, in]
  std::vector<float> bias;    // [out], empty = no bias
};

class MlpClassifier {
 public:
  // Reads DIR/classifier.json and DIR/classifier.safetensors; throws
  // stepmix::Error("classifier") naming the file, the layer and the problem.
  static MlpClassifier load(const std::string& dir);
  // Validates the chain of layers (each input matches the previous output)
  // and the class count against the last output.
  MlpClassifier(std::vector<MlpLayer> layers, std::vector<int64_t> input_shape, std::vector<std::string> classes,
                float range_low = -1.0f, float range_high = 1.0f);

  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  int64_t input_size() const { return layers_.front().in; }
  const std::vector<std::string>& classes() const { return classes_; }

  // `pixels` in [-1, 1] (the model's output range), input_size() values; they
  // are mapped linearly onto the classifier's declared input range first.
  std::vector<float> logits(const std::vector<float>& pixels) const;
  // Index of the largest logit (the first on ties).
  int predict(const std::vector<float>& pixels) const;

 private:
  std::vector<MlpLayer> layers_;
  std::vector<int64_t> input_shape_;
  std::vector<std::string> classes_;
  float range_low_, range_high_;
};

}  // namespace stepmix
