// Linear::forward_sharing_input (q/k/v and gate/up): bit-identical to running
// each Linear alone, and activation codes shared only where that is exact
// (one s_x, no code hook).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>

#include "linear_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using test::make_dense_linear;
using test::make_fp8_linear;
using test::random_activations;
using test::to_bf16;

constexpr int64_t kM = 37, kK = 70;  // ragged on purpose

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Three siblings shaped like q/k/v (GQA: k and v narrower), as the model runs them.
struct Siblings {
  test::OwnedLinear q_w, k_w, v_w;
  Linear q, k, v;
  Siblings(float sx_q, float sx_k, float sx_v)
      : q_w(make_fp8_linear("attn.to_q", 48, kK, 11, true, 0.011f, sx_q)),
        k_w(make_fp8_linear("attn.to_k", 16, kK, 12, false, 0.013f, sx_k)),
        v_w(make_fp8_linear("attn.to_v", 16, kK, 13, true, 0.017f, sx_v)),
        q(q_w.weights),
        k(k_w.weights),
        v(v_w.weights) {}
  std::array<const Linear*, 3> all() const { return {&q, &k, &v}; }
};

// Runs the group both ways and checks the bits; returns the group's quantization count.
template <class T>
int check_group_matches_alone(std::span<const Linear* const> linears, const std::vector<T>& x, Precision mode) {
  std::vector<std::vector<T>> alone, grouped;
  std::vector<T*> outputs;
  for (const Linear* l : linears) {
    alone.emplace_back(std::size_t(kM * l->out_features()));
    l->forward(x.data(), kM, alone.back().data(), mode);
    grouped.emplace_back(std::size_t(kM * l->out_features()), T(0x7f));
  }
  for (auto& g : grouped) outputs.push_back(g.data());
  const int quantizations = Linear::forward_sharing_input(linears, x.data(), kM, outputs, mode);
  for (std::size_t i = 0; i < linears.size(); ++i)
    EXPECT_TRUE(same_bits(alone[i], grouped[i])) << linears[i]->name() << " differs when run in its group";
  return quantizations;
}

// The same check on float32 and bf16 activations of one seed; both must
// quantize as often. Returns that count.
int check_both_dtypes(std::span<const Linear* const> linears, uint32_t seed, Precision mode) {
  const auto x = random_activations(kM * kK, seed, 2.0f);
  const int quantizations = check_group_matches_alone<float>(linears, x, mode);
  EXPECT_EQ(check_group_matches_alone<uint16_t>(linears, to_bf16(x), mode), quantizations);
  return quantizations;
}

TEST(LinearSharing, OneInputScaleQuantizesOnceAndMatchesEachAloneBitForBit) {
  Siblings s(0.0217f, 0.0217f, 0.0217f);
  EXPECT_EQ(check_both_dtypes(s.all(), 5, Precision::W8A8), 1);
}

TEST(LinearSharing, DifferentInputScalesAreNotFused) {
  // k has its own s_x: q and v share one quantization, k makes its own.
  Siblings s(0.0217f, 0.0311f, 0.0217f);
  EXPECT_EQ(check_both_dtypes(s.all(), 6, Precision::W8A8), 2);
  // One ulp apart is "different" too: the codes could differ.
  Siblings near(0.0217f, std::nextafter(0.0217f, 1.0f), 0.0217f);
  EXPECT_EQ(check_both_dtypes(near.all(), 6, Precision::W8A8), 2);
}

TEST(LinearSharing, MemberWithCodeHookQuantizesForItself) {
  Siblings s(0.0217f, 0.0217f, 0.0217f);
  int hook_calls = 0;
  s.k.set_code_hook([&](const std::string& name, uint8_t* codes, int64_t M, int64_t K) {
    EXPECT_EQ(name, "attn.to_k");
    EXPECT_EQ(M, kM);
    EXPECT_EQ(K, kK);
    codes[0] = 0x38;  // 1.0: the hook's codes must reach k only
    ++hook_calls;
  });
  const auto x = random_activations(kM * kK, 7, 2.0f);
  const auto group = s.all();
  EXPECT_EQ(check_group_matches_alone<float>(group, x, Precision::W8A8), 2);
  EXPECT_EQ(hook_calls, 2);  // once alone, once in the group
}

TEST(LinearSharing, W8A16DenseAndMixedGroupsRunEachMemberAsAlone) {
  Siblings s(0.0217f, 0.0217f, 0.0217f);
  EXPECT_EQ(check_both_dtypes(s.all(), 8, Precision::W8A16), 0);

  auto gate_w = make_dense_linear("mlp.gate_proj", DType::BF16, 24, kK, 21, false);
  auto up_w = make_dense_linear("mlp.up_proj", DType::F32, 24, kK, 22, true);
  Linear gate(gate_w.weights), up(up_w.weights);
  const std::array<const Linear*, 2> dense = {&gate, &up};
  EXPECT_EQ(check_both_dtypes(dense, 8, Precision::W8A8), 0);  // dense ignores the mode

  const std::array<const Linear*, 3> mixed = {&gate, &s.q, &s.v};
  EXPECT_EQ(check_both_dtypes(mixed, 8, Precision::W8A8), 1);
}

TEST(LinearSharing, ObserversSeeTheInputOfEveryMember) {
  Siblings s(0.0217f, 0.0217f, 0.0217f);
  std::vector<std::string> seen;
  for (Linear* l : {&s.q, &s.k, &s.v})
    l->set_input_observer([&](const std::string& name, const float* x, const uint16_t*, int64_t M, int64_t K) {
      EXPECT_NE(x, nullptr);
      EXPECT_EQ(M * K, kM * kK);
      seen.push_back(name);
    });
  const auto x = random_activations(kM * kK, 9);
  std::vector<float> yq(kM * 48), yk(kM * 16), yv(kM * 16);
  const std::array<float*, 3> ys = {yq.data(), yk.data(), yv.data()};
  Linear::forward_sharing_input(s.all(), x.data(), kM, ys, Precision::W8A8);
  EXPECT_EQ(seen, (std::vector<std::string>{"attn.to_q", "attn.to_k", "attn.to_v"}));
}

TEST(LinearSharing, RejectsMismatchedArguments) {
  Siblings s(0.0217f, 0.0217f, 0.0217f);
  auto wide_w = make_fp8_linear("mlp.up_proj", 16, kK + 1, 3, false);
  Linear wide(wide_w.weights);
  const auto x = random_activations(kM * (kK + 1), 10);
  std::vector<float> y1(kM * 48), y2(kM * 16);
  const std::array<const Linear*, 2> mismatched = {&s.q, &wide};
  const std::array<float*, 2> ys = {y1.data(), y2.data()};
  try {
    Linear::forward_sharing_input(mismatched, x.data(), kM, ys, Precision::W8A8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in_features"), std::string::npos) << e.what();
  }
  const std::array<float*, 1> one_output = {y1.data()};
  EXPECT_THROW(Linear::forward_sharing_input(s.all(), x.data(), kM, one_output, Precision::W8A8), Error);
  const std::array<float*, 3> null_output = {y1.data(), nullptr, y2.data()};
  EXPECT_THROW(Linear::forward_sharing_input(s.all(), x.data(), kM, null_output, Precision::W8A8), Error);
}

}  // namespace
}  // namespace stepmix
