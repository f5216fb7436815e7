// Loading edited copies of the tiny checkpoint: what the loader must not read
// (lm_head), what it strips (a leading "model."), the architecture variants
// the goldens do not cover (relu2, use_und_k_norm_for_gen), and the errors
// for wrong tensors, wrong precisions and wrong inputs.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/numerics.hpp"
#include "model/memory_estimate.hpp"
#include "model_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using TensorEdit = std::function<void(std::vector<TensorToWrite>&)>;

fs::path scratch_root() { return fs::temp_directory_path() / ("stepmix_model_test_" + std::to_string(getpid())); }

// Removes this process's edited copies when the test binary exits.
struct ScratchCleanup {
  ~ScratchCleanup() {
    std::error_code ignored;
    fs::remove_all(scratch_root(), ignored);
  }
} scratch_cleanup;

// Writes <tmp>/<name>/{config.json, model.safetensors}: the golden BF16
// checkpoint after `edit_tensors` and `edit_config`.
std::string write_edited_copy(const std::string& name, const TensorEdit& edit_tensors,
                              const std::function<void(json&)>& edit_config = {}) {
  const fs::path dir = scratch_root() / name;
  fs::create_directories(dir);
  auto source = SafetensorsFile::open(golden_path("transformer/diffusion_pytorch_model.safetensors"));
  std::vector<TensorToWrite> tensors;
  for (const auto& [tensor_name, view] : source->tensors())
    tensors.push_back(make_tensor_raw(tensor_name, view.dtype, view.shape, view.data, view.nbytes));
  edit_tensors(tensors);
  write_safetensors((dir / "model.safetensors").string(), tensors);
  json config = read_json_file(golden_path("transformer/config.json"), "test");
  if (edit_config) edit_config(config);
  write_file_atomic((dir / "config.json").string(), config.dump(2));
  return dir.string();
}

