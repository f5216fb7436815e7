// Patchify/unpatchify, the timestep sinusoid and the rotary frequencies
// against fixed check values of the reference formulas.
#include "model/embedding.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "model/config.hpp"
#include "model/rope.hpp"

namespace stepmix::test {
namespace {

TEST(Patchify, OddSizesPadThenCropBackExactly) {
  const PatchGrid grid{3, 2, 5, 7, 2};  // C, T, H, W, p
  EXPECT_EQ(grid.patches_h(), 3);
  EXPECT_EQ(grid.patches_w(), 4);
  EXPECT_EQ(grid.tokens(), 24);
  std::vector<float> latent(3 * 2 * 5 * 7);
  std::iota(latent.begin(), latent.end(), 1.0f);
  const std::vector<float> patches = patchify(latent.data(), grid);
  ASSERT_EQ(patches.size(), std::size_t(24 * 12));
  // Token (t=1, hp=2, wp=3), feature (ph=0, pw=1, c=2): latent[c=2, t=1, h=4, w=7] is padding → 0;
  // feature (ph=0, pw=0, c=2) reads latent[2, 1, 4, 6].
  const float* token = patches.data() + ((1 * 3 + 2) * 4 + 3) * 12;
  EXPECT_EQ(token[(0 * 2 + 1) * 3 + 2], 0.0f);
  EXPECT_EQ(token[(0 * 2 + 0) * 3 + 2], latent[((2 * 2 + 1) * 5 + 4) * 7 + 6]);
  // Both frames noisy: the inverse returns the latent.
  EXPECT_EQ(unpatchify(patches.data(), grid, {0, 1}), latent);
  // Frame 0 conditioned: frame 1's tokens come first in the packed rows, frame 0 is zero.
  const std::vector<float> only_frame1 = unpatchify(patches.data() + 12 * 12, grid, {1});
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 35; ++i) {
      EXPECT_EQ(only_frame1[std::size_t((c * 2 + 0) * 35 + i)], 0.0f);
      EXPECT_EQ(only_frame1[std::size_t((c * 2 + 1) * 35 + i)], latent[std::size_t((c * 2 + 1) * 35 + i)]);
    }
}

TEST(TimestepSinusoid, SpecCheckValues) {
  const std::vector<float> emb = timestep_sinusoid({999.0f}, 0.001);
  ASSERT_EQ(emb.size(), 256u);
  EXPECT_NEAR(emb[0], 0.5411435f, 1e-7);
  EXPECT_NEAR(emb[1], 0.5981213f, 1e-7);
  EXPECT_NEAR(emb[128], 0.8409303f, 1e-7);
  EXPECT_NEAR(emb[255], 1.0735331e-4f, 1e-11);
}

TEST(RopeFrequencies, NanoSpecCheckValues) {
  const Cosmos3Config nano;  // defaults: θ = 5e6, D = 128
  const std::vector<float> inv_freq = rope_inv_freq(nano);
  ASSERT_EQ(inv_freq.size(), 64u);
  EXPECT_EQ(inv_freq[0], 1.0f);
  EXPECT_NEAR(inv_freq[1], 0.78583002f, 1e-8);
  EXPECT_NEAR(inv_freq[63], 2.5450797e-7f, 1e-14);
}

TEST(RopeTables, TextTokensGetOrdinaryRope) {
  Cosmos3Config c;
  c.head_dim = 16;
  c.rope_axes_dim = {4, 2, 2};
  c.rope_theta = 10000.0;
  // One text token at position 3 (all rows equal) and one vision token (15005, 1, 0).
  const std::vector<float> positions = {3.0f, 15005.0f, 3.0f, 1.0f, 3.0f, 0.0f};
  const RopeTables t = build_rope_tables(c, positions.data(), 2);
  const std::vector<float> inv_freq = rope_inv_freq(c);
  for (int64_t j = 0; j < 8; ++j) {
    EXPECT_EQ(t.cos_row(0)[j], std::cos(3.0f * inv_freq[std::size_t(j)]));
    EXPECT_EQ(t.cos_row(0)[j + 8], t.cos_row(0)[j]);
  }
  // Slots T H W T H W T T for the vision token.
  const float expected_positions[8] = {15005, 1, 0, 15005, 1, 0, 15005, 15005};
  for (int64_t j = 0; j < 8; ++j)
    EXPECT_EQ(t.sin_row(1)[j], std::sin(expected_positions[j] * inv_freq[std::size_t(j)])) << j;
}

}  // namespace
}  // namespace stepmix::test
