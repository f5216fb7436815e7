// The embedded Fashion-MNIST model (models/): the committed FP8 checkpoint is
// exactly what `stepmix quantize` makes from the committed BF16 one, generation
// is deterministic, and the shipped classifier recognises the prompted class.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/checkpoint.hpp"
#include "model/transformer.hpp"
#include "eval/classifier.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "pipeline/quantize.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

const std::string kBf16 = std::string(STEPMIX_MODELS_DIR) + "/fashion-cosmos3-bf16";
const std::string kFp8 = std::string(STEPMIX_MODELS_DIR) + "/fashion-cosmos3-fp8";

const char* kCanonical[10] = {"a photo of a t-shirt", "a photo of trousers", "a photo of a pullover",
                              "a photo of a dress",   "a photo of a coat",   "a photo of a sandal",
                              "a photo of a shirt",   "a photo of a sneaker", "a photo of a bag",
                              "a photo of an ankle boot"};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The documented command (models/fashion-cosmos3-fp8/README.md):
//   stepmix quantize --model models/fashion-cosmos3-bf16 --out models/fashion-cosmos3-fp8
// with the model's calibration_prompts.txt and defaults.
TEST(EmbeddedModel, CommittedFp8IsWhatQuantizeProduces) {
  const ModelDirectory dir = ModelDirectory::open(kBf16);
  const ModelDefaults defaults = read_model_defaults(dir);
  PromptEncoder encoder(dir);
  QuantizeSettings s;
  s.model_dir = kBf16;
  s.out_dir = (fs::temp_directory_path() / ("stepmix_embedded_fp8_" + std::to_string(::getpid()))).string();
  std::ifstream prompts(kBf16 + "/calibration_prompts.txt");
  for (std::string line; std::getline(prompts, line);)
    if (!line.empty() && line[0] != '#') s.calibration.prompts.push_back(encoder.encode(line, {}));
  ASSERT_FALSE(s.calibration.prompts.empty());
  s.calibration.negative_prompt = encoder.encode("", {});
  s.calibration.seeds = 2;
  s.calibration.steps = defaults.steps.value_or(8);
  s.calibration.guidance = defaults.guidance.value_or(3.0);
  s.calibration.latent_shape = latent_shape_for({}, dir, 1, defaults);
  quantize_checkpoint(s);
  for (const char* f : {"transformer/diffusion_pytorch_model.safetensors", "transformer/config.json",
                        "hf_quant_config.json"})
    EXPECT_TRUE(read_bytes(fs::path(s.out_dir) / f) == read_bytes(fs::path(kFp8) / f)) << f;
  fs::remove_all(s.out_dir);
}

struct Sampler {
  explicit Sampler(const std::string& model) : dir(ModelDirectory::open(model)), encoder(dir) {
    transformer = std::make_unique<Cosmos3Transformer>(Cosmos3Transformer::load(dir));
    defaults = read_model_defaults(dir);
    settings = read_sequence_settings(dir.config, dir.config_path);
  }
  std::vector<float> sample(const std::string& prompt, uint64_t seed) {
    const int steps = defaults.steps.value_or(8);
    StepController controller(
        plan_steps(resolve_policy(dir.config, dir.config_path, {}), transformer->has_fp8(), steps));
    auto scheduler = sched::make_scheduler(scheduler_config_for({}, dir, defaults, false));
    DenoiseRequest r;
    r.cond_ids = encoder.encode(prompt, {});
    r.uncond_ids = encoder.encode("", {});
    r.latent_shape = latent_shape_for({}, dir, 1, defaults);
    r.guidance = defaults.guidance.value_or(3.0);
    r.noise = NormalGenerator(seed).normals(std::size_t(r.latent_shape[2] * r.latent_shape[3]));
    return denoise(*transformer, *scheduler, controller, r, settings).latent;
  }
  ModelDirectory dir;
  PromptEncoder encoder;
  std::unique_ptr<Cosmos3Transformer> transformer;
  ModelDefaults defaults;
  SequenceSettings settings;
};

TEST(EmbeddedModel, ItsDefaultsAreAnImageOf28x28In8Steps) {
  const Model model = Model::open(kFp8);
  EXPECT_EQ(model.info().default_frames, 1);
  EXPECT_EQ(model.info().default_height, 28);
  EXPECT_EQ(model.info().default_width, 28);
  EXPECT_EQ(model.info().default_steps, 8);
  EXPECT_EQ(model.info().default_guidance, 3.0);
}

TEST(EmbeddedModel, GenerationIsDeterministic) {
  Sampler fp8(kFp8);
  EXPECT_EQ(fp8.sample("ankle boot", 0), fp8.sample("ankle boot", 0));
  EXPECT_NE(fp8.sample("ankle boot", 0), fp8.sample("ankle boot", 1));
}

// Measured when the model was trained (models/fashion-cosmos3-bf16/README.md):
// the classifier agrees with the prompt on about three quarters of the BF16
// samples at the default steps and guidance (chance: 10%). With 30 samples and
// a true rate of 0.75, fewer than 15 agreements has probability < 0.1%, so 15
// is the bound; anything near chance (3/30) means the pipeline is broken.
TEST(EmbeddedModel, ClassifierRecognisesThePromptedClassOnBf16Samples) {
  Sampler bf16(kBf16);
  const MlpClassifier classifier = MlpClassifier::load(kBf16 + "/classifier");
  int agree = 0, total = 0;
  for (int c = 0; c < 10; ++c)
    for (uint64_t seed = 0; seed < 3; ++seed, ++total) agree += classifier.predict(bf16.sample(kCanonical[c], seed)) == c;
  std::printf("[ embedded ] classifier agrees on %d/%d BF16 samples\n", agree, total);
  EXPECT_GE(agree, 15);
}

}  // namespace
}  // namespace stepmix
