#include "io/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/error_of.hpp"
#include "common/golden.hpp"
#include "common/temp_dir.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

using test::error_of;

class CheckpointTest : public test::TempDirTest {};

TEST_F(CheckpointTest, ShardedIndexResolvesScalesInAnotherShard) {
  write_safetensors((dir_ / "a.safetensors").string(), {make_tensor_f32("layers.0.w.weight", {2}, {1, 2})});
  write_safetensors((dir_ / "b.safetensors").string(), {make_tensor_f32("layers.0.w.weight_scale", {}, {0.5f})});
  write_text(dir_ / "diffusion_pytorch_model.safetensors.index.json",
             R"({"metadata": {}, "weight_map": {"layers.0.w.weight": "a.safetensors",
                                                 "layers.0.w.weight_scale": "b.safetensors"}})");
  const TensorStore store = TensorStore::open_folder(dir_.string());
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.get("layers.0.w.weight_scale").as<float>()[0], 0.5f);
  EXPECT_NE(store.get("layers.0.w.weight_scale").file.find("b.safetensors"), std::string::npos);
  EXPECT_EQ(store.files().size(), 2u);
}

TEST_F(CheckpointTest, IndexErrorsNameTheProblem) {
  write_safetensors((dir_ / "a.safetensors").string(),
                    {make_tensor_f32("x", {1}, {1}), make_tensor_f32("y", {1}, {1})});
  const auto index = dir_ / "m.safetensors.index.json";
  write_text(index, R"({"weight_map": {"x": "a.safetensors", "z": "a.safetensors", "y": "a.safetensors"}})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("names tensor 'z' in a.safetensors"),
            std::string::npos);
  write_text(index, R"({"weight_map": {"x": "a.safetensors"}})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("tensor 'y'"), std::string::npos);
  write_text(index, R"({"weight_map": {"x": "../a.safetensors", "y": "a.safetensors"}})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("not a *.safetensors file name"),
            std::string::npos);
  // "\u0000" would cut the name at the NUL when it reaches open(): the folder itself.
  write_text(index, R"({"weight_map": {"x": "\u0000.safetensors", "y": "a.safetensors"}})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); })
                .find("weight_map.x: \"\\u0000.safetensors\" contains a NUL character"),
            std::string::npos);
  write_text(index, R"({"weight_map": [1]})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("weight_map: expected a non-empty object"),
            std::string::npos);
  write_text(index, R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}})");
  write_safetensors((dir_ / "stray.safetensors").string(), {make_tensor_f32("w", {1}, {1})});
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("stray.safetensors is not named in weight_map"),
            std::string::npos);
  fs::remove(dir_ / "stray.safetensors");
  write_text(index, R"({"weight_map": {}})");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("weight_map: expected a non-empty object"),
            std::string::npos);
  write_text(index, R"({"weight_map": )");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("not valid JSON"), std::string::npos);
}

TEST_F(CheckpointTest, AWeightsFileThatIsNoFileIsAnErrorNotSkipped) {
  write_safetensors((dir_ / "a.safetensors").string(), {make_tensor_f32("x", {1}, {1})});
  std::filesystem::create_directory(dir_ / "b.safetensors");
  std::string e = error_of([&] { TensorStore::open_folder(dir_.string()); });
  EXPECT_NE(e.find((dir_ / "b.safetensors").string() + ": not a regular file (a directory)"), std::string::npos) << e;
  std::filesystem::remove(dir_ / "b.safetensors");
  std::filesystem::create_symlink(dir_ / "gone.safetensors", dir_ / "c.safetensors");
  e = error_of([&] { TensorStore::open_folder(dir_.string()); });
  EXPECT_NE(e.find((dir_ / "c.safetensors").string() + ": no such file or directory"), std::string::npos) << e;
}

TEST_F(CheckpointTest, UnshardedDuplicateAcrossFilesIsRejected) {
  write_safetensors((dir_ / "a.safetensors").string(), {make_tensor_f32("x", {1}, {1})});
  write_safetensors((dir_ / "b.safetensors").string(), {make_tensor_f32("x", {1}, {2})});
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("tensor 'x' is in both"),
            std::string::npos);
}

TEST_F(CheckpointTest, LeadingModelPrefixIsRemovedOnce) {
  write_safetensors((dir_ / "a.safetensors").string(),
                    {make_tensor_f32("model.layers.0.w.weight", {1}, {1}), make_tensor_f32("norm.weight", {1}, {2})});
  const TensorStore store = TensorStore::open_folder(dir_.string());
  EXPECT_TRUE(store.contains("layers.0.w.weight"));
  EXPECT_FALSE(store.contains("model.layers.0.w.weight"));
  EXPECT_TRUE(store.contains("norm.weight"));
  write_safetensors((dir_ / "a.safetensors").string(),
                    {make_tensor_f32("model.norm.weight", {1}, {1}), make_tensor_f32("norm.weight", {1}, {2})});
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("both name 'norm.weight'"),
            std::string::npos);
}

