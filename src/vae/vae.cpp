#include "vae/vae.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "backend/vae_device.hpp"
#include "core/byte_count.hpp"
#include "io/checkpoint.hpp"
#include "stepmix/error.hpp"
#include "vae/device_frames.hpp"

namespace stepmix::vae {
namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return shape_to_string(shape); }

void check_finite(const float* data, int64_t count, const std::string& what) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(data[i]))
      throw Error("vae", what + ": element " + std::to_string(i) + " is " + (std::isnan(data[i]) ? "NaN" : "infinite") +
                             "; expected finite values");
}

void check_cancel(const RunOptions& options, int64_t done, int64_t total, const char* what) {
  if (options.cancel && options.cancel->load())
    throw Error("vae", std::string(what) + " cancelled after latent frame " + std::to_string(done) + " of " +
                           std::to_string(total) + "; nothing was written");
}

// A VAE device's scratch beyond frames for a mid block of `positions` ×
// `width`: a chunk of gathered convolution rows, a block of attention
// scores, and the attention's q, k, vᵀ.
std::size_t device_scratch_bytes(int64_t positions, int64_t width) {
  return 2 * kVaeDeviceChunkBytes + std::size_t(3 * positions * width) * sizeof(float);
}

// At the end of a run on a device, however it ends, what the device keeps
// for reuse goes back (backend/vae_device.hpp release_cached).
struct ReleaseOnExit {
  VaeDevice* device;
  ~ReleaseOnExit() {
    if (device) device->release_cached();
  }
};

// Frame t of a [1, C, T, H, W] tensor as a channels-last frame.
Frame frame_of(const float* tensor, int64_t C, int64_t T, int64_t H, int64_t W, int64_t t) {
  Frame f = Frame::zeros(H, W, C);
  for (int64_t c = 0; c < C; ++c) {
    const float* plane = tensor + (c * T + t) * H * W;
    for (int64_t p = 0; p < H * W; ++p) f.f32[std::size_t(p * C + c)] = plane[p];
  }
  return f;
}

}  // namespace

std::string find_vae_folder(const std::string& path) {
  if (!fs::is_directory(path)) throw Error("vae", path + ": not a directory (expected a vae folder or a model folder with vae/)");
  const fs::path nested = fs::path(path) / "vae";
  if (fs::is_regular_file(nested / "config.json")) return nested.string();
  if (fs::is_regular_file(fs::path(path) / "config.json")) return path;
  throw Error("vae", path + ": expected a vae folder (config.json and *.safetensors) or a model folder with vae/config.json");
}

WanVae WanVae::load(const std::string& path, const VaeOptions& options) {
  WanVae v;
  v.folder_ = find_vae_folder(path);
  v.config_ = read_vae_config((fs::path(v.folder_) / "config.json").string());
  v.arithmetic_ = options.arithmetic;
  for (std::size_t c = 0; c < v.config_.latents_std.size(); ++c) {
    v.mean_.push_back(v.config_.latents_mean[c]);
    v.inv_std_.push_back(1.0f / v.config_.latents_std[c]);
  }
  const TensorStore store = TensorStore::open_folder(v.folder_);
  WeightLoader weights(store, options.arithmetic);
  // Both halves are always checked (names, shapes, dtypes); only the
  // requested ones are read and packed.
  weights.set_packing(options.decoder);
  Decoder decoder = Decoder::load(weights, v.config_);
  v.decoder_weight_bytes_ = weights.packed_bytes();
  weights.set_packing(options.encoder);
  Encoder encoder = Encoder::load(weights, v.config_);
  v.encoder_weight_bytes_ = weights.packed_bytes() - v.decoder_weight_bytes_;
  weights.check_all_used();
  v.decoder_ = std::move(decoder);
  v.encoder_ = std::move(encoder);
  v.has_decoder_ = options.decoder;
  v.has_encoder_ = options.encoder;
  return v;
}

