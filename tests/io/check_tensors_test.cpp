// check_tensors: every floating tensor of a checkpoint scanned for NaN and
// infinities on the thread pool; the first offending tensor (by name) and
// element are named, wherever the chunk boundaries fall.
#include "io/check_tensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "common/checkpoint_edit.hpp"
#include "common/error_of.hpp"
#include "common/golden.hpp"
#include "common/temp_dir.hpp"
#include "core/numerics.hpp"

namespace stepmix {
namespace {

using test::error_of;

class CheckTensorsTest : public test::TempDirTest {
 protected:
  // The FP8 golden with `edit` applied to its tensors.
  TensorStore edited(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    auto tensors = test::load_all_tensors(test::golden_path("transformer-fp8/diffusion_pytorch_model.safetensors"));
    edit(tensors);
    test::write_transformer_folder(dir_, tensors, test::golden_path("transformer-fp8/config.json"));
    return TensorStore::open_folder(dir_.string());
  }
};

TEST_F(CheckTensorsTest, TheGoldenCheckpointsAreFinite) {
  ThreadPool pool(3);
  for (const char* folder : {"transformer", "transformer-fp8"}) {
    const TensorStore store = TensorStore::open_folder(test::golden_path(folder));
    CheckTensorsStats stats;
    EXPECT_FALSE(find_non_finite_tensor(store, pool, &stats)) << folder;
    EXPECT_GT(stats.tensors, 20);
    EXPECT_GT(stats.bytes, 100000);
    EXPECT_NO_THROW(check_tensors(store, pool));
  }
}

TEST_F(CheckTensorsTest, OneFp8NanCodeIsFoundAndNamed) {
  const std::string name = "layers.1.mlp.up_proj.weight";  // F8_E4M3 [128, 64]
  const TensorStore store = edited([&](std::vector<TensorToWrite>& ts) {
    TensorToWrite* t = test::find_tensor(ts, name);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->dtype, DType::F8_E4M3);
    t->bytes[64 * 5 + 7] = std::byte{0x7F};
  });
  ThreadPool pool(4);
  // Chunks of 1, 7, 100 and 2^20 elements: the same first element whatever
  // the split.
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(100), int64_t(1) << 20}) {
    const auto bad = find_non_finite_tensor(store, pool, nullptr, chunk);
    ASSERT_TRUE(bad) << chunk;
    EXPECT_EQ(bad->tensor, name);
    EXPECT_EQ(bad->element, 64 * 5 + 7);
    EXPECT_EQ(bad->position, (std::vector<int64_t>{5, 7}));
    EXPECT_EQ(bad->value, "NaN (code 0x7f)");
    EXPECT_EQ(bad->tensors_affected, 1);
  }
  const std::string e = error_of([&] { check_tensors(store, pool); });
  EXPECT_NE(e.find("[checkpoint] " + (dir_ / "diffusion_pytorch_model.safetensors").string() + ": tensor '" + name +
                   "' F8_E4M3 [128, 64] element [5, 7] is NaN (code 0x7f); expected finite weights"),
            std::string::npos)
      << e;
}

TEST_F(CheckTensorsTest, TheFirstTensorByNameWinsAndAllAreCounted) {
  const TensorStore store = edited([&](std::vector<TensorToWrite>& ts) {
    const uint16_t inf = 0x7F80, nan = 0xFFC1;
    std::memcpy(test::find_tensor(ts, "norm.weight")->bytes.data() + 2 * 3, &inf, 2);
    std::memcpy(test::find_tensor(ts, "layers.0.input_layernorm.weight")->bytes.data() + 2 * 63, &nan, 2);
    std::memcpy(test::find_tensor(ts, "layers.0.input_layernorm.weight")->bytes.data() + 2 * 60, &inf, 2);
    const float f = std::numeric_limits<float>::infinity();
    TensorToWrite* scale = test::find_tensor(ts, "layers.1.self_attn.to_q.weight_scale");
    std::memcpy(scale->bytes.data(), &f, 4);
  });
  ThreadPool pool(2);
  const auto bad = find_non_finite_tensor(store, pool, nullptr, 16);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, "layers.0.input_layernorm.weight");
  EXPECT_EQ(bad->element, 60);
  EXPECT_EQ(bad->value, "+inf (code 0x7f80)");
  EXPECT_EQ(bad->tensors_affected, 3);
  EXPECT_NE(error_of([&] { check_tensors(store, pool); }).find("(3 tensors hold non-finite values)"),
            std::string::npos);
}

}  // namespace
}  // namespace stepmix
