// Loading hostile copies of the tiny FP8 checkpoint for a run: counts and
// scales that must be refused with an error naming the checkpoint folder and
// the tensor, before anything is sized from them.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/checkpoint_edit.hpp"
#include "common/temp_dir.hpp"
#include "model_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class HostileCheckpointTest : public TempDirTest {
 protected:
  // The FP8 golden with `scale` set to `value`, and config edits.
  std::string fp8_copy(const std::string& scale, float value, const std::function<void(json&)>& edit_config = {}) {
    auto tensors = load_all_tensors(golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
    if (!scale.empty()) {
      TensorToWrite* t = find_tensor(tensors, scale);
      EXPECT_NE(t, nullptr) << scale;
      if (t) std::memcpy(t->bytes.data(), &value, sizeof value);
    }
    write_transformer_folder(dir_, tensors, golden_path("transformer-fp8/config.json"));
    if (edit_config) {
      json config = read_json_file((dir_ / "config.json").string(), "test");
      edit_config(config);
      write_file_atomic((dir_ / "config.json").string(), config.dump());
    }
    return dir_.string();
  }

  static std::string load_error(const std::string& dir) {
    try {
      Cosmos3Transformer::load(ModelDirectory::open(dir));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(HostileCheckpointTest, NonFiniteOrNonPositiveScalesNameTheFolderAndTensor) {
  const std::string scale = "layers.1.mlp_moe_gen.down_proj.weight_scale";
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.0f, -0.25f}) {
    const std::string dir = fp8_copy(scale, bad);
    const std::string e = load_error(dir);
    EXPECT_NE(e.find(dir + ": tensor '" + scale + "' must be finite and > 0"), std::string::npos) << e;
    fs::remove_all(dir_);
  }
  const std::string input = "layers.0.self_attn.to_q.input_scale";
  const std::string e = load_error(fp8_copy(input, std::numeric_limits<float>::infinity()));
  EXPECT_NE(e.find("tensor '" + input + "' must be finite and > 0, got inf"), std::string::npos) << e;
}

TEST_F(HostileCheckpointTest, HugeLayerCountFailsOnTheFirstMissingLayer) {
  // Within the config limit (2^24) but far beyond the tensors: the loader must
  // not reserve 2^24 layers up front.
  const std::string dir = fp8_copy("", 0, [](json& c) { c["num_hidden_layers"] = int64_t(1) << 24; });
  const std::string e = load_error(dir);
  EXPECT_NE(e.find(dir + ": missing tensor 'layers.2.input_layernorm.weight'"), std::string::npos) << e;
}

TEST_F(HostileCheckpointTest, ConfigSizesThatDisagreeWithTheTensors) {
  std::string e = load_error(fp8_copy("", 0, [](json& c) { c["hidden_size"] = 128; }));
  EXPECT_NE(e.find("tensor 'layers.0.input_layernorm.weight' has shape [64], expected [128]"), std::string::npos) << e;
  fs::remove_all(dir_);
  e = load_error(fp8_copy("", 0, [](json& c) { c["num_key_value_heads"] = 4; }));
  EXPECT_NE(e.find("tensor 'layers.0.self_attn.to_k.weight' has shape [32, 64], expected [64, 64]"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace stepmix::test