TEST_F(CheckpointTest, OpensDiffusersDirectoryAndTransformerFolder) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model / "transformer");
  fs::copy(test::golden_path("transformer-fp8"), model / "transformer", fs::copy_options::recursive);
  write_text(model / "model_index.json", R"({"_class_name": "Cosmos3OmniPipeline"})");
  fs::create_directories(model / "scheduler");
  fs::copy_file(test::golden_path("scheduler/unipc_flowshift10.json"), model / "scheduler" / "scheduler_config.json");
  write_text(model / "tokenizer" / "tokenizer.json", "{}");

  const ModelDirectory full = ModelDirectory::open(model.string());
  EXPECT_EQ(full.transformer_dir, (model / "transformer").string());
  EXPECT_TRUE(full.config.contains("quantization_config"));
  EXPECT_TRUE(full.model_index_path.has_value());
  EXPECT_EQ(full.model_index["_class_name"], "Cosmos3OmniPipeline");
  ASSERT_TRUE(full.scheduler_config_path.has_value());
  ASSERT_TRUE(full.tokenizer_path.has_value());
  EXPECT_NE(full.tokenizer_path->find("tokenizer/tokenizer.json"), std::string::npos);
  // text_tokenizer/ wins over tokenizer/.
  write_text(model / "text_tokenizer" / "tokenizer.json", "{}");
  EXPECT_NE(ModelDirectory::open(model.string()).tokenizer_path->find("text_tokenizer/"), std::string::npos);

  const ModelDirectory folder = ModelDirectory::open(test::golden_path("transformer-fp8"));
  EXPECT_EQ(folder.transformer_dir, test::golden_path("transformer-fp8"));
  EXPECT_FALSE(folder.scheduler_config_path.has_value());
  EXPECT_EQ(TensorStore::open_folder(folder.transformer_dir).size(), 112u);
}

TEST_F(CheckpointTest, DirectoryErrors) {
  EXPECT_NE(error_of([&] { ModelDirectory::open((dir_ / "missing").string()); }).find("missing: no such file or directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ModelDirectory::open(dir_.string()); }).find("expected a Diffusers model directory"),
            std::string::npos);
  write_text(dir_ / "config.json", "{not json");
  write_safetensors((dir_ / "a.safetensors").string(), {make_tensor_f32("x", {1}, {1})});
  const std::string msg = error_of([&] { ModelDirectory::open(dir_.string()); });
  EXPECT_NE(msg.find("config.json: not valid JSON"), std::string::npos) << msg;
  // A transformer/ that is there but unusable says why.
  const fs::path model = dir_ / "model";
  fs::create_directories(model / "transformer");
  fs::create_symlink("config.json", model / "transformer" / "config.json");  // a loop
  std::string e = error_of([&] { ModelDirectory::open(model.string()); });
  EXPECT_NE(e.find("(" + (model / "transformer" / "config.json").string() + ": too many levels of symbolic links)"),
            std::string::npos)
      << e;
  fs::remove(model / "transformer" / "config.json");
  write_text(model / "transformer" / "config.json", "{}");
  e = error_of([&] { ModelDirectory::open(model.string()); });
  EXPECT_NE(e.find("(" + (model / "transformer").string() + ": no *.safetensors file)"), std::string::npos) << e;
}

TEST_F(CheckpointTest, OptionalSideFilesThatAreNotRegularFilesAreErrors) {
  // A FIFO or a folder where scheduler_config.json, model_index.json or
  // tokenizer.json belongs is refused (never read, never silently skipped).
  const fs::path model = dir_ / "model";
  fs::create_directories(model / "transformer");
  fs::copy(test::golden_path("transformer-fp8"), model / "transformer", fs::copy_options::recursive);
  fs::create_directories(model / "scheduler");
  const fs::path fifo = model / "scheduler" / "scheduler_config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { ModelDirectory::open(model.string()); }).find(fifo.string() + ": not a regular file"),
            std::string::npos);
  fs::remove(fifo);
  fs::create_directories(model / "model_index.json");
  EXPECT_NE(error_of([&] { ModelDirectory::open(model.string()); }).find("model_index.json: not a regular file"),
            std::string::npos);
  fs::remove(model / "model_index.json");
  EXPECT_NO_THROW(ModelDirectory::open(model.string()));
}

