// A generation on a model with vae/ (a seeded 48-channel transformer beside
// the tiny Wan2.2 VAE): the final latent decoded into a PNG, an MP4 and a
// frame folder in one decode, progress per latent frame, image-to-video with
// latent frame 0 kept as the VAE encoded the image, and the requests refused
// before sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "io/video.hpp"
#include "pipeline/model_setup.hpp"
#include "stepmix/model.hpp"
#include "synthetic_checkpoint.hpp"
#include "vae/vae.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;

const std::string kVae = std::string(STEPMIX_TEST_DATA) + "/golden/wan22-vae-tiny/vae";

// tiny_shape(48), seed 3: the transformer of tests/data/vae-model (its README).

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class VaeGeneration : public TempDirTest {
 protected:
  // model/{transformer/, vae -> the tiny VAE}
  std::string make_model(const std::string& name, int64_t channels = 48) {
    const fs::path root = dir_ / name;
    write_synthetic_transformer((root / "transformer").string(), tiny_shape(channels), false, 3);
    fs::create_directory_symlink(kVae, root / "vae");
    return root.string();
  }
  // 5 frames of 32x48: latent {48, 2, 2, 3}; 2 steps, no CFG.
  static GenerateRequest request(int frames = 5) {
    GenerateRequest r;
    r.prompt_ids = std::vector<int64_t>{5, 9, 13};  // < vocab_size 16
    r.guidance = 1.0;
    r.steps = 2;
    r.height = 32;
    r.width = 48;
    r.frames = frames;
    r.fps = 12;
    return r;
  }
  // A smooth 80x64 picture (wider and taller than the request).
  std::string write_picture() const {
    Image8 im{80, 64, 3, {}};
    im.pixels.resize(80 * 64 * 3);
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 80; ++x)
        for (int c = 0; c < 3; ++c) im.pixels[std::size_t((y * 80 + x) * 3 + c)] = uint8_t((x * 3 + y * 2 + c * 60) % 256);
    const std::string path = (dir_ / "picture.png").string();
    write_png(path, im);
    return path;
  }
};

// The committed model the CLI tests use (tests/tools/generate_vae.sh) is what
// the synthetic writer makes from the shape and seed its README gives.
TEST_F(VaeGeneration, TheCommittedFixtureIsTheSyntheticTransformerItsReadmeNames) {
  const std::string root = make_model("model");
  const fs::path committed = fs::path(STEPMIX_TEST_DATA) / "vae-model";
  for (const char* file : {"transformer/config.json", "transformer/diffusion_pytorch_model.safetensors"})
    EXPECT_EQ(file_bytes(fs::path(root) / file), file_bytes(committed / file)) << file;
  EXPECT_EQ(fs::canonical(committed / "vae"), fs::canonical(kVae));
}

TEST_F(VaeGeneration, OneDecodeWritesTheVideoTheFramesTheStripAndTheLatent) {
  Model model = Model::open(make_model("model"));
  EXPECT_TRUE(model.info().has_vae);
  const GenerateResult result = model.generate(request());
  EXPECT_TRUE(result.plan.decodes);
  EXPECT_EQ(result.plan.latent_shape, (std::array<int64_t, 4>{48, 2, 2, 3}));
  const std::string video = (dir_ / "clip.mp4").string(), frames_dir = (dir_ / "frames").string();
  const std::string strip = (dir_ / "strip.png").string(), latent_file = (dir_ / "latent.safetensors").string();
  GenerationOutputs outputs(model, result.plan, {video, latent_file, frames_dir});
  GenerationOutputs picture(model, result.plan, {strip, std::nullopt, std::nullopt});
  std::vector<std::pair<int64_t, int64_t>> progress;
  outputs.write(result, {"ids:5,9,13", "", 0, "model"},
                [&](int64_t done, int64_t total) { progress.emplace_back(done, total); });
  picture.write(result, {"ids:5,9,13", "", 0, "model"});
  EXPECT_EQ(progress, (std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 2}}));

  const VideoInfo info = probe_video(video);
  EXPECT_EQ(info.frames, 5);
  EXPECT_EQ(info.width, 48);
  EXPECT_EQ(info.height, 32);
  EXPECT_DOUBLE_EQ(info.fps, 12.0);
  EXPECT_EQ(read_png(strip).width, 5 * 48);
  // The frames are the VAE's decode of the latent written beside them.
  const auto latent = SafetensorsFile::open(latent_file);
  const TensorView& z = latent->get("latent");
  EXPECT_EQ(std::vector<float>(z.as<float>(), z.as<float>() + z.numel()), result.latent);
  const vae::WanVae vae = vae::WanVae::load(kVae);
  int64_t frames = 0;
  vae.decode(z.as<float>(), z.shape, [&](int64_t t, const vae::Frame& rgb) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%05lld.png", (long long)t);
    EXPECT_EQ(read_png((fs::path(frames_dir) / name).string()).pixels, vae::to_image8(rgb).pixels) << name;
    ++frames;
  });
  EXPECT_EQ(frames, 5);
}

