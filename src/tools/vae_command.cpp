// `stepmix vae decode` and `stepmix vae encode`: the Wan2.2 VAE of a Cosmos3
// checkpoint on tensors in the golden file layout (tensor names `latent`,
// `pixels`, `mu`), and straight to pictures and video:
//   stepmix vae decode --vae DIR --latent IN.safetensors --out OUT.{safetensors,png,mp4}
//   stepmix vae encode --vae DIR (--pixels IN.safetensors | --image IN.png) --out OUT.safetensors
// --vae takes a vae folder or a model folder holding vae/.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "stepmix/error.hpp"
#include "tools/commands.hpp"
#include "vae/outputs.hpp"
#include "vae/vae.hpp"

namespace stepmix::cli {
namespace {

namespace fs = std::filesystem;

struct VaeOptionsCli {
  std::string vae_dir;
  std::string latent, pixels, image;
  std::string out;
  double fps = 24.0;
  std::string activations = "f32";
  std::string max_memory;  // empty: what the system has available
  std::string frames_dir;  // decode: also one PNG per frame
};

std::string extension_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

kernels::GemmArithmetic arithmetic_of(const VaeOptionsCli& o, const char* command) {
  if (o.activations == "f32") return kernels::GemmArithmetic::F32;
  if (o.activations == "bf16") return kernels::GemmArithmetic::BF16;
  throw Error(command, "--activations: expected f32 or bf16, got '" + o.activations + "'");
}

// "8G", "512M", "1048576": binary units.
std::size_t parse_memory(const std::string& text, const char* command) {
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (...) {
    end = 0;
  }
  const std::string unit = text.substr(end);
  const double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1024.0 * 1024 : unit == "G" ? 1024.0 * 1024 * 1024 : -1;
  if (end == 0 || scale < 0 || !(value > 0) || !std::isfinite(value))
    throw Error(command, "--max-memory: expected a positive size such as 8G, 512M or 1048576, got '" + text + "'");
  return std::size_t(value * scale);
}

std::size_t memory_limit(const VaeOptionsCli& o, const char* command) {
  if (!o.max_memory.empty()) return parse_memory(o.max_memory, command);
  return vae::available_memory_bytes().value_or(SIZE_MAX);
}

// The F32 tensor `name` of `file`, rank 5; anything else names the file.
const TensorView& input_tensor(const SafetensorsFile& file, const std::string& name, const std::string& expected) {
  const TensorView* t = file.find(name);
  if (!t) throw Error("vae", file.path() + ": no tensor '" + name + "' (expected F32 " + expected + ")");
  if (t->dtype != DType::F32)
    throw Error("vae", file.path() + ": tensor '" + name + "' is " + std::string(dtype_name(t->dtype)) + ", expected F32 " +
                           expected);
  return *t;
}

// Progress on stderr when it is a terminal: one line, rewritten.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), enabled_(isatty(STDERR_FILENO)) {}
  ~Progress() { finish(); }
  void operator()(int64_t done, int64_t total) {
    if (enabled_) std::fprintf(stderr, "\r%s: latent frame %lld/%lld   ", what_, (long long)done, (long long)total);
  }
  void finish() {
    if (enabled_) std::fprintf(stderr, "\r%60s\r", "");
    enabled_ = false;
  }