// hf_quant_config.json is what whole-model loaders read: it must be JSON and
// declare what transformer/config.json declares (before, only inspect read
// it, and generate ran a checkpoint whose two files disagreed).
TEST_F(CheckpointTest, HfQuantConfigMustAgreeWithTheTransformerConfig) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model / "transformer");
  fs::copy(test::golden_path("transformer-fp8"), model / "transformer", fs::copy_options::recursive);
  const fs::path hf = model / "hf_quant_config.json";
  auto open_error = [&] { return error_of([&] { ModelDirectory::open(model.string()); }); };

  write_text(hf, "not json");
  EXPECT_NE(open_error().find(hf.string() + ": not valid JSON"), std::string::npos) << open_error();
  write_text(hf, R"({"quant_method": "modelopt", "quant_algo": "NVFP4"})");
  EXPECT_NE(open_error().find(hf.string() + ": quant_algo: \"NVFP4\" disagrees with " +
                              (model / "transformer" / "config.json").string() +
                              " quantization_config.quant_algo \"FP8\""),
            std::string::npos)
      << open_error();
  write_text(hf, R"({"quant_method": "gptq", "quant_algo": "FP8"})");
  EXPECT_NE(open_error().find("quant_method: \"gptq\" disagrees"), std::string::npos) << open_error();
  write_text(hf, R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}})");
  EXPECT_NE(open_error().find("quantization.kv_cache_quant_algo: expected null (KV-cache quantization is not "
                              "implemented), got \"FP8\""),
            std::string::npos)
      << open_error();
  write_text(hf, R"({"quant_method": "modelopt"})");
  EXPECT_NE(open_error().find("quant_algo: missing; expected \"FP8\""), std::string::npos) << open_error();
  write_text(hf, R"({"quant_method": "modelopt", "quant_algo": "FP8", "weight_only": true})");
  EXPECT_NE(open_error().find("weight_only: expected false or absent (the activations are quantized too), got true"),
            std::string::npos)
      << open_error();
  write_text(hf, "[1]");
  EXPECT_NE(open_error().find("expected a JSON object, got array"), std::string::npos) << open_error();

  // Both layouts that agree are accepted and kept for the policy's warnings.
  write_text(hf, R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": null}})");
  EXPECT_EQ(ModelDirectory::open(model.string()).hf_quant_config["quantization"]["quant_algo"], "FP8");
  write_text(hf, R"({"quant_method": "modelopt", "quant_algo": "FP8", "runtime": {}})");
  EXPECT_TRUE(ModelDirectory::open(model.string()).hf_quant_config.contains("runtime"));

  // A 16-bit checkpoint with a file that names FP8.
  fs::remove_all(model / "transformer");
  fs::create_directories(model / "transformer");
  fs::copy(test::golden_path("transformer"), model / "transformer", fs::copy_options::recursive);
  EXPECT_NE(open_error().find("has no quantization_config (a 16-bit checkpoint)"), std::string::npos) << open_error();
}

TEST_F(CheckpointTest, TheEmbeddedModelsOpen) {
  for (const char* name : {"fashion-cosmos3-fp8", "fashion-cosmos3-bf16"}) {
    const ModelDirectory dir = ModelDirectory::open(std::string(STEPMIX_MODELS_DIR) + "/" + name);
    EXPECT_EQ(dir.hf_quant_config_path.has_value(), std::string(name).find("fp8") != std::string::npos) << name;
  }
}

TEST_F(CheckpointTest, SideFilesThatCannotBeReadAreNotTreatedAsAbsent) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may read anything";
  const fs::path model = dir_ / "model";
  fs::create_directories(model / "transformer");
  fs::copy(test::golden_path("transformer-fp8"), model / "transformer", fs::copy_options::recursive);
  fs::create_directories(model / "scheduler");
  write_text(model / "scheduler" / "scheduler_config.json", "{}");
  ::chmod((model / "scheduler").c_str(), 0);
  const std::string e = error_of([&] { ModelDirectory::open(model.string()); });
  ::chmod((model / "scheduler").c_str(), 0755);
  EXPECT_NE(e.find("scheduler_config.json: permission denied"), std::string::npos) << e;
}

TEST(ModelFileNames, TheFilesAModelFolderIsReadFromAreKnownByName) {
  for (const char* name : {"config.json", "model_index.json", "hf_quant_config.json", "scheduler_config.json",
                           "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "calibration_prompts.txt",
                           "compare_prompts.txt", "classifier.json", "diffusion_pytorch_model.safetensors",
                           "model-00001-of-00002.safetensors", "diffusion_pytorch_model.safetensors.index.json"})
    EXPECT_TRUE(is_model_file_name(name)) << name;
  // What a run writes beside them (a preview, a report) is not.
  for (const char* name : {"preview.png", "report.json", "notes.txt", "config.json.bak", "latents.bin", ""})
    EXPECT_FALSE(is_model_file_name(name)) << name;
}

}  // namespace
}  // namespace stepmix