TEST_F(VaeGeneration, AnImageRequestDecodesToOnePicture) {
  Model model = Model::open(make_model("model"));
  const GenerateResult result = model.generate(request(1));
  const std::string path = (dir_ / "image.png").string();
  GenerationOutputs(model, result.plan, {path, std::nullopt, std::nullopt}).write(result, {"ids:5,9,13", "", 0, "model"});
  const Image8 image = read_png(path);
  EXPECT_EQ(image.width, 48);
  EXPECT_EQ(image.height, 32);
  // The generation's parameters travel with the decoded picture.
  bool has_parameters = false;
  for (const auto& [keyword, text] : read_png_metadata(path)) has_parameters |= keyword == "parameters";
  EXPECT_TRUE(has_parameters);
}

// Latent frame 0 is the VAE's latent of the picture, scaled to cover 48x32
// and centre-cropped, and sampling leaves it so.
TEST_F(VaeGeneration, ImageToVideoKeepsTheEncodedPictureAsFrameZero) {
  Model model = Model::open(make_model("model"));
  GenerateRequest r = request();
  r.image = write_picture();
  const GenerateResult result = model.generate(r);
  EXPECT_EQ(result.plan.condition_frames, (std::vector<int64_t>{1, 0}));
  const vae::WanVae vae = vae::WanVae::load(kVae);
  const std::vector<float> want = vae.encode_image(resize_and_center_crop(read_png_rgb(*r.image), 48, 32)).latent;
  const int64_t C = 48, T = 2, HW = 2 * 3;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < HW; ++p)
      ASSERT_EQ(result.latent[std::size_t(c * T * HW + p)], want[std::size_t(c * HW + p)]) << c << "," << p;
  // Without the picture the same seed samples another video.
  EXPECT_NE(model.generate(request()).latent, result.latent);
}

// A model without "stepmix" defaults in model_index.json (as a Cosmos3
// checkpoint) takes the Cosmos3 runtimes' defaults: a 189-frame 720 x 1280
// video in 35 steps, an image (one frame) of 1024 x 1024 in 50; guidance 6;
// UniPC's flow shift 10 for a video and 3 for an image, whatever the
// scheduler file holds (a note says so). The mode is the frame count's: 2 to
// 4 frames make one latent frame and are still a video.
TEST_F(VaeGeneration, WithoutModelDefaultsARequestTakesTheCosmos3Defaults) {
  Model model = Model::open(make_model("model"));
  GenerateRequest r;
  r.prompt_ids = std::vector<int64_t>{5, 9, 13};
  GeneratePlan p = model.plan(r);
  EXPECT_TRUE(p.video);
  EXPECT_EQ(p.latent_shape, (std::array<int64_t, 4>{48, 48, 45, 80}));
  EXPECT_EQ(p.steps, 35);
  EXPECT_EQ(p.guidance, 6.0);
  EXPECT_EQ(p.flow_shift, 10.0);
  EXPECT_EQ(p.plan.generation.size(), 35u);
  r.steps = 4;  // docs/schedulers.md: N = 4, shift 10
  EXPECT_EQ(model.plan(r).timesteps, (std::vector<double>{999, 967, 909, 769}));

  r.steps.reset();
  r.frames = 1;
  p = model.plan(r);
  EXPECT_FALSE(p.video);
  EXPECT_EQ(p.latent_shape, (std::array<int64_t, 4>{48, 1, 64, 64}));
  EXPECT_EQ(p.steps, 50);
  EXPECT_EQ(p.flow_shift, 3.0);

  r.frames = 3;
  p = model.plan(r);
  EXPECT_TRUE(p.video);
  EXPECT_EQ(p.latent_shape[1], 1);
  EXPECT_EQ(p.steps, 35);
  EXPECT_EQ(p.flow_shift, 10.0);

  // The Cosmos3 checkpoint's own scheduler file (Karras, flow_shift 1).
  r.frames.reset();
  r.scheduler_config = std::string(STEPMIX_TEST_DATA) + "/golden/cosmos3-tiny/scheduler/unipc_checkpoint_default.json";
  p = model.plan(r);
  EXPECT_EQ(p.flow_shift, 10.0);
  bool said = false;
  for (const std::string& note : p.notes) said |= note.find("flow_shift 10 (the video default;") != std::string::npos;
  EXPECT_TRUE(said);
  r.flow_shift = 1.0;
  EXPECT_EQ(model.plan(r).flow_shift, 1.0);
  // A request made exact for another model keeps the shift it sampled with.
  r.frames = 3;
  r.flow_shift.reset();
  p = model.plan(r);
  EXPECT_EQ(model.plan(sampled_exactly(r, p)).flow_shift, 10.0);
}

