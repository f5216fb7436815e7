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

TEST_F(HostileCheckpointTest, AbsurdScalesAreRefusedLikeNonFiniteOnes) {
  // 3e38 is finite and positive, and used to pass: the first W8A8 product
  // overflowed and every latent became NaN.
  const std::string scale = "layers.0.self_attn.add_q_proj.weight_scale";
  for (float bad : {3e38f, 1e-30f}) {
    const std::string dir = fp8_copy(scale, bad);
    const std::string e = load_error(dir);
    EXPECT_NE(e.find(dir + ": tensor '" + scale + "' "), std::string::npos) << e;
    EXPECT_NE(e.find("is outside [2^-64, 2^32]"), std::string::npos) << e;
    fs::remove_all(dir_);
  }
  EXPECT_EQ(load_error(fp8_copy(scale, 0x1p32f)), "");  // the bounds themselves are accepted
  fs::remove_all(dir_);
  EXPECT_EQ(load_error(fp8_copy(scale, 0x1p-64f)), "");
}

// The declaration and the weights must agree for a run as for inspect: FP8
// weights without a quantization_config, or on a module the declaration keeps
// in BF16, used to run anyway.
TEST_F(HostileCheckpointTest, QuantizationDeclarationMustMatchTheWeights) {
  std::string dir = fp8_copy("", 0, [](json& c) { c.erase("quantization_config"); });
  std::string e = load_error(dir);
  EXPECT_NE(e.find(dir + ": F8_E4M3 weights (layers.0.self_attn.to_q, ...) but "), std::string::npos) << e;
  EXPECT_NE(e.find("has no quantization_config"), std::string::npos) << e;
  fs::remove_all(dir_);
  dir = fp8_copy("", 0, [](json& c) { c["quantization_config"]["ignore"].push_back("layers.*"); });
  e = load_error(dir);
  EXPECT_NE(e.find("quantization_config.ignore: 'layers.*' keeps layers.0.self_attn.to_q in BF16, but " + dir +
                   " stores its weight as F8_E4M3"),
            std::string::npos)
      << e;
  fs::remove_all(dir_);
  dir = fp8_copy("", 0, [](json& c) {
    c["quantization_config"]["modules_to_not_convert"] = {"visual", "mlp_moe_gen"};
  });
  e = load_error(dir);
  EXPECT_NE(e.find("quantization_config.modules_to_not_convert: 'mlp_moe_gen' keeps layers.0.mlp_moe_gen."),
            std::string::npos)
      << e;
  fs::remove_all(dir_);
  // Globs that name no FP8 module are fine (the shipped list).
  EXPECT_EQ(load_error(fp8_copy("", 0, [](json& c) { c["quantization_config"]["ignore"].push_back("*lm_head*"); })),
            "");
}

// A tensor no module reads means the file and the config describe different
// models; it used to be ignored.
class UnusedTensorTest : public TempDirTest {
 protected:
  std::string load_error_with(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    auto tensors = load_all_tensors(golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
    edit(tensors);
    write_transformer_folder(dir_, tensors, golden_path("transformer-fp8/config.json"));
    try {
      Cosmos3Transformer::load(ModelDirectory::open(dir_.string()));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  static void copy_layer(std::vector<TensorToWrite>& ts, int from, int to) {
    const std::string prefix = "layers." + std::to_string(from) + ".";
    std::vector<TensorToWrite> copies;
    for (const TensorToWrite& t : ts)
      if (t.name.rfind(prefix, 0) == 0) {
        copies.push_back(t);
        copies.back().name = "layers." + std::to_string(to) + "." + t.name.substr(prefix.size());
      }
    ts.insert(ts.end(), copies.begin(), copies.end());
  }
};

TEST_F(UnusedTensorTest, ALayerBeyondTheConfigIsAnError) {
  const std::string e = load_error_with([](auto& ts) { copy_layer(ts, 1, 2); });
  EXPECT_NE(e.find("[model] " + dir_.string() + ": 50 tensors are not used by the model the config describes ('layers.2."),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("..."), std::string::npos) << e;  // the first five, then the count
  EXPECT_NE(e.find("50 of them belong to layers beyond num_hidden_layers = 2"), std::string::npos) << e;
}

TEST_F(UnusedTensorTest, UnknownAndSoundOrActionTensorsAreErrors) {
  const float one = 1.0f;
  std::string e = load_error_with([&](auto& ts) { ts.push_back(make_tensor_raw("mystery.weight", DType::F32, {1}, &one, 4)); });
  EXPECT_NE(e.find("1 tensor is not used by the model the config describes ('mystery.weight')"), std::string::npos) << e;
  fs::remove_all(dir_);
  e = load_error_with([&](auto& ts) {
    ts.push_back(make_tensor_raw("audio_proj_in.bias", DType::F32, {1}, &one, 4));
    ts.push_back(make_tensor_raw("action_modality_embed", DType::F32, {1}, &one, 4));
  });
  EXPECT_NE(e.find("2 tensors are not used"), std::string::npos) << e;
  EXPECT_NE(e.find("'action_modality_embed', 'audio_proj_in.bias'"), std::string::npos) << e;
}

// A SmoothQuant scale is named for what it is, as inspect names it.
TEST_F(UnusedTensorTest, ASmoothQuantScaleIsNamedAsSuch) {
  const float one = 1.0f;
  const std::string e = load_error_with([&](auto& ts) {
    ts.push_back(make_tensor_raw("layers.0.mlp.up_proj.pre_quant_scale", DType::F32, {1}, &one, 4));
  });
  EXPECT_NE(e.find("1 tensor is not used by the model the config describes ('layers.0.mlp.up_proj.pre_quant_scale')"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("SmoothQuant / NVFP4 scales are not supported"), std::string::npos) << e;
}

TEST_F(UnusedTensorTest, TheTextHeadIsAcceptedButShapeChecked) {
  EXPECT_EQ(load_error_with([](auto&) {}), "");  // the golden holds lm_head.weight
  const std::string e = load_error_with([](auto& ts) {
    TensorToWrite* head = find_tensor(ts, "lm_head.weight");
    ASSERT_NE(head, nullptr);
    head->shape = {head->shape[1], head->shape[0]};
  });
  EXPECT_NE(e.find("tensor 'lm_head.weight' has shape [64, 96], expected [96, 64] [vocab_size, hidden_size]"),
            std::string::npos)
      << e;
  fs::remove_all(dir_);
  // The text head is never quantized: F8_E4M3 codes there (one byte each) are refused.
  const std::string fp8 = load_error_with([](auto& ts) {
    TensorToWrite* head = find_tensor(ts, "lm_head.weight");
    ASSERT_NE(head, nullptr);
    head->dtype = DType::F8_E4M3;
    head->bytes.resize(head->bytes.size() / 2);
  });
  EXPECT_NE(fp8.find("tensor 'lm_head.weight' is F8_E4M3, expected BF16 or F32"), std::string::npos) << fp8;
}

}  // namespace
}  // namespace stepmix::test