 private:
  const char* what_;
  bool enabled_;
};

void run_decode(const VaeOptionsCli& o) {
  const std::string ext = extension_of(o.out);
  if (ext != ".safetensors" && ext != ".png" && ext != ".mp4")
    throw Error("vae", "--out " + o.out + ": expected a .safetensors, .png or .mp4 file");
  if (!(o.fps > 0) || o.fps > 1000) throw Error("vae", "--fps: expected a number in (0, 1000], got " + std::to_string(o.fps));
  vae::VaeOptions load;
  load.arithmetic = arithmetic_of(o, "vae");
  const std::size_t limit = memory_limit(o, "vae");

  const auto file = SafetensorsFile::open(o.latent);
  const TensorView& latent = input_tensor(*file, "latent", "[1, 48, T, h, w]");
  vae::RunOptions run;
  run.input_label = o.latent + ": tensor 'latent'";

  // Size the request from the headers before reading a weight.
  load.decoder = load.encoder = false;
  const vae::WanVae sizes = vae::WanVae::load(o.vae_dir, load);
  const std::vector<int64_t>& shape = latent.shape;
  const int64_t z = sizes.config().z_dim;
  if (shape.size() != 5 || shape[0] != 1 || shape[1] != z || shape[2] < 1 || shape[3] < 1 || shape[4] < 1)
    throw Error("vae", run.input_label + ": expected shape [1, " + std::to_string(z) + ", T, h, w], got " +
                           shape_to_string(shape));
  const int64_t T = shape[2], F = sizes.config().pixel_frames(T), sf = sizes.config().spatial_factor();
  const int64_t H = shape[3] * sf, W = shape[4] * sf;
  vae::check_memory(sizes.estimate_decode(T, shape[3], shape[4], ext != ".mp4"), limit,
                    o.latent + ": decoding " + std::to_string(F) + " frames of " + std::to_string(H) + "x" +
                        std::to_string(W));
  load.decoder = true;
  const vae::WanVae model = vae::WanVae::load(o.vae_dir, load);

  Progress progress("decode");
  run.progress = [&](int64_t done, int64_t total) { progress(done, total); };
  vae::DecodeOutputs outputs;
  outputs.fps = o.fps;
  if (ext == ".safetensors") outputs.tensor = o.out;
  if (ext == ".png") outputs.image = o.out;
  if (ext == ".mp4") outputs.video = o.out;
  if (!o.frames_dir.empty()) outputs.frames_dir = o.frames_dir;
  const auto start = std::chrono::steady_clock::now();
  vae::decode_to_outputs(model, latent.as<float>(), shape, outputs, run);
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("pixels [1, 3, %lld, %lld, %lld] -> %s%s%s (%.2f s, %s activations)\n", (long long)F, (long long)H,
              (long long)W, o.out.c_str(), o.frames_dir.empty() ? "" : " and ", o.frames_dir.c_str(), seconds,
              o.activations.c_str());
}

void run_encode(const VaeOptionsCli& o) {
  if (extension_of(o.out) != ".safetensors") throw Error("vae", "--out " + o.out + ": expected a .safetensors file");
  vae::VaeOptions load;
  load.arithmetic = arithmetic_of(o, "vae");
  const std::size_t limit = memory_limit(o, "vae");

  std::vector<float> image_pixels;
  std::shared_ptr<const SafetensorsFile> file;
  const float* pixels = nullptr;
  std::vector<int64_t> shape;
  vae::RunOptions run;
  if (!o.image.empty()) {
    const Image8 rgb = read_png_rgb(o.image);
    if (rgb.width % 16 || rgb.height % 16)
      throw Error("vae", o.image + ": image of " + std::to_string(rgb.width) + "x" + std::to_string(rgb.height) +
                             ": expected width and height multiples of 16");
    image_pixels = vae::pixels_from_rgb8(rgb.pixels.data(), rgb.height, rgb.width);
    pixels = image_pixels.data();
    shape = {1, 3, 1, rgb.height, rgb.width};
    run.input_label = o.image;
  } else {
    file = SafetensorsFile::open(o.pixels);
    const TensorView& t = input_tensor(*file, "pixels", "[1, 3, F, H, W]");
    pixels = t.as<float>();
    shape = t.shape;
    run.input_label = o.pixels + ": tensor 'pixels'";
  }
  load.decoder = load.encoder = false;
  const vae::WanVae sizes = vae::WanVae::load(o.vae_dir, load);
  if (shape.size() == 5 && shape[2] >= 1 && shape[3] >= 1 && shape[4] >= 1)
    vae::check_memory(sizes.estimate_encode(shape[2], shape[3], shape[4]), limit,
                      run.input_label + ": encoding " + std::to_string(shape[2]) + " frames of " +
                          std::to_string(shape[3]) + "x" + std::to_string(shape[4]));
  load.encoder = true;
  const vae::WanVae model = vae::WanVae::load(o.vae_dir, load);
  Progress progress("encode");
  run.progress = [&](int64_t done, int64_t total) { progress(done, total); };
  const auto start = std::chrono::steady_clock::now();
  const vae::EncodeResult result = model.encode(pixels, shape, run);
  progress.finish();
  write_safetensors(o.out, {make_tensor_f32("latent", result.shape, result.latent), make_tensor_f32("mu", result.shape, result.mu)});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("latent %s -> %s (%.2f s, %s activations)\n", shape_to_string(result.shape).c_str(), o.out.c_str(), seconds,
              o.activations.c_str());
}

void add_common(CLI::App& cmd, VaeOptionsCli& o) {
  cmd.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd.add_option("--vae", o.vae_dir, "vae folder (config.json + *.safetensors) or a model folder with vae/")->required();
  cmd.add_option("--activations", o.activations,
                 "f32 (default; matches float32 references) or bf16 (bf16 convolution operands, float32 sums)")
      ->default_val("f32");
  cmd.add_option("--max-memory", o.max_memory,
                 "Refuse requests estimated to need more (e.g. 8G, 512M; default: the memory available)");
}

}  // namespace

void add_vae_command(CLI::App& app) {
  CLI::App* vae = app.add_subcommand("vae", "Decode latents to pictures and video, encode pictures to latents (Wan2.2 VAE)");
  vae->require_subcommand(1);
  {
    auto o = std::make_shared<VaeOptionsCli>();
    CLI::App* cmd = vae->add_subcommand("decode", "Latent [1, 48, T, h, w] -> pixels [1, 3, 4(T-1)+1, 16h, 16w]");
    add_common(*cmd, *o);
    cmd->add_option("--latent", o->latent, "safetensors file with the F32 tensor 'latent' (normalised, as generated)")->required();
    cmd->add_option("--out", o->out, ".safetensors (tensor 'pixels' F32 [1,3,F,H,W]), .png (an image, or the frames side by side) or .mp4 (H.264)")
        ->required();
    cmd->add_option("--fps", o->fps, "Frame rate of an .mp4 output")->default_val(24.0);
    cmd->add_option("--frames-dir", o->frames_dir, "Also write every frame as DIR/frame_00000.png, ... (a new folder)");
    cmd->callback([o] { run_decode(*o); });
  }
  {
    auto o = std::make_shared<VaeOptionsCli>();
    CLI::App* cmd = vae->add_subcommand("encode", "Pixels [1, 3, 1+4k, H, W] or a PNG image -> latent and posterior mean");
    add_common(*cmd, *o);
    CLI::Option* pixels = cmd->add_option("--pixels", o->pixels, "safetensors file with the F32 tensor 'pixels' in [-1, 1]");
    CLI::Option* image = cmd->add_option("--image", o->image, "PNG image, width and height multiples of 16");
    pixels->excludes(image);
    cmd->add_option("--out", o->out, ".safetensors file: tensors 'latent' (normalised) and 'mu' (posterior mean)")->required();
    cmd->callback([o, pixels, image] {
      if (!*pixels && !*image) throw Error("vae", "give --pixels IN.safetensors or --image IN.png");
      run_encode(*o);
    });
  }
}

}  // namespace stepmix::cli