void WanVae::decode(const float* latent, const std::vector<int64_t>& shape, const PixelSink& sink,
                    const RunOptions& options) const {
  if (!has_decoder_) throw Error("vae", folder_ + ": the decoder was not loaded");
  const int64_t z = config_.z_dim;
  const std::string label = options.input_label.empty() ? "latent" : options.input_label;
  if (shape.size() != 5 || shape[0] != 1 || shape[1] != z || shape[2] < 1 || shape[3] < 1 || shape[4] < 1)
    throw Error("vae", label + ": expected shape [1, " + std::to_string(z) + ", T, h, w], got " + shape_text(shape));
  const int64_t T = shape[2], h = shape[3], w = shape[4];
  check_finite(latent, z * T * h * w, label + " " + shape_text(shape));
  check_device_arithmetic(options, "decoding");
  FrameTap host_tap;
  const FrameTap* tap = tap_for(options, host_tap);
  const ReleaseOnExit release{options.device};  // declared first: runs after the decoder's frames are gone
  Decoder decoder = decoder_;  // fresh histories, shared weights
  int64_t next_frame = 0;
  const int64_t expected_frames = config_.pixel_frames(T);
  for (int64_t t = 0; t < T; ++t) {
    check_cancel(options, t, T, "decode");
    // De-normalisation as the pipeline does it: divide by the float32
    // reciprocal of the std, then add the mean.
    Frame frame = frame_of(latent, z, T, h, w, t);
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t c = 0; c < z; ++c) {
        float& v = frame.f32[std::size_t(p * z + c)];
        v = v / inv_std_[std::size_t(c)];
        v = v + mean_[std::size_t(c)];
      }
    if (options.tap && *options.tap) (*options.tap)("z", frame);
    if (options.device) frame = upload_frame(*options.device, frame);
    decoder.push(frame, [&](Frame&& pixels) {
      const Frame rgb = pixels.on_device() ? download_frame(pixels) : std::move(pixels);
      check_finite(rgb.f32.data(), rgb.size(), "decoded pixel frame " + std::to_string(next_frame));
      sink(next_frame++, rgb);
    }, tap);
    if (options.progress) options.progress(t + 1, T);
  }
  if (next_frame != expected_frames)
    throw Error("vae", "internal: decoded " + std::to_string(next_frame) + " frames, expected " +
                           std::to_string(expected_frames));
}

void WanVae::check_device_arithmetic(const RunOptions& options, const char* what) const {
  if (options.device && arithmetic_ != kernels::GemmArithmetic::BF16)
    throw Error("vae", folder_ + ": " + what + " on the GPU runs BF16 arithmetic (--activations bf16)");
}

const FrameTap* WanVae::tap_for(const RunOptions& options, FrameTap& host_tap) {
  if (!options.device) return options.tap;
  if (!options.tap || !*options.tap) return nullptr;
  // On a device the tap sees host copies of its frames.
  host_tap = [&options](const std::string& module, const Frame& frame) { (*options.tap)(module, download_frame(frame)); };
  return &host_tap;
}

std::vector<float> WanVae::decode_to_tensor(const float* latent, const std::vector<int64_t>& shape,
                                            const RunOptions& options) const {
  const int64_t F = shape.size() == 5 ? config_.pixel_frames(shape[2]) : 0;
  std::vector<float> pixels;
  decode(latent, shape, [&](int64_t t, const Frame& rgb) {
    const int64_t H = rgb.h, W = rgb.w;
    if (pixels.empty()) pixels.resize(std::size_t(3 * F * H * W));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < H * W; ++p) pixels[std::size_t((c * F + t) * H * W + p)] = rgb.f32[std::size_t(p * 3 + c)];
  }, options);
  return pixels;
}

