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
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("weight_map: expected an object"),
            std::string::npos);
  write_text(index, R"({"weight_map": )");
  EXPECT_NE(error_of([&] { TensorStore::open_folder(dir_.string()); }).find("not valid JSON"), std::string::npos);
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
  EXPECT_NE(error_of([&] { ModelDirectory::open((dir_ / "missing").string()); }).find("no such directory"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ModelDirectory::open(dir_.string()); }).find("expected a Diffusers model directory"),
            std::string::npos);
  write_text(dir_ / "config.json", "{not json");
  write_safetensors((dir_ / "a.safetensors").string(), {make_tensor_f32("x", {1}, {1})});
  const std::string msg = error_of([&] { ModelDirectory::open(dir_.string()); });
  EXPECT_NE(msg.find("config.json: not valid JSON"), std::string::npos) << msg;
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

}  // namespace
}  // namespace stepmix
