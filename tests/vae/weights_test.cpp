// vae/*.safetensors: BF16 and sharded checkpoints load and give the same
// result as the float32 file, and every rule that refuses a checkpoint names
// the folder and the tensor (one test per rule).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/checkpoint_edit.hpp"
#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "core/numerics.hpp"
#include "vae/vae.hpp"
#include "vae_test_util.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;

class VaeWeights : public TempDirTest {
 protected:
  std::vector<TensorToWrite> golden_tensors() const {
    return load_all_tensors(vae_golden("vae/diffusion_pytorch_model.safetensors"));
  }
  // A vae folder with `tensors` and the golden config.
  std::string write_vae(const std::vector<TensorToWrite>& tensors) const {
    const fs::path folder = dir_ / "vae";
    fs::remove_all(folder);
    write_transformer_folder(folder, tensors, vae_golden("vae/config.json"));
    return folder.string();
  }
  std::string load_error(const std::vector<TensorToWrite>& tensors) const {
    const std::string folder = write_vae(tensors);
    return error_of([&] { vae::WanVae::load(folder); });
  }
  // Pixels of the golden image-latent decode.
  static std::vector<float> decode_image(const vae::WanVae& model) {
    const auto file = SafetensorsFile::open(vae_golden("decode/image.safetensors"));
    const TensorView& latent = file->get("latent");
    return model.decode_to_tensor(latent.as<float>(), latent.shape);
  }
};

TEST_F(VaeWeights, Bf16CheckpointIsReadExactly) {
  // The same bf16-representable values stored once as F32 and once as BF16
  // must give bit-identical pixels.
  std::vector<TensorToWrite> f32 = golden_tensors(), bf16;
  for (TensorToWrite& t : f32) {
    auto* v = reinterpret_cast<float*>(t.bytes.data());
    std::vector<uint16_t> bits(t.bytes.size() / 4);
    for (std::size_t i = 0; i < bits.size(); ++i) {
      bits[i] = float_to_bf16_rne(v[i]);
      v[i] = bf16_to_float(bits[i]);
    }
    bf16.push_back(make_tensor_raw(t.name, DType::BF16, t.shape, bits.data(), bits.size() * 2));
  }
  const std::vector<float> from_f32 = decode_image(vae::WanVae::load(write_vae(f32)));
  const std::vector<float> from_bf16 = decode_image(vae::WanVae::load(write_vae(bf16)));
  EXPECT_EQ(from_f32, from_bf16);
}

TEST_F(VaeWeights, ShardedCheckpointEqualsTheSingleFile) {
  const std::vector<TensorToWrite> tensors = golden_tensors();
  const fs::path folder = dir_ / "sharded";
  fs::create_directories(folder);
  fs::copy_file(vae_golden("vae/config.json"), folder / "config.json");
  std::vector<TensorToWrite> decoder, encoder;
  nlohmann::json map;
  for (const TensorToWrite& t : tensors) {
    const bool dec = t.name.rfind("decoder.", 0) == 0 || t.name.rfind("post_quant_conv", 0) == 0;
    (dec ? decoder : encoder).push_back(t);
    map[t.name] = dec ? "diffusion_pytorch_model-00001-of-00002.safetensors" : "diffusion_pytorch_model-00002-of-00002.safetensors";
  }
  write_safetensors((folder / "diffusion_pytorch_model-00001-of-00002.safetensors").string(), decoder);
  write_safetensors((folder / "diffusion_pytorch_model-00002-of-00002.safetensors").string(), encoder);
  std::ofstream(folder / "diffusion_pytorch_model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
  EXPECT_EQ(decode_image(vae::WanVae::load(folder.string())), decode_image(golden_vae()));
}

TEST_F(VaeWeights, ModelFolderWithVaeSubfolderLoads) {
  write_vae(golden_tensors());
  EXPECT_EQ(vae::WanVae::load(dir_.string()).folder(), (dir_ / "vae").string());
}

TEST_F(VaeWeights, MissingTensorIsNamed) {
  auto t = golden_tensors();
  erase_tensor(t, "decoder.up_blocks.1.upsampler.time_conv.bias");
  const std::string m = load_error(t);
  EXPECT_NE(m.find("missing tensor 'decoder.up_blocks.1.upsampler.time_conv.bias' (expected shape [96]"), std::string::npos) << m;
  EXPECT_NE(m.find((dir_ / "vae").string()), std::string::npos) << m;
}

TEST_F(VaeWeights, WrongShapeIsNamed) {
  auto t = golden_tensors();
  TensorToWrite* w = find_tensor(t, "decoder.conv_in.weight");
  w->shape = {48, 48, 3, 9, 1};
  const std::string m = load_error(t);
  EXPECT_NE(m.find("tensor 'decoder.conv_in.weight' has shape [48, 48, 3, 9, 1], expected [48, 48, 3, 3, 3]"),
            std::string::npos)
      << m;
}

TEST_F(VaeWeights, WrongDtypeIsNamed) {
  auto t = golden_tensors();
  TensorToWrite* w = find_tensor(t, "post_quant_conv.weight");
  std::vector<uint16_t> half(w->bytes.size() / 4, 0x3C00);
  *w = make_tensor_raw(w->name, DType::F16, w->shape, half.data(), half.size() * 2);
  EXPECT_NE(load_error(t).find("tensor 'post_quant_conv.weight' is F16, expected F32 or BF16"), std::string::npos);
}

TEST_F(VaeWeights, TensorTheConfigDoesNotExplainIsRefused) {
  auto t = golden_tensors();
  t.push_back(make_tensor_f32("decoder.up_blocks.0.resnets.2.norm1.gamma", {48, 1, 1, 1}, std::vector<float>(48, 1.0f)));
  EXPECT_NE(load_error(t).find("unexpected tensor 'decoder.up_blocks.0.resnets.2.norm1.gamma'"), std::string::npos);
}

TEST_F(VaeWeights, NonFiniteWeightIsRefused) {
  auto t = golden_tensors();
  TensorToWrite* w = find_tensor(t, "encoder.conv_in.weight");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(w->bytes.data() + 4 * 17, &nan, 4);
  EXPECT_NE(load_error(t).find("tensor 'encoder.conv_in.weight' holds a non-finite value at element 17"),
            std::string::npos);
}

TEST_F(VaeWeights, ConfigThatDisagreesWithTheWeightsIsRefused) {
  // Two residual blocks per level need tensors the tiny model does not have.
  const fs::path folder = dir_ / "vae";
  write_vae(golden_tensors());
  nlohmann::json config = read_json_file(vae_golden("vae/config.json"), "test");
  config["num_res_blocks"] = 2;
  std::ofstream(folder / "config.json") << config.dump();
  const std::string m = error_of([&] { vae::WanVae::load(folder.string()); });
  EXPECT_NE(m.find("missing tensor 'decoder.up_blocks.0.resnets.2.norm1.gamma'"), std::string::npos) << m;
}

TEST_F(VaeWeights, FolderWithoutConfigIsRefused) {
  const std::string m = error_of([&] { vae::WanVae::load(dir_.string()); });
  EXPECT_NE(m.find("expected a vae folder (config.json and *.safetensors) or a model folder with vae/config.json"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace stepmix::test