void drop(std::vector<TensorToWrite>& tensors, const std::function<bool(const std::string&)>& matches) {
  std::erase_if(tensors, [&](const TensorToWrite& t) { return matches(t.name); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string load_error(const std::string& dir) {
  try {
    Cosmos3Transformer::load(ModelDirectory::open(dir));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

HostTensor dense_velocity(Cosmos3Transformer& model, const std::string& forward_case) {
  return model.forward(read_forward_inputs(*open_forward_case(forward_case)), {Precision::BF16, Precision::BF16});
}

TEST(CheckpointVariants, LoadsWithoutLmHead) {
  const std::string dir =
      write_edited_copy("no_lm_head", [](auto& t) { drop(t, [](auto& n) { return n == "lm_head.weight"; }); });
  Cosmos3Transformer copy = Cosmos3Transformer::load(ModelDirectory::open(dir));
  Cosmos3Transformer original = load_tiny("transformer");
  EXPECT_EQ(dense_velocity(copy, "video").data, dense_velocity(original, "video").data);
}

TEST(CheckpointVariants, StripsOneLeadingModelPrefix) {
  const std::string dir = write_edited_copy("model_prefix", [](auto& tensors) {
    for (auto& t : tensors) t.name = "model." + t.name;
  });
  Cosmos3Transformer copy = Cosmos3Transformer::load(ModelDirectory::open(dir));
  Cosmos3Transformer original = load_tiny("transformer");
  EXPECT_EQ(dense_velocity(copy, "image").data, dense_velocity(original, "image").data);
}

TEST(CheckpointVariants, WrongShapeNamesTensorExpectedAndActual) {
  const std::string dir = write_edited_copy("wrong_shape", [](auto& tensors) {
    for (auto& t : tensors)
      if (t.name == "layers.1.self_attn.to_k.weight") t.shape = {16, 128};  // same bytes, wrong shape
  });
  const std::string e = load_error(dir);
  EXPECT_TRUE(contains(e, "tensor 'layers.1.self_attn.to_k.weight' has shape [16, 128], expected [32, 64]")) << e;
  EXPECT_TRUE(contains(e, "num_key_value_heads·head_dim, hidden_size")) << e;
}

TEST(CheckpointVariants, MissingTensorIsNamed) {
  const std::string dir = write_edited_copy(
      "missing", [](auto& t) { drop(t, [](auto& n) { return n == "layers.0.mlp_moe_gen.gate_proj.weight"; }); });
  EXPECT_TRUE(
      contains(load_error(dir), "missing tensor 'layers.0.mlp_moe_gen.gate_proj.weight' (expected shape [128, 64]"))
      << load_error(dir);
}

TEST(CheckpointVariants, PrecisionMustMatchTheCheckpoint) {
  Cosmos3Transformer fp8 = load_tiny("transformer-fp8");
  EXPECT_TRUE(fp8.has_fp8());
  EXPECT_EQ(fp8.governed_counts().generation_fp8, 14);
  EXPECT_EQ(fp8.governed_counts().reasoner_fp8, 14);
  const ForwardInputs inputs = read_forward_inputs(*open_forward_case("image"));
  try {
    fp8.forward(inputs, {Precision::BF16, Precision::W8A16});
    FAIL() << "dense on FP8 must throw";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "generation tower holds 14 FP8 Linears")) << e.what();
    EXPECT_TRUE(contains(e.what(), "BF16 checkpoint")) << e.what();
  }
  EXPECT_THROW(fp8.forward(inputs, {Precision::W8A8, Precision::BF16}), Error);
}

// The velocity of a variant the goldens do not cover, made by
// training/make_variant_cases.py: the same edit of the tiny checkpoint run
// through training/cosmos3.py in float32, the module that reproduces the
// goldens to 6.6e-7 (check_against_golden.py). Its own float32 noise is what
// the goldens' dense bound allows for.
std::vector<float> variant_velocity(const std::string& name) {
  const auto file = SafetensorsFile::open(data_path("model-variants/" + name + ".safetensors"));
  return golden_floats(*file, "velocity");
}

TEST(CheckpointVariants, Relu2ModelNeedsNoGateProj) {
  const std::string dir = write_edited_copy(
      "relu2", [](auto& t) { drop(t, [](auto& n) { return contains(n, "gate_proj"); }); },
      [](json& c) { c["hidden_act"] = "relu2"; });
  Cosmos3Transformer model = Cosmos3Transformer::load(ModelDirectory::open(dir));
  const HostTensor v = dense_velocity(model, "video");
  const double deviation = max_normalised_deviation(v.data, variant_velocity("relu2_video"));
  std::printf("relu2 video velocity vs the reference module: %.2e\n", deviation);
  EXPECT_LE(deviation, 5e-6);
  Cosmos3Transformer silu = load_tiny("transformer");
  EXPECT_GT(max_normalised_deviation(v.data, dense_velocity(silu, "video").data), 1e-2);
}

// Float32 biases (the goldens store bf16): the CUDA backend multiplies such
// a Linear into a float32 scratch before it adds the bias, and the up-front
// memory estimate counts the largest such scratch (all rows fit in one chunk
// here); the biases themselves are twice the bytes.
TEST(CheckpointVariants, Float32BiasesAddTheirGemmScratchToTheMemoryEstimate) {
  int64_t bias_values = 0;
  const std::string dir = write_edited_copy("f32_bias", [&](std::vector<TensorToWrite>& tensors) {
    for (TensorToWrite& t : tensors) {
      if (t.dtype != DType::BF16 || !t.name.ends_with(".bias")) continue;
      std::vector<float> widened(t.bytes.size() / 2);
      for (std::size_t i = 0; i < widened.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, t.bytes.data() + 2 * i, 2);
        widened[i] = bf16_to_float(h);
      }
      t = make_tensor_f32(t.name, t.shape, widened);
      bias_values += int64_t(widened.size());
    }
  });
  ASSERT_GT(bias_values, 0);
  Cosmos3Transformer f32 = Cosmos3Transformer::load(ModelDirectory::open(dir));
  Cosmos3Transformer bf16 = load_tiny("transformer");
  const ForwardInputs in = read_forward_inputs(*open_forward_case("video"));
  const PatchGrid grid = resolve_forward_geometry(in, bf16.config()).grid;
  const std::array<int64_t, 2> prompts{20, 12};
  const DeviceMemoryEstimate a = estimate_run_memory(bf16, prompts, grid, grid.tokens(), ActivationDType::BF16);
  const DeviceMemoryEstimate b = estimate_run_memory(f32, prompts, grid, grid.tokens(), ActivationDType::BF16);
  int64_t widest = 0;
  const auto widest_biased = [&](const Linear& l) {
    if (l.bias()) widest = std::max(widest, l.out_features());
  };
  f32.for_each_governed_linear(widest_biased);
  widest_biased(f32.weights().proj_in);
  widest_biased(f32.weights().proj_out);
  ASSERT_GT(widest, 0);
  const int64_t rows = std::max<int64_t>(20, grid.tokens());
  EXPECT_EQ(b.scratch - a.scratch, std::size_t(rows * widest * 4));
  EXPECT_EQ(b.weights - a.weights, std::size_t(2 * bias_values));
  EXPECT_EQ(b.understanding_kv, a.understanding_kv);
}

TEST(CheckpointVariants, UndKeyNormForGenReplacesTextQkNorms) {
  const std::string dir = write_edited_copy(
      "und_k_norm_for_gen",
      [](auto& tensors) {
        drop(tensors, [](auto& n) { return contains(n, ".norm_q.") || contains(n, ".norm_k."); });
        auto golden = SafetensorsFile::open(golden_path("transformer/diffusion_pytorch_model.safetensors"));
        for (const char* layer : {"layers.0", "layers.1"}) {
          const TensorView& w = golden->get(std::string(layer) + ".self_attn.norm_k.weight");
          tensors.push_back(make_tensor_raw(std::string(layer) + ".self_attn.k_norm_und_for_gen.weight", w.dtype,
                                            w.shape, w.data, w.nbytes));
        }
      },
      [](json& c) {
        c["qk_norm_for_text"] = false;
        c["use_und_k_norm_for_gen"] = true;
      });
  Cosmos3Transformer model = Cosmos3Transformer::load(ModelDirectory::open(dir));
  EXPECT_TRUE(model.config().has_und_k_norm_for_gen());
  ForwardDebug debug;
  const HostTensor v =
      model.forward(read_forward_inputs(*open_forward_case("image")), {Precision::BF16, Precision::BF16, ActivationDType::F32, &debug});
  const double deviation = max_normalised_deviation(v.data, variant_velocity("undk_image"));
  std::printf("use_und_k_norm_for_gen image velocity vs the reference module: %.2e\n", deviation);
  EXPECT_LE(deviation, 5e-6);
  // The understanding stream no longer normalises its own q/k.
  EXPECT_NE(debug.tensors.at("und_hidden.1").data, golden_floats(*open_forward_case("image"), "und_hidden.1"));
}

TEST(ForwardInputsCheck, RejectsInputsThatDoNotFitTheConfig) {
  Cosmos3Transformer model = load_tiny("transformer");
  const ForwardInputs good = read_forward_inputs(*open_forward_case("video"));
  auto error_of = [&](const ForwardInputs& in) -> std::string {
    try {
      model.forward(in, {Precision::BF16, Precision::BF16});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  ForwardInputs in = good;
  in.latent.shape[1] = 8;
  EXPECT_TRUE(contains(error_of(in), "latent_channel=4")) << error_of(in);
  in = good;
  in.position_ids.pop_back();
  EXPECT_TRUE(contains(error_of(in), "position_ids holds 83 values, expected [3, S]")) << error_of(in);
  in = good;
  in.input_ids[2] = 96;
  EXPECT_TRUE(contains(error_of(in), "input_ids[2] = 96 is outside [0, vocab_size=96)")) << error_of(in);
  in = good;
  in.timesteps.resize(5);
  EXPECT_TRUE(contains(error_of(in), "timesteps has 5 values")) << error_of(in);
  in = good;
  in.condition_frame_mask = {0, 2, 0};
  EXPECT_TRUE(contains(error_of(in), "condition_frame_mask[1] = 2")) << error_of(in);
}

}  // namespace
}  // namespace stepmix::test
