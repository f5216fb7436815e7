// `stepmix vae decode` and `stepmix vae encode` (stepmix::vae_decode /
// vae_encode, include/stepmix/tools.hpp):
//   stepmix vae decode --vae DIR --latent IN.safetensors --out OUT.{safetensors,png,mp4} [--frames-dir DIR]
//   stepmix vae encode --vae DIR (--pixels IN.safetensors | --image IN.png) --out OUT.safetensors
// --vae takes a vae folder or a model folder holding vae/.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "options.hpp"
#include "stepmix/tools.hpp"

namespace stepmix::cli {
namespace {

struct VaeCliOptions {
  std::string vae, device = "cpu";
  std::optional<std::string> activations;  // unset: default_activation_dtype(device)
  std::optional<std::string> max_memory;
  VaeDecodeOptions decode;
  VaeEncodeOptions encode;

  VaeRunOptions run(const char* what) const {
    VaeRunOptions r;
    r.vae = vae;
    r.device = parse_device(device);
    r.activations = activation_dtype_option(activations, r.device);
    if (max_memory) r.max_memory = parse_memory_size(*max_memory, "--max-memory");
    // One line on stderr when it is a terminal, rewritten per latent frame.
    if (isatty(STDERR_FILENO))
      r.progress = [what](int64_t done, int64_t total) {
        if (done < total)
          std::fprintf(stderr, "\r%s: latent frame %lld/%lld   ", what, (long long)done, (long long)total);
        else
          std::fprintf(stderr, "\r%60s\r", "");  // the last frame: the line is cleared
      };
    return r;
  }
};

void add_common(CLI::App& cmd, VaeCliOptions& o) {
  cmd.add_option("--vae", o.vae, "vae folder (config.json + *.safetensors) or a model folder with vae/")->required();
  cmd.add_option("--activations", o.activations,
                 "f32 (matches float32 references) or bf16 (bf16 convolution operands, float32 sums). " +
                     std::string(kActivationsDefaultHelp));
  cmd.add_option("--device", o.device, "cpu, or cuda to run on the GPU (bf16 activations)")
      ->default_val("cpu")
      ->envname("STEPMIX_DEVICE");
  cmd.add_option("--max-memory", o.max_memory,
                 "Refuse requests estimated to need more (e.g. 8G, 512M; default: the memory available)");
}

}  // namespace

void add_vae_command(CLI::App& app) {
  CLI::App* vae = app.add_subcommand("vae", "Decode latents to pictures and video, encode pictures to latents (Wan2.2 VAE)");
  vae->require_subcommand(1);
  {
    auto o = std::make_shared<VaeCliOptions>();
    CLI::App* cmd = vae->add_subcommand("decode", "Latent [1, 48, T, h, w] -> pixels [1, 3, 4(T-1)+1, 16h, 16w]");
    add_common(*cmd, *o);
    cmd->add_option("--latent", o->decode.latent, "safetensors file with the F32 tensor 'latent' (normalised, as generated)")
        ->required();
    cmd->add_option("-o,--out", o->decode.out,
                    ".safetensors (tensor 'pixels' F32 [1,3,F,H,W]), .png (an image, or the frames side by side) or .mp4 (H.264)");
    CLI::Option* fps = cmd->add_option("--fps", o->decode.fps, "Frame rate of an .mp4 output")->default_val(24.0);
    cmd->add_option("--frames-dir", o->decode.frames_dir, "Also write every frame as DIR/frame_00000.png, ... (a new folder)");
    cmd->callback([o, fps] {
      const std::string out = o->decode.out.value_or("");
      const bool mp4 = is_video_output(out);
      if (fps->count() > 0 && !mp4)
        throw Error("vae", "--fps sets the frame rate of an .mp4 --out; " +
                               (out.empty() ? std::string("there is none") : out + " is not one") +
                               ", so it would be ignored");
      o->decode.run = o->run("decode");
      vae_decode(o->decode, stdout);
    });
  }
  {
    auto o = std::make_shared<VaeCliOptions>();
    CLI::App* cmd = vae->add_subcommand("encode", "Pixels [1, 3, 1+4k, H, W] or a PNG image -> latent and posterior mean");
    add_common(*cmd, *o);
    CLI::Option* pixels = cmd->add_option("--pixels", o->encode.pixels, "safetensors file with the F32 tensor 'pixels' in [-1, 1]");
    CLI::Option* image =
        cmd->add_option("--image", o->encode.image,
                        "PNG image, width and height multiples of the VAE's spatial factor (16 for Wan2.2)");
    pixels->excludes(image);
    cmd->add_option("-o,--out", o->encode.out, ".safetensors file: tensors 'latent' (normalised) and 'mu' (posterior mean)")
        ->required();
    cmd->callback([o] {
      o->encode.run = o->run("encode");
      vae_encode(o->encode, stdout);
    });
  }
}

}  // namespace stepmix::cli