EncodeResult WanVae::encode(const float* pixels, const std::vector<int64_t>& shape, const RunOptions& options) const {
  if (!has_encoder_) throw Error("vae", folder_ + ": the encoder was not loaded");
  const int64_t tf = config_.temporal_factor(), sf = config_.spatial_factor();
  const std::string label = options.input_label.empty() ? "pixels" : options.input_label;
  if (shape.size() != 5 || shape[0] != 1 || shape[1] != 3)
    throw Error("vae", label + ": expected shape [1, 3, F, H, W], got " + shape_text(shape));
  const int64_t F = shape[2], H = shape[3], W = shape[4];
  // The reference encodes frame 0, then chunks of 4 frames, whatever the
  // temporal factor, and drops a shorter last chunk: 1 + 4k frames give its
  // latent (for a factor of 1, 2 or 4; a factor that does not divide 4 cannot
  // downsample a chunk, and the reference fails past one frame).
  if (4 % tf != 0 && F != 1)
    throw Error("vae", label + " " + shape_text(shape) + ": expected 1 frame: the temporal factor is " +
                           std::to_string(tf) +
                           ", and the reference encoder's chunks of 4 frames cannot be downsampled "
                           "by it, got " +
                           std::to_string(F));
  if (F < 1 || (F - 1) % 4 != 0)
    throw Error("vae",
                label + " " + shape_text(shape) + ": expected 1 + 4k frames (1, 5, 9, ...), got " + std::to_string(F));
  if (H < sf || W < sf || H % sf != 0 || W % sf != 0)
    throw Error("vae", label + " " + shape_text(shape) + ": height and width must be positive multiples of " +
                           std::to_string(sf) + ", got " + std::to_string(H) + "x" + std::to_string(W));
  check_finite(pixels, 3 * F * H * W, label + " " + shape_text(shape));
  const int64_t z = config_.z_dim, T = 1 + (F - 1) / tf, h = H / sf, w = W / sf;
  EncodeResult out;
  out.shape = {1, z, T, h, w};
  out.mu.assign(std::size_t(z * T * h * w), 0.0f);
  out.latent.assign(out.mu.size(), 0.0f);
  check_device_arithmetic(options, "encoding");
  FrameTap host_tap;
  const FrameTap* tap = tap_for(options, host_tap);
  const ReleaseOnExit release{options.device};  // declared first: runs after the encoder's frames are gone
  Encoder encoder = encoder_;
  int64_t t_out = 0;
  for (int64_t t = 0; t < F; ++t) {
    check_cancel(options, t_out, T, "encode");
    Frame frame = frame_of(pixels, 3, F, H, W, t);
    if (options.device) frame = upload_frame(*options.device, frame);
    encoder.push(frame, [&](Frame&& device_moments) {
      const Frame moments = device_moments.on_device() ? download_frame(device_moments) : std::move(device_moments);
      for (int64_t c = 0; c < z; ++c)
        for (int64_t p = 0; p < h * w; ++p) {
          const float mu = moments.f32[std::size_t(p * 2 * z + c)];
          const std::size_t index = std::size_t((c * T + t_out) * h * w + p);
          out.mu[index] = mu;
          out.latent[index] = (mu - mean_[std::size_t(c)]) * inv_std_[std::size_t(c)];
        }
      ++t_out;
      if (options.progress) options.progress(t_out, T);
    }, tap);
  }
  if (t_out != T) throw Error("vae", "internal: encoded " + std::to_string(t_out) + " latent frames, expected " + std::to_string(T));
  check_finite(out.mu.data(), int64_t(out.mu.size()), "encoded mean");
  check_finite(out.latent.data(), int64_t(out.latent.size()), "encoded latent");
  return out;
}

EncodeResult WanVae::encode_image(const Image8& rgb, const RunOptions& options) const {
  if (rgb.channels != 3) throw Error("vae", "encode_image: expected an RGB image");
  const std::vector<float> pixels = pixels_from_rgb8(rgb.pixels.data(), rgb.height, rgb.width);
  return encode(pixels.data(), {1, 3, 1, rgb.height, rgb.width}, options);
}

