// The video VAE of a Cosmos3 checkpoint (vae/: Diffusers AutoencoderKLWan,
// Wan2.2 configuration), with the latent (de)normalisation the pipeline
// applies around it:
//   decode: z = latent / inv_std + mean  ->  pixels [1, 3, 4(T−1)+1, 16h, 16w] in [-1, 1]
//   encode: pixels [1, 3, 1+4k, H, W] -> posterior mean μ -> latent = (μ − mean) · inv_std
// with inv_std = float32(1 / latents_std) per channel (the pipeline divides by
// that reciprocal rather than multiplying by the std; the two differ in the
// last bit).
//
// Both directions run frame by frame through the causal histories
// (vae/decoder.hpp, vae/encoder.hpp): memory is the weights, the histories
// and one latent frame's activations, independent of the clip length. Pixel
// frames are handed to a sink as they are made, so a long video can go
// straight to an encoder (io/video.hpp) without ever being held whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/png.hpp"
#include "kernels/linear_kernels.hpp"
#include "vae/config.hpp"
#include "vae/decoder.hpp"
#include "vae/encoder.hpp"
#include "vae/layers.hpp"

namespace stepmix::vae {

struct VaeOptions {
  // F32 (default; matches the float32 references) or BF16: every convolution
  // on bf16 weights and bf16 inputs with float32 sums (docs/vae.md states its
  // measured error); norms, attention and the residual stream stay float32.
  kernels::GemmArithmetic arithmetic = kernels::GemmArithmetic::F32;
  // Which halves to read and pack. A half left out is still checked (names,
  // shapes, dtypes) and sized, so a WanVae loaded with neither costs only
  // the headers and answers estimate_decode / estimate_encode before a run.
  bool decoder = true;
  bool encoder = true;
};

struct MemoryEstimate {
  std::size_t weights = 0;   // packed weights of the half that runs
  std::size_t histories = 0; // causal histories (constant from the third latent frame on)
  std::size_t working = 0;   // frames in flight while one latent frame is processed
  std::size_t output = 0;    // a collected output tensor, when the caller collects one
  // What the counts above leave out (allocator slack, thread stacks, the
  // process itself): 5% of the frames plus 64 MiB.
  std::size_t overhead() const { return (histories + working + output) / 20 + (std::size_t(64) << 20); }
  std::size_t total() const { return weights + histories + working + output + overhead(); }
};

struct RunOptions {
  // After each latent frame: (done, total).
  std::function<void(int64_t done, int64_t total)> progress;
  // Checked before each latent frame; when true the run throws
  // stepmix::Error("vae", "... cancelled ...").
  const std::atomic<bool>* cancel = nullptr;
  // Every named module output, frame by frame (tests).
  const FrameTap* tap = nullptr;
  // What the input is called in error messages, e.g. "in.safetensors: tensor
  // 'latent'"; empty: "latent" / "pixels".
  std::string input_label;
  // Run on this device (backend/vae_device.hpp; BF16 arithmetic): each
  // input frame uploaded, each output frame (pixels, moments) brought back
  // to the host; null: in host memory.
  VaeDevice* device = nullptr;
};

// One decoded pixel frame: index in the clip, [H][W][3] RGB in [-1, 1].
using PixelSink = std::function<void(int64_t frame, const Frame& rgb)>;

struct EncodeResult {
  std::vector<int64_t> shape;  // [1, z_dim, T, h, w]
  std::vector<float> mu;       // posterior mean
  std::vector<float> latent;   // normalised: (mu − mean) · inv_std
};

class WanVae {
 public:
  // `path`: a vae folder (config.json + *.safetensors, sharded or not) or a
  // model folder holding vae/.
  static WanVae load(const std::string& path, const VaeOptions& options = {});

  const VaeConfig& config() const { return config_; }
  const std::string& folder() const { return folder_; }
  kernels::GemmArithmetic arithmetic() const { return arithmetic_; }
  // mean and float32(1 / std), per latent channel.
  const std::vector<float>& latents_mean() const { return mean_; }
  const std::vector<float>& latents_inv_std() const { return inv_std_; }

