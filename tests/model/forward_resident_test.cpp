// Cosmos3Transformer::forward_resident with several samples over the one
// latent in backend memory (the device loop's batched CFG step), on the CPU
// backend: each sample's velocity, bit for bit, what it gives alone and what
// the host forward gives; bad calls are refused with what was expected.
#include "model_test_util.hpp"
#include "common/error_of.hpp"

namespace stepmix::test {
namespace {

// A latent uploaded to the CPU backend and one velocity buffer per sample.
struct ResidentBuffers {
  ResidentBuffers(const ForwardInputs& in, int samples) : numel(in.latent.data.size()) {
    Backend& b = cpu_backend();
    latent = b.allocate(numel * sizeof(float));
    b.upload(latent->data(), in.latent.data.data(), numel * sizeof(float));
    for (int i = 0; i < samples; ++i) velocities.push_back(b.allocate(numel * sizeof(float)));
  }
  std::vector<float*> pointers() const {
    std::vector<float*> out;
    for (const auto& v : velocities) out.push_back(v->as<float>());
    return out;
  }
  std::vector<float> velocity(int i) const {
    std::vector<float> out(numel);
    cpu_backend().download(out.data(), velocities[std::size_t(i)]->data(), numel * sizeof(float));
    return out;
  }
  std::size_t numel;
  std::unique_ptr<BackendBuffer> latent;
  std::vector<std::unique_ptr<BackendBuffer>> velocities;
};

TEST(ForwardResident, TwoSamplesEqualTwoSingleCallsAndTheHostForward) {
  struct Variant {
    std::string folder;
    Precision precision;
  };
  for (const Variant& v : {Variant{"transformer", Precision::BF16}, Variant{"transformer-fp8", Precision::W8A16},
                           Variant{"transformer-fp8", Precision::W8A8}}) {
    Cosmos3Transformer model = load_tiny(v.folder);
    for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
      for (const char* name : {"video", "cond"}) {  // several frames; conditioning frames
        SCOPED_TRACE(v.folder + " " + std::string(precision_json_name(v.precision)) + " " +
                     std::string(activation_dtype_name(activations)) +
                     " " + name);
        const ForwardOptions options{v.precision, v.precision, activations};
        const ForwardInputs cond = read_forward_inputs(*open_forward_case(name)), uncond = shorter_prompt(cond);
        const ForwardInputs* both[2] = {&cond, &uncond};
        ResidentBuffers batched(cond, 2), alone(cond, 2);
        model.forward_resident(both, batched.latent->as<float>(), batched.pointers(), options);
        model.forward_resident(cond, alone.latent->as<float>(), alone.pointers()[0], options);
        model.forward_resident(uncond, alone.latent->as<float>(), alone.pointers()[1], options);
        const std::vector<HostTensor> host = model.forward_batch(both, options);
        for (int i = 0; i < 2; ++i) {
          EXPECT_TRUE(same_bits(batched.velocity(i), alone.velocity(i))) << "sample " << i;
          EXPECT_TRUE(same_bits(batched.velocity(i), host[std::size_t(i)].data)) << "sample " << i;
        }
        EXPECT_FALSE(same_bits(batched.velocity(0), batched.velocity(1))) << "the prompts must give different velocities";
      }
    }
  }
}

TEST(ForwardResident, RefusesMismatchedOrNullBuffers) {
  Cosmos3Transformer model = load_tiny("transformer");
  const ForwardOptions options{Precision::BF16, Precision::BF16};
  const ForwardInputs cond = read_forward_inputs(*open_forward_case("video")), uncond = shorter_prompt(cond);
  const ForwardInputs* both[2] = {&cond, &uncond};
  ResidentBuffers buffers(cond, 2);
  float* latent = buffers.latent->as<float>();
  const std::vector<float*> velocities = buffers.pointers();
  const auto message = [&](std::span<const ForwardInputs* const> inputs, const float* l, std::vector<float*> v) {
    return error_of([&] { model.forward_resident(inputs, l, v, options); });
  };
  EXPECT_NE(message(both, latent, {velocities[0]}).find("expected one velocity buffer per sample (2), got 1"),
            std::string::npos);
  EXPECT_NE(message(both, latent, {velocities[0], nullptr}).find("velocity buffer 1 is null"), std::string::npos);
  EXPECT_NE(message(both, nullptr, velocities).find("the latent buffer is null"), std::string::npos);
  EXPECT_NE(message(both, latent, {velocities[1], velocities[1]}).find("write the same velocity buffer"),
            std::string::npos);
  const ForwardInputs image = read_forward_inputs(*open_forward_case("image"));
  const ForwardInputs* different[2] = {&cond, &image};
  EXPECT_NE(message(different, latent, velocities).find("their latent shapes must agree"), std::string::npos);
  EXPECT_NE(message({}, latent, {}).find("at least one sample"), std::string::npos);
  EXPECT_NE(error_of([&] { model.forward_resident(cond, latent, nullptr, options); }).find("velocity buffer 0 is null"),
            std::string::npos);
}

}  // namespace
}  // namespace stepmix::test