MemoryEstimate WanVae::estimate_decode(int64_t latent_frames, int64_t h, int64_t w, bool collect_output) const {
  MemoryEstimate e;
  e.weights = decoder_weight_bytes_;
  e.histories = decoder_.history_bytes(h, w, latent_frames);
  e.working = decoder_.working_bytes(h, w);
  const int64_t sf = config_.spatial_factor();
  if (collect_output)
    e.output = std::size_t(3 * config_.pixel_frames(latent_frames) * h * sf * w * sf) * sizeof(float);
  return e;
}

MemoryEstimate WanVae::estimate_decode_on_device(int64_t latent_frames, int64_t h, int64_t w) const {
  MemoryEstimate e = estimate_decode(latent_frames, h, w, false);
  e.working += device_scratch_bytes(h * w, config_.decoder_widths().front());
  return e;
}

MemoryEstimate WanVae::estimate_encode_on_device(int64_t frames, int64_t H, int64_t W) const {
  MemoryEstimate e = estimate_encode(frames, H, W);
  const int64_t sf = config_.spatial_factor();
  e.working += device_scratch_bytes((H / sf) * (W / sf), config_.encoder_widths().back());
  return e;
}

MemoryEstimate WanVae::estimate_encode(int64_t frames, int64_t H, int64_t W) const {
  MemoryEstimate e;
  e.weights = encoder_weight_bytes_;
  e.histories = encoder_.history_bytes(H, W);
  e.working = encoder_.working_bytes(H, W);
  const int64_t sf = config_.spatial_factor();
  const int64_t T = 1 + (frames - 1) / config_.temporal_factor();
  e.output = std::size_t(2 * config_.z_dim * T * (H / sf) * (W / sf)) * sizeof(float);
  return e;
}

std::optional<std::size_t> available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return std::size_t(kib) * 1024;
  }
  return std::nullopt;
}

void check_memory(const MemoryEstimate& e, std::size_t limit, const std::string& what) {
  if (e.total() <= limit) return;
  throw Error("vae", what + " needs about " + format_bytes(e.total()) + " (weights " + format_bytes(e.weights) +
                         ", causal histories " + format_bytes(e.histories) + ", frames in flight " +
                         format_bytes(e.working) + (e.output ? ", output " + format_bytes(e.output) : std::string()) +
                         ", other " + format_bytes(e.overhead()) + "), more than the " + format_bytes(limit) + " available");
}

void check_encode_fits(const WanVae& sizes, int64_t frames, int64_t H, int64_t W, VaeDevice* device,
                       std::size_t host_limit, const std::string& what) {
  if (!device) return check_memory(sizes.estimate_encode(frames, H, W), host_limit, what);
  check_memory(sizes.estimate_encode_on_device(frames, H, W), device->memory_free() + device->scratch_bytes(),
               what + " on the GPU");
}

void check_decode_fits(const WanVae& sizes, int64_t latent_frames, int64_t h, int64_t w, bool collect_output,
                       VaeDevice* device, std::size_t host_limit, const std::string& what) {
  if (!device) return check_memory(sizes.estimate_decode(latent_frames, h, w, collect_output), host_limit, what);
  check_memory(sizes.estimate_decode_on_device(latent_frames, h, w), device->memory_free() + device->scratch_bytes(),
               what + " on the GPU");
  if (!collect_output) return;
  MemoryEstimate host;
  host.output = sizes.estimate_decode(latent_frames, h, w, true).output;
  check_memory(host, host_limit, what);
}

Image8 to_image8(const Frame& rgb) {
  Image8 out;
  out.width = int(rgb.w);
  out.height = int(rgb.h);
  out.channels = 3;
  out.pixels.resize(std::size_t(rgb.size()));
  for (std::size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = unit_range_to_u8(rgb.f32[i]);
  return out;
}

std::vector<float> pixels_from_rgb8(const uint8_t* rgb, int64_t height, int64_t width) {
  std::vector<float> out(std::size_t(3 * height * width));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < height * width; ++p)
      out[std::size_t(c * height * width + p)] = float(rgb[p * 3 + c]) / 255.0f * 2.0f - 1.0f;
  return out;
}

}  // namespace stepmix::vae