  // latent: normalised [1, z_dim, T, h, w] (row-major, the transformer's
  // layout). Pixel frames go to `sink` in order; throws on a wrong shape or a
  // non-finite value (input or output).
  void decode(const float* latent, const std::vector<int64_t>& shape, const PixelSink& sink,
              const RunOptions& options = {}) const;
  // The whole clip as [1, 3, F, H, W] float32 (F = 4(T−1)+1, H = 16h, W = 16w).
  std::vector<float> decode_to_tensor(const float* latent, const std::vector<int64_t>& shape,
                                      const RunOptions& options = {}) const;
  // pixels [1, 3, F, H, W] in [-1, 1], F = 1 + 4k, H and W multiples of the
  // spatial factor (16 for Wan2.2).
  EncodeResult encode(const float* pixels, const std::vector<int64_t>& shape, const RunOptions& options = {}) const;
  // One 8-bit RGB image (width and height multiples of the spatial factor) as a one-frame
  // clip: latent frame 0 of any clip starting with this image (causality:
  // latent frame 0 depends on pixel frame 0 alone), for image-to-video.
  EncodeResult encode_image(const Image8& rgb, const RunOptions& options = {}) const;

  // Memory a request needs (weights of the half that runs, histories,
  // frames in flight); `collect_output` counts a whole output tensor
  // (decode_to_tensor), otherwise frames are streamed.
  MemoryEstimate estimate_decode(int64_t latent_frames, int64_t h, int64_t w, bool collect_output) const;
  MemoryEstimate estimate_encode(int64_t frames, int64_t H, int64_t W) const;
  // Device memory of a decode on a VAE device (RunOptions::device): the
  // same weights, histories and frames in flight, plus the device's
  // bounded scratch (backend/vae_device.hpp).
  MemoryEstimate estimate_decode_on_device(int64_t latent_frames, int64_t h, int64_t w) const;
  MemoryEstimate estimate_encode_on_device(int64_t frames, int64_t H, int64_t W) const;

 private:
  // Throws when `options` name a device and the arithmetic is not BF16.
  void check_device_arithmetic(const RunOptions& options, const char* what) const;
  // The tap the halves get: options.tap, or on a device one handing it host
  // copies (held by `host_tap`).
  static const FrameTap* tap_for(const RunOptions& options, FrameTap& host_tap);

  VaeConfig config_;
  std::string folder_;
  kernels::GemmArithmetic arithmetic_ = kernels::GemmArithmetic::F32;
  std::vector<float> mean_, inv_std_;
  // Both halves always exist; a half not loaded carries sizes, no weights.
  Decoder decoder_;
  Encoder encoder_;
  bool has_decoder_ = false, has_encoder_ = false;
  std::size_t decoder_weight_bytes_ = 0, encoder_weight_bytes_ = 0;
};

// The vae folder `path` names: path/vae when it holds config.json, else `path`
// itself when it does. Throws naming what is missing.
std::string find_vae_folder(const std::string& path);

// Bytes the system can still give this process (MemAvailable of
// /proc/meminfo); nullopt where that is not known.
std::optional<std::size_t> available_memory_bytes();

// Throws stepmix::Error("vae", "<what> needs about X GiB (weights ..., causal
// histories ..., frames in flight ..., other ...), more than the Y GiB available")
// when estimate.total() > limit.
void check_memory(const MemoryEstimate& estimate, std::size_t limit, const std::string& what);

// The up-front check of a decode of `latent_frames` frames of h × w:
// without a device, the whole estimate (a collected output included)
// against `host_limit`; on a device, the decoder's estimate on it against
// its free memory (plus the scratch it holds already) and a collected output
// against `host_limit`. `what` begins the message.
void check_decode_fits(const WanVae& sizes, int64_t latent_frames, int64_t h, int64_t w, bool collect_output,
                       VaeDevice* device, std::size_t host_limit, const std::string& what);
// The same for an encode of `frames` pixel frames of H × W.
void check_encode_fits(const WanVae& sizes, int64_t frames, int64_t H, int64_t W, VaeDevice* device,
                       std::size_t host_limit, const std::string& what);

// RGB pixels [H][W][3] 8-bit -> the encoder's [1, 3, 1, H, W] in [-1, 1]: v / 255 · 2 − 1.
std::vector<float> pixels_from_rgb8(const uint8_t* rgb, int64_t height, int64_t width);
// A decoded pixel frame [H][W][3] in [-1, 1] as 8-bit RGB, mapped as the
// pipeline does: clamp(x/2 + 0.5, 0, 1) · 255, rounded.
Image8 to_image8(const Frame& rgb);

}  // namespace stepmix::vae