// The latent geometry follows the VAE's config (its spatial and temporal
// factors), not Wan2.2's 16 and 4: a VAE of three levels compresses 8x in
// space and, with one temporal down-sampling, 2x in time.
TEST_F(VaeGeneration, TheLatentGeometryIsTheVaesFactors) {
  const fs::path root = dir_ / "model8";
  write_synthetic_transformer((root / "transformer").string(), tiny_shape(48), false, 3);
  fs::create_directories(root / "vae");
  nlohmann::json config = nlohmann::json::parse(file_bytes(fs::path(kVae) / "config.json"));
  config["dim_mult"] = {1, 2, 2};
  config["temperal_downsample"] = {false, true};
  config["scale_factor_spatial"] = 8;
  config["scale_factor_temporal"] = 2;
  std::ofstream(root / "vae" / "config.json") << config.dump();
  const ModelDirectory dir = ModelDirectory::open(root.string());
  const ModelDefaults defaults = read_model_defaults(dir);
  EXPECT_EQ(defaults.spatial_factor, 8);
  EXPECT_EQ(defaults.temporal_factor, 2);
  const GeometryRequest request{std::nullopt, 32, 48, 5};
  const std::array<int64_t, 4> shape = latent_shape_for(request, dir, 48, defaults);
  EXPECT_EQ(shape, (std::array<int64_t, 4>{48, 3, 4, 6}));
  const PromptGeometry geometry =
      prompt_geometry_for({shape, std::nullopt, std::nullopt, std::nullopt}, shape, dir, defaults, 24.0, std::nullopt);
  EXPECT_EQ(geometry.height, 32);
  EXPECT_EQ(geometry.width, 48);
  EXPECT_EQ(geometry.frames, 5);
  EXPECT_NE(error_of([&] {
              latent_shape_for({std::nullopt, 36, 48, 5}, dir, 48, defaults);
            }).find("--height and --width must be positive multiples of 8 (the VAE's spatial factor)"),
            std::string::npos);
}

