// The vision forward against the float32 goldens of tests/data/golden/
// cosmos3-tiny/forward (README §5, bounds from §9). Our inv_freq is
// bit-identical to rope.inv_freq (checked below), so the tighter column of
// the tolerance table applies.
#include <cstdio>
#include <map>

#include "core/numerics.hpp"
#include "model_test_util.hpp"

namespace stepmix::test {
namespace {

// README §9, "bound if your inv_freq == rope.inv_freq".
constexpr double kDenseBound = 5e-6;  // velocity and hidden states
constexpr double kW8A16HiddenBound = 5e-6;
constexpr double kW8A16VelocityBound = 2e-6;
constexpr double kW8A8ForcedBound = 2e-6;
constexpr double kW8A8FreeRunningBound = 1e-1;
constexpr double kCodeMismatchFraction = 1e-3;

struct Deviation {
  double worst = 0;
  std::string where;
  void add(double d, const std::string& name) {
    if (d > worst) worst = d, where = name;
  }
};

void report(const char* what, const Deviation& d, double bound) {
  std::printf("[ measured ] %-34s max|a-g|/max|g| = %.2e at %s (bound %.0e)\n", what, d.worst, d.where.c_str(), bound);
}

// Per-layer hidden states of a variant: "" (dense), "w8a16." or "w8a8.".
void compare_hidden(const ForwardDebug& debug, const SafetensorsFile& golden, const std::string& prefix,
                    const std::string& label, double bound, Deviation& worst) {
  for (const auto& [name, tensor] : debug.tensors) {
    if (name.rfind("und_hidden.", 0) != 0 && name.rfind("gen_hidden.", 0) != 0) continue;
    const double d = max_normalised_deviation(tensor.data, golden_floats(golden, prefix + name));
    EXPECT_LE(d, bound) << label << " " << prefix + name;
    worst.add(d, label + ":" + prefix + name);
  }
}

TEST(ForwardGolden, RopeTablesMatchBitForBitInFrequencyAndWithinAnUlpInValue) {
  Cosmos3Transformer model = load_tiny("transformer");
  double worst = 0;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    ForwardDebug debug;
    model.forward(read_forward_inputs(*golden), {Precision::BF16, Precision::BF16, ActivationDType::F32, &debug});
    EXPECT_EQ(debug.tensors.at("rope.inv_freq").data, golden_floats(*golden, "rope.inv_freq")) << name;
    for (const char* table : {"rope.cos", "rope.sin"}) {
      const auto& actual = debug.tensors.at(table).data;
      const auto expected = golden_floats(*golden, table);
      ASSERT_EQ(actual.size(), expected.size());
      for (std::size_t i = 0; i < actual.size(); ++i) {
        worst = std::max(worst, double(std::fabs(actual[i] - expected[i])));
        EXPECT_NEAR(actual[i], expected[i], 1.2e-7) << name << " " << table << "[" << i << "]";
      }
    }
  }
  std::printf("[ measured ] rope.cos/sin max abs difference %.2e\n", worst);
}

TEST(ForwardGolden, DenseMatchesEveryIntermediateAndVelocity) {
  Cosmos3Transformer model = load_tiny("transformer");
  Deviation embeds, all;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    ForwardDebug debug;
    const HostTensor velocity =
        model.forward(read_forward_inputs(*golden), {Precision::BF16, Precision::BF16, ActivationDType::F32, &debug});
    EXPECT_EQ(velocity.shape, golden->get("velocity").shape);
    for (const char* t :
         {"timestep_embed", "und_embed", "vision_proj_in", "gen_embed", "gen_final_norm", "packed_pred"}) {
      const double d = max_normalised_deviation(debug.tensors.at(t).data, golden_floats(*golden, t));
      EXPECT_LE(d, kDenseBound) << name << " " << t;
      embeds.add(d, name + ":" + t);
    }
    compare_hidden(debug, *golden, "", name, kDenseBound, all);
    const double d = max_normalised_deviation(velocity.data, golden_floats(*golden, "velocity"));
    EXPECT_LE(d, kDenseBound) << name << " velocity";
    all.add(d, name + ":velocity");
  }
  report("dense embeddings/readout", embeds, kDenseBound);
  report("dense velocity+hidden", all, kDenseBound);
}

TEST(ForwardGolden, ConditionedFramesAreZero) {
  Cosmos3Transformer model = load_tiny("transformer");
  auto golden = open_forward_case("cond");
  const ForwardInputs inputs = read_forward_inputs(*golden);
  const HostTensor v = model.forward(inputs, {Precision::BF16, Precision::BF16});
  const int64_t C = v.shape[1], T = v.shape[2], HW = v.shape[3] * v.shape[4];
  ASSERT_EQ(inputs.condition_frame_mask.size(), std::size_t(T));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < HW; ++i) {
        const float x = v.data[std::size_t((c * T + t) * HW + i)];
        if (inputs.condition_frame_mask[std::size_t(t)])
          EXPECT_EQ(x, 0.0f);
        else
          EXPECT_NE(x, 0.0f);
      }
}

