// stepmix::vae_decode and stepmix::vae_encode (include/stepmix/tools.hpp):
// the VAE on tensors in its checking files' layout, and straight to pictures
// and video. Requests are sized from the safetensors headers and refused
// before a weight is read when they would not fit in memory.
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "backend/vae_device.hpp"
#include "core/thread_pool.hpp"
#include "io/output_format.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "stepmix/tools.hpp"
#include "vae/outputs.hpp"
#include "vae/vae.hpp"

namespace stepmix {
namespace {

kernels::GemmArithmetic arithmetic_of(ActivationDType dtype) {
  return dtype == ActivationDType::BF16 ? kernels::GemmArithmetic::BF16 : kernels::GemmArithmetic::F32;
}

std::size_t memory_limit(const VaeRunOptions& o) {
  if (o.max_memory) return *o.max_memory;
  return vae::available_memory_bytes().value_or(SIZE_MAX);
}

// The F32 tensor `name` of `file`; anything else names the file.
const TensorView& input_tensor(const SafetensorsFile& file, const std::string& name, const std::string& expected) {
  const TensorView* t = file.find(name);
  if (!t) throw Error("vae", file.path() + ": no tensor '" + name + "' (expected F32 " + expected + ")");
  if (t->dtype != DType::F32)
    throw Error("vae", file.path() + ": tensor '" + name + "' is " + std::string(dtype_name(t->dtype)) +
                           ", expected F32 " + expected);
  return *t;
}

// The VAE device of --device (null for the CPU): a missing GPU is said
// first, then float32 activations, which are CPU-only.
VaeDevice* device_of(const VaeRunOptions& o) {
  ThreadPool::configured_size();  // STEPMIX_THREADS is checked on every device
  if (o.device == Device::Cpu) return nullptr;
  VaeDevice* device = &vae_device_for(o.device);
  if (o.activations != ActivationDType::BF16) throw Error("cuda", kF32ActivationsAreCpuOnly);
  return device;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::size_t parse_memory_size(const std::string& text, const std::string& option) {
  std::size_t end = 0;
  double value = 0;
  try {
    // Decimal only: stod would also read "0x10" (hexadecimal) and "inf".
    if (!text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.' || text[0] == '+') &&
        text.find_first_of("xXpPiInN") == std::string::npos)
      value = std::stod(text, &end);
  } catch (...) {
    end = 0;
  }
  const std::string unit = text.substr(end);
  const double scale = unit.empty()  ? 1.0
                       : unit == "K" ? 1024.0
                       : unit == "M" ? 1024.0 * 1024
                       : unit == "G" ? 1024.0 * 1024 * 1024
                                     : -1.0;
  // At least one byte: "0.5" or "1e-300G" would otherwise be a limit of 0.
  if (end == 0 || scale < 0 || !(value * scale >= 1) || !std::isfinite(value * scale) || value * scale > 0x1p62)
    throw Error("vae", option + ": expected a positive size such as 8G, 512M or 1048576, got '" + text + "'");
  return std::size_t(value * scale);
}

void vae_decode(const VaeDecodeOptions& o, std::FILE* out) {
  if (!o.out && !o.frames_dir) throw Error("vae", "decode: give --out and/or --frames-dir");
  vae::DecodeOutputs outputs;
  if (o.out) {
    switch (output_format_for(*o.out, "--out", {OutputFormat::Safetensors, OutputFormat::Png, OutputFormat::Mp4})) {
      case OutputFormat::Safetensors: outputs.tensor = o.out; break;
      case OutputFormat::Png: outputs.image = o.out; break;
      default: outputs.video = o.out; break;
    }
  }
  outputs.frames_dir = o.frames_dir;
  if (!(o.fps >= kMinFps && o.fps <= kMaxFps))
    throw Error("vae", "--fps: expected a number in [" + Error::number(kMinFps) + ", " + Error::number(kMaxFps) +
                           "], got " + Error::number(o.fps));
  outputs.fps = o.fps;
  VaeDevice* device = device_of(o.run);
  vae::VaeOptions load;
  load.arithmetic = arithmetic_of(o.run.activations);
  const std::size_t limit = memory_limit(o.run);

  const auto file = SafetensorsFile::open(o.latent);
  // Size the request from the headers before reading a weight.
  load.decoder = load.encoder = false;
  const vae::WanVae sizes = vae::WanVae::load(o.run.vae, load);
  const int64_t z = sizes.config().z_dim;
  const TensorView& latent = input_tensor(*file, "latent", "[1, " + std::to_string(z) + ", T, h, w]");
  vae::RunOptions run;
  run.input_label = o.latent + ": tensor 'latent'";
  run.progress = o.run.progress;
  run.device = device;

  const std::vector<int64_t>& shape = latent.shape;
  if (shape.size() != 5 || shape[0] != 1 || shape[1] != z || shape[2] < 1 || shape[3] < 1 || shape[4] < 1)
    throw Error("vae", run.input_label + ": expected shape [1, " + std::to_string(z) + ", T, h, w], got " +
                           shape_to_string(shape));
  const int64_t T = shape[2], F = sizes.config().pixel_frames(T), sf = sizes.config().spatial_factor();
  const int64_t H = shape[3] * sf, W = shape[4] * sf;
  vae::check_decode_fits(sizes, T, shape[3], shape[4], outputs.collects(), device, limit,
                         o.latent + ": decoding " + std::to_string(F) + " frames of " + std::to_string(H) + "x" +
                             std::to_string(W));
  // The outputs are checked before the weights are read.
  OutputSet set;
  set.add_input("--latent", o.latent);
  set.add_input("--vae", o.run.vae);
  const vae::DecodeOutputIds ids = vae::declare_decode_outputs(set, outputs, "--out");
  set.validate();
  load.decoder = true;
  const vae::WanVae model = vae::WanVae::load(o.run.vae, load);
  const auto start = std::chrono::steady_clock::now();
  vae::decode_and_stage(model, latent.as<float>(), shape, outputs, ids, set, run);
  set.commit();
  std::string written = o.out.value_or("");
  if (o.frames_dir) written += (written.empty() ? "" : " and ") + *o.frames_dir;
  std::fprintf(out, "pixels [1, 3, %lld, %lld, %lld] -> %s (%.2f s, %s activations%s)\n", (long long)F, (long long)H,
               (long long)W, written.c_str(), seconds_since(start),
               std::string(activation_dtype_name(o.run.activations)).c_str(), device ? ", on the GPU" : "");
}

void vae_encode(const VaeEncodeOptions& o, std::FILE* out) {
  if (bool(o.pixels) == bool(o.image)) throw Error("vae", "encode: give exactly one of --pixels IN.safetensors and --image IN.png");
  output_format_for(o.out, "--out", {OutputFormat::Safetensors});
  VaeDevice* device = device_of(o.run);
  vae::VaeOptions load;
  load.arithmetic = arithmetic_of(o.run.activations);
  const std::size_t limit = memory_limit(o.run);

  std::vector<float> image_pixels;
  std::shared_ptr<const SafetensorsFile> file;
  const float* pixels = nullptr;
  std::vector<int64_t> shape;
  vae::RunOptions run;
  run.progress = o.run.progress;
  run.device = device;
  if (o.image) {
    const Image8 rgb = read_png_rgb(*o.image);
    image_pixels = vae::pixels_from_rgb8(rgb.pixels.data(), rgb.height, rgb.width);
    pixels = image_pixels.data();
    shape = {1, 3, 1, rgb.height, rgb.width};
    run.input_label = *o.image;
  } else {
    file = SafetensorsFile::open(*o.pixels);
    const TensorView& t = input_tensor(*file, "pixels", "[1, 3, F, H, W]");
    pixels = t.as<float>();
    shape = t.shape;
    run.input_label = *o.pixels + ": tensor 'pixels'";
    // The encoder was trained on [-1, 1]; outside it (or NaN) the latent is
    // meaningless, so the request is refused rather than encoded.
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!(pixels[i] >= -1.0f && pixels[i] <= 1.0f))
        throw Error("vae", run.input_label + ": element " + std::to_string(i) + " is " + Error::number(pixels[i]) +
                               "; expected values in [-1, 1]");
  }
  load.decoder = load.encoder = false;
  const vae::WanVae sizes = vae::WanVae::load(o.run.vae, load);
  // A picture must tile the VAE's spatial factor (16 for Wan2.2); said
  // before any weight is read.
  if (const int64_t sf = sizes.config().spatial_factor(); o.image && (shape[3] % sf || shape[4] % sf))
    throw Error("vae", *o.image + ": image of " + std::to_string(shape[4]) + "x" + std::to_string(shape[3]) +
                           ": expected width and height multiples of " + std::to_string(sf) +
                           " (the VAE's spatial factor)");
  if (shape.size() == 5 && shape[2] >= 1 && shape[3] >= 1 && shape[4] >= 1)
    vae::check_encode_fits(sizes, shape[2], shape[3], shape[4], device, limit,
                           run.input_label + ": encoding " + std::to_string(shape[2]) + " frames of " +
                               std::to_string(shape[3]) + "x" + std::to_string(shape[4]));
  OutputSet set;
  set.add_input("--pixels", o.pixels.value_or(""));
  set.add_input("--image", o.image.value_or(""));
  set.add_input("--vae", o.run.vae);
  const OutputSet::Id id = set.add_file("--out", o.out);
  set.validate();
  load.encoder = true;
  const vae::WanVae model = vae::WanVae::load(o.run.vae, load);
  const auto start = std::chrono::steady_clock::now();
  const vae::EncodeResult result = model.encode(pixels, shape, run);
  set.stage_file(id, encode_safetensors(o.out, {make_tensor_f32("latent", result.shape, result.latent),
                                                make_tensor_f32("mu", result.shape, result.mu)}));
  set.commit();
  std::fprintf(out, "latent %s -> %s (%.2f s, %s activations%s)\n", shape_to_string(result.shape).c_str(),
               o.out.c_str(), seconds_since(start), std::string(activation_dtype_name(o.run.activations)).c_str(),
               device ? ", on the GPU" : "");
}

}  // namespace stepmix
