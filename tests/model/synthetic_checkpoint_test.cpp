// The seeded random checkpoints of tests/support (what bench_transformer
// writes at Cosmos3-Nano width): the layout the loader expects, the same
// network whichever way it is stored, layers independent of the layer count.
#include "synthetic_checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"
#include "stepmix/policy.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

SyntheticModelShape small_shape(int64_t layers) {
  SyntheticModelShape s;
  s.hidden_size = 128, s.intermediate_size = 384, s.layers = layers;
  s.heads = 2, s.kv_heads = 1, s.head_dim = 64, s.vocab_size = 64, s.latent_channel = 4, s.patch = 2;
  return s;
}

class SyntheticCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("stepmix-synthetic-" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string write(const std::string& name, int64_t layers, bool fp8, bool shards) {
    SyntheticWriteOptions o;
    o.fp8 = fp8;
    o.seed = 5;
    o.shard_per_layer = shards;
    const std::string folder = (root_ / name).string();
    write_synthetic_transformer(folder, small_shape(layers), o);
    return folder;
  }

  static int64_t tensor_bytes(const std::string& folder) {
    int64_t total = 0;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.path().extension() != ".safetensors") continue;
      const auto file = SafetensorsFile::open(entry.path().string());
      for (const auto& [name, view] : file->tensors()) total += int64_t(view.nbytes);
    }
    return total;
  }

  fs::path root_;
};

TEST_F(SyntheticCheckpoint, Fp8FolderHasTheModelOptLayoutAndTheStepPolicy) {
  const std::string folder = write("fp8", 2, /*fp8=*/true, /*shards=*/true);
  // Two layer shards, one for the rest, and the index naming every tensor's shard.
  EXPECT_TRUE(fs::exists(folder + "/diffusion_pytorch_model-00003-of-00003.safetensors"));
  std::ifstream index_file(folder + "/diffusion_pytorch_model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(index_file);
  EXPECT_EQ(index["weight_map"]["layers.1.mlp.down_proj.weight"], "diffusion_pytorch_model-00002-of-00003.safetensors");
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), synthetic_checkpoint_bytes(small_shape(2), true));
  EXPECT_EQ(tensor_bytes(folder), synthetic_checkpoint_bytes(small_shape(2), true));

  const auto layer = SafetensorsFile::open(folder + "/diffusion_pytorch_model-00001-of-00003.safetensors");
  EXPECT_EQ(layer->get("layers.0.self_attn.to_q.weight").dtype, DType::F8_E4M3);
  EXPECT_EQ(layer->get("layers.0.self_attn.to_q.weight_scale").dtype, DType::F32);
  EXPECT_EQ(layer->get("layers.0.self_attn.to_q.input_scale").dtype, DType::F32);
  EXPECT_EQ(layer->get("layers.0.input_layernorm.weight").dtype, DType::BF16);

  std::ifstream config_file(folder + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["quantization_config"]["quant_algo"], "FP8");
  const nlohmann::json& policy = config["quantization_config"]["runtime"]["diffusion_step_policy"];
  EXPECT_EQ(policy["first_steps"]["count"], 3);
  EXPECT_EQ(policy["last_steps"]["mode"], "a16");
}

// Sharded or not, the loader sees one network: the velocities agree bit for bit.
TEST_F(SyntheticCheckpoint, ShardedAndSingleFileGiveTheSameForward) {
  const std::string sharded = write("sharded", 2, true, true), single = write("single", 2, true, false);
  const ForwardInputs in = synthetic_inputs(small_shape(2), 5, 8, 6, 700.0f, 2);
  for (Precision mode : {Precision::W8A16, Precision::W8A8}) {
    const ForwardOptions options{mode, mode, ActivationDType::BF16};
    Cosmos3Transformer a = Cosmos3Transformer::load(ModelDirectory::open(sharded));
    Cosmos3Transformer b = Cosmos3Transformer::load(ModelDirectory::open(single));
    const HostTensor va = a.forward(in, options), vb = b.forward(in, options);
    ASSERT_FALSE(va.data.empty());
    EXPECT_EQ(va.data, vb.data) << precision_json_name(mode);
  }
}

// Each tensor draws from its own stream: a 1-layer checkpoint is the first
// layer of a 3-layer one of the same seed, byte for byte (what lets the
// 4-layer benchmark model stand for the first layers of a 36-layer one).
TEST_F(SyntheticCheckpoint, LayersDoNotDependOnTheLayerCount) {
  const std::string one = write("one", 1, true, false), three = write("three", 3, true, false);
  const auto a = SafetensorsFile::open(one + "/diffusion_pytorch_model.safetensors");
  const auto b = SafetensorsFile::open(three + "/diffusion_pytorch_model.safetensors");
  int compared = 0;
  for (const auto& [name, view] : a->tensors()) {
    const TensorView& other = b->get(name);
    ASSERT_EQ(view.nbytes, other.nbytes) << name;
    EXPECT_EQ(0, std::memcmp(view.data, other.data, view.nbytes)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, int(a->tensors().size()));
  EXPECT_TRUE(b->contains("layers.2.mlp_moe_gen.up_proj.weight"));
  EXPECT_FALSE(a->contains("layers.1.mlp_moe_gen.up_proj.weight"));
}

}  // namespace
}  // namespace stepmix