TEST(ForwardGolden, W8A16MatchesHiddenStatesAndVelocity) {
  Cosmos3Transformer model = load_tiny("transformer-fp8");
  Deviation hidden, velocity;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    ForwardDebug debug;
    const HostTensor v = model.forward(read_forward_inputs(*golden), {Precision::W8A16, Precision::W8A16, ActivationDType::F32, &debug});
    compare_hidden(debug, *golden, "w8a16.", name, kW8A16HiddenBound, hidden);
    const double d = max_normalised_deviation(v.data, golden_floats(*golden, "velocity_w8a16"));
    EXPECT_LE(d, kW8A16VelocityBound) << name;
    velocity.add(d, name);
  }
  report("w8a16 hidden states", hidden, kW8A16HiddenBound);
  report("w8a16 velocity", velocity, kW8A16VelocityBound);
}

// Forced-code mode (README §9): every W8A8 linear quantizes as usual, the
// hook counts codes that differ from the stored ones (each must be one E4M3
// step away), then substitutes the stored codes.
struct ForcedCodes {
  const SafetensorsFile* golden = nullptr;
  int64_t codes = 0, mismatches = 0, far_mismatches = 0;
  std::map<std::string, int> calls;

  ActivationCodeHook hook() {
    return [this](const std::string& linear, uint8_t* q, int64_t M, int64_t K) {
      ++calls[linear];
      const TensorView& stored = golden->get("w8a8.act_codes." + linear);
      ASSERT_EQ(stored.numel(), M * K) << linear;
      const uint8_t* expected = stored.as<uint8_t>();
      for (int64_t i = 0; i < M * K; ++i) {
        if (q[i] == expected[i]) continue;
        ++mismatches;
        // Neighbouring codes of the same sign differ by one in the magnitude bits.
        const bool same_sign = (q[i] & 0x80) == (expected[i] & 0x80);
        if (!same_sign || std::abs(int(q[i] & 0x7F) - int(expected[i] & 0x7F)) != 1) ++far_mismatches;
      }
      codes += M * K;
      std::copy(expected, expected + M * K, q);
    };
  }
};

TEST(ForwardGolden, W8A8ForcedCodesMatchTightly) {
  Deviation all;
  int64_t codes = 0, mismatches = 0;
  for (const std::string& name : forward_cases()) {
    Cosmos3Transformer model = load_tiny("transformer-fp8");
    auto golden = open_forward_case(name);
    ForcedCodes forced{golden.get()};
    model.set_activation_code_hook(forced.hook());
    ForwardDebug debug;
    const HostTensor v = model.forward(read_forward_inputs(*golden), {Precision::W8A8, Precision::W8A8, ActivationDType::F32, &debug});
    EXPECT_EQ(forced.calls.size(), 28u) << name << ": every governed linear runs W8A8 once";
    EXPECT_EQ(forced.far_mismatches, 0) << name;
    EXPECT_LE(double(forced.mismatches), kCodeMismatchFraction * double(forced.codes)) << name;
    codes += forced.codes;
    mismatches += forced.mismatches;
    compare_hidden(debug, *golden, "w8a8.", name, kW8A8ForcedBound, all);
    const double d = max_normalised_deviation(v.data, golden_floats(*golden, "velocity_w8a8"));
    EXPECT_LE(d, kW8A8ForcedBound) << name;
    all.add(d, name + ":velocity");
  }
  std::printf("[ measured ] w8a8 activation codes: %lld of %lld differ\n", (long long)mismatches, (long long)codes);
  report("w8a8 forced codes velocity+hidden", all, kW8A8ForcedBound);
}

TEST(ForwardGolden, W8A8FreeRunningStaysWithinTheLooseBound) {
  Cosmos3Transformer model = load_tiny("transformer-fp8");
  Deviation velocity;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    const HostTensor v = model.forward(read_forward_inputs(*golden), {Precision::W8A8, Precision::W8A8});
    const double d = max_normalised_deviation(v.data, golden_floats(*golden, "velocity_w8a8"));
    EXPECT_LE(d, kW8A8FreeRunningBound) << name;
    velocity.add(d, name);
  }
  report("w8a8 free-running velocity", velocity, kW8A8FreeRunningBound);
}

}  // namespace
}  // namespace stepmix::test