// The duration sentence states the frame count asked for: a model default
// of 6 frames (not 4k + 1) makes 2 latent frames that decode to 5, and the
// prompt speaks of 6, as a request giving --frames 6 does.
TEST_F(VaeGeneration, ThePromptStatesTheFrameCountTheModelDefaultAsksFor) {
  const fs::path root = make_model("defaults");
  std::ofstream(root / "model_index.json") << R"({"stepmix": {"num_frames": 6, "height": 32, "width": 48}})";
  const ModelDirectory dir = ModelDirectory::open(root.string());
  const ModelDefaults defaults = read_model_defaults(dir);
  const GeometryRequest none{std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  const std::array<int64_t, 4> shape = latent_shape_for(none, dir, 48, defaults);
  EXPECT_EQ(shape, (std::array<int64_t, 4>{48, 2, 2, 3}));
  PromptGeometry geometry = prompt_geometry_for(none, shape, dir, defaults, 10.0, std::nullopt);
  EXPECT_EQ(geometry.frames, 6);
  EXPECT_EQ(geometry.height, 32);
  EXPECT_EQ(geometry.width, 48);
  geometry = prompt_geometry_for({std::nullopt, std::nullopt, std::nullopt, 7}, shape, dir, defaults, 10.0,
                                 std::nullopt);
  EXPECT_EQ(geometry.frames, 7);
  // A latent shape stands for the frames it decodes to.
  geometry = prompt_geometry_for({shape, std::nullopt, std::nullopt, std::nullopt}, shape, dir, defaults, 10.0,
                                 std::nullopt);
  EXPECT_EQ(geometry.frames, 5);
}

TEST_F(VaeGeneration, RequestsThatCannotWorkAreRefusedBeforeSampling) {
  Model model = Model::open(make_model("model"));
  GenerateRequest r = request(1);
  r.image = write_picture();
  std::string e = error_of([&] { model.plan(r); });
  EXPECT_NE(e.find("image-to-video needs a video of 5 or more frames"), std::string::npos) << e;
  r = request();
  r.image = write_text("not.png", "hello");
  e = error_of([&] { model.generate(r); });
  EXPECT_NE(e.find(*r.image), std::string::npos) << e;
  // Noise of the wrong size is refused before the picture's latent is
  // copied into it (an empty or short vector was written past its end).
  for (std::size_t values : {std::size_t(0), std::size_t(1), std::size_t(48 * 2 * 2 * 3 - 1)}) {
    r = request();
    r.image = write_picture();
    r.noise = std::vector<float>(values, 0.5f);
    e = error_of([&] { model.generate(r); });
    EXPECT_NE(e.find("initial noise has " + std::to_string(values) + " values, the latent [1, 48, 2, 2, 3] needs 576"),
              std::string::npos)
        << e;
  }
  // A token cancelled before the call: no step runs.
  CancelToken cancel;
  cancel.cancel();
  int steps = 0;
  GenerateCallbacks count_steps;
  count_steps.on_step_begin = [&](const StepEvent&) { ++steps; };
  e = error_of([&] { model.generate(request(), count_steps, &cancel); });
  EXPECT_NE(e.find("cancelled after step 0 of 2; nothing was written"), std::string::npos) << e;
  EXPECT_EQ(steps, 0);
  const GeneratePlan plan = model.plan(request());
  e = error_of([&] { GenerationOutputs(model, plan, {(dir_ / "clip.avi").string(), std::nullopt, std::nullopt}); });
  EXPECT_NE(e.find("extension '.avi' is not supported here; expected .png, .mp4 or .safetensors"), std::string::npos)
      << e;

  // What is written must be the result of the plan the outputs were checked for.
  {
    GenerationOutputs outputs(model, plan, {std::nullopt, (dir_ / "latent.safetensors").string(), std::nullopt});
    GenerateResult result;
    result.plan = plan;
    result.latent.assign(48 * 2 * 2 * 3 - 1, 0.5f);
    e = error_of([&] { outputs.write(result, {}); });
    EXPECT_NE(e.find("the result holds 575 latent values, its latent [1, 48, 2, 2, 3] has 576; nothing was written"),
              std::string::npos)
        << e;
    result.plan.latent_shape = {48, 2, 4, 6};
    result.latent.assign(48 * 2 * 4 * 6, 0.5f);
    e = error_of([&] { outputs.write(result, {}); });
    EXPECT_NE(e.find("the result's latent [1, 48, 2, 4, 6] is not the [1, 48, 2, 2, 3] these outputs were checked for"),
              std::string::npos)
        << e;
    EXPECT_FALSE(fs::exists(dir_ / "latent.safetensors"));
    e = error_of([&] {
      GenerationOutputs(model, GeneratePlan{}, {(dir_ / "x.safetensors").string(), std::nullopt, std::nullopt});
    });
    EXPECT_NE(e.find("the plan's latent [1, 0, 0, 0, 0] is empty"), std::string::npos) << e;
  }

  // A model without vae/ has nothing to decode video or encode an image with.
  const std::string bare = make_model("bare-model");
  fs::remove(fs::path(bare) / "vae");
  Model no_vae = Model::open(bare);
  const GeneratePlan bare_plan = no_vae.plan(request());
  e = error_of([&] { GenerationOutputs(no_vae, bare_plan, {(dir_ / "clip.mp4").string(), std::nullopt, std::nullopt}); });
  EXPECT_NE(e.find("video is decoded by the model's vae/"), std::string::npos) << e;
  e = error_of([&] { GenerationOutputs(no_vae, bare_plan, {std::nullopt, std::nullopt, (dir_ / "f").string()}); });
  EXPECT_NE(e.find("frames are decoded by the model's vae/"), std::string::npos) << e;
  r = request();
  r.image = write_picture();
  e = error_of([&] { no_vae.plan(r); });
  EXPECT_NE(e.find("image-to-video needs a model with vae/"), std::string::npos) << e;

  // The VAE's latent channels must be the transformer's.
  e = error_of([&] { Model::open(make_model("mismatch", 16)); });
  EXPECT_NE(e.find("z_dim: expected the transformer's latent_channel 16, got 48"), std::string::npos) << e;
}

}  // namespace
}  // namespace stepmix::test
