// The outputs of a generation (include/stepmix/model.hpp): declared and
// checked before sampling, decoded by the model's VAE where it has one,
// encoded, staged and committed together; and reading an initial-noise file.
#include <filesystem>

#include "core/non_finite.hpp"
#include "io/output_format.hpp"
#include "io/output_set.hpp"
#include "io/png.hpp"
#include "io/png_metadata.hpp"
#include "io/safetensors.hpp"
#include "pipeline/vae_stage.hpp"
#include "stepmix/model.hpp"

namespace stepmix {
namespace fs = std::filesystem;

namespace {

// [1, C, T, H, W] with C = 1 or 3 → one image, frames side by side.
Image8 latent_to_image(const std::vector<float>& latent, const std::array<int64_t, 4>& shape) {
  const auto [C, T, H, W] = shape;
  // Channel c of frame t at latent[c][t][h][w].
  Image8 img{int(W * T), int(H), C == 3 ? 3 : 1, {}};
  img.pixels.resize(std::size_t(img.width) * img.height * img.channels);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t c = 0; c < img.channels; ++c)
          img.pixels[((h * img.width) + t * W + w) * img.channels + c] =
              unit_range_to_u8(latent[((c * T + t) * H + h) * W + w]);
  return img;
}

// "[1, C, T, H, W]"
std::string latent_string(const std::array<int64_t, 4>& s) { return shape_string({1, s[0], s[1], s[2], s[3]}); }

std::string sampler_name(const std::string& scheduler) {
  if (scheduler.rfind("UniPC", 0) == 0) return "UniPC";
  if (scheduler.rfind("FlowMatchEuler", 0) == 0) return "Euler";
  return scheduler;
}

}  // namespace

struct GenerationOutputs::Impl {
  OutputSet set;
  std::optional<std::string> image, video, frames_dir, latents;
  OutputSet::Id image_id = 0, latents_id = 0;
  vae::DecodeOutputIds decode_ids;  // image, video and frames when the model decodes
  GeneratePlan plan;
  ModelOptions options;
  const VaeStage* vae = nullptr;
};

GenerationOutputs::GenerationOutputs(const Model& model, const GeneratePlan& plan, const OutputRequest& request,
                                     const std::vector<std::string>& inputs)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  for (int64_t d : plan.latent_shape)
    if (d <= 0)
      throw Error("output",
                  "the plan's latent " + latent_string(plan.latent_shape) + " is empty; a plan comes from Model::plan");
  m.plan = plan;
  m.options = model.options();
  for (const std::string& f : model.weight_files()) m.set.add_input("the checkpoint's", f);
  m.set.add_input("--model", model.info().path);
  for (const std::string& f : inputs) m.set.add_input("file", f);
  // What the paths are is checked first (a FIFO or a folder is refused as
  // such), then what their extensions ask for. A character device (/dev/null)
  // takes the option's format whatever its name.
  // Read only under the request's option that sets them.
  const OutputSet::Id out_id = request.out ? m.set.add_file("--out", *request.out) : 0;
  const OutputSet::Id latents_id = request.save_latents ? m.set.add_file("--save-latents", *request.save_latents) : 0;
  m.vae = vae_stage_of(model);
  if (request.frames_dir) {
    if (!m.vae)
      throw Error("output", "--frames-dir " + *request.frames_dir + ": frames are decoded by the model's vae/, and " +
                                model.info().path + " has none");
    m.frames_dir = request.frames_dir;
    m.decode_ids.frames_dir = m.set.add_folder("--frames-dir", *request.frames_dir, false);
  }
  m.set.validate();
  const auto format_of = [](const std::string& path, const char* option, OutputFormat device_format,
                            std::initializer_list<OutputFormat> accepted) {
    std::error_code ec;
    if (fs::is_character_file(path, ec)) return device_format;
    return output_format_for(path, option, accepted);
  };
  if (request.out) {
    const OutputFormat format =
        format_of(*request.out, "--out", plan.image_output ? OutputFormat::Png : OutputFormat::Safetensors,
                  {OutputFormat::Png, OutputFormat::Mp4, OutputFormat::Safetensors});
    if (format == OutputFormat::Mp4) {
      if (!m.vae)
        throw Error("output", "--out " + *request.out + ": video is decoded by the model's vae/, and " +
                                  model.info().path + " has none; write the latent with --out FILE.safetensors");
      m.video = request.out;
      m.decode_ids.video = out_id;
    } else if (format == OutputFormat::Png) {
      if (!plan.image_output)
        throw Error(
            "output",
            "--out " + *request.out + ": this model's latent is not a picture (" +
                std::to_string(plan.latent_shape[0]) +
                " channels, and the model has no vae/ to decode it); write the latent with --out FILE.safetensors");
      m.image = request.out;
      m.image_id = out_id;
      if (m.vae) m.decode_ids.image = out_id;
    } else {
      m.latents = request.out;
      m.latents_id = out_id;
    }
  }
  if (request.save_latents) {
    format_of(*request.save_latents, "--save-latents", OutputFormat::Safetensors, {OutputFormat::Safetensors});
    if (m.latents)
      throw Error("output", "--save-latents " + *request.save_latents + ": --out " + *m.latents +
                                " writes the latent already; give one of them");
    m.latents = request.save_latents;
    m.latents_id = latents_id;
  }
  if (m.vae && (m.image || m.video || m.frames_dir)) m.vae->check_decode_memory(plan.latent_shape, m.image.has_value());
}

GenerationOutputs::~GenerationOutputs() = default;
GenerationOutputs::GenerationOutputs(GenerationOutputs&&) noexcept = default;
GenerationOutputs& GenerationOutputs::operator=(GenerationOutputs&&) noexcept = default;

const std::optional<std::string>& GenerationOutputs::image() const { return impl_->image; }
const std::optional<std::string>& GenerationOutputs::video() const { return impl_->video; }
const std::optional<std::string>& GenerationOutputs::frames_dir() const { return impl_->frames_dir; }
const std::optional<std::string>& GenerationOutputs::latents() const { return impl_->latents; }

void GenerationOutputs::write(const GenerateResult& result, const OutputMetadata& meta,
                              const std::function<void(int64_t, int64_t)>& on_decode) {
  Impl& m = *impl_;
  const auto [C, T, H, W] = result.plan.latent_shape;
  // The outputs were checked (formats, decode memory) for the plan given to
  // the constructor, and every encoder indexes the latent by its shape.
  if (result.plan.latent_shape != m.plan.latent_shape)
    throw Error("output", "the result's latent " + latent_string(result.plan.latent_shape) + " is not the " +
                              latent_string(m.plan.latent_shape) +
                              " these outputs were checked for; nothing was written");
  if (result.latent.size() != std::size_t(C * T * H * W))
    throw Error("output", "the result holds " + std::to_string(result.latent.size()) + " latent values, its latent " +
                              latent_string(result.plan.latent_shape) + " has " + std::to_string(C * T * H * W) +
                              "; nothing was written");
  if (const auto bad = first_non_finite(result.latent.data(), result.latent.size()))
    throw Error("generate", "the final latent holds a non-finite value at element " + std::to_string(*bad) +
                                "; nothing was written");
  vae::DecodeOutputs decode;
  if (m.image) {
    GenerationParameters p;
    p.prompt = meta.prompt;
    p.negative_prompt = meta.negative_prompt;
    p.steps = result.plan.steps;
    p.sampler = sampler_name(result.plan.scheduler);
    p.cfg_scale = result.plan.guidance;
    p.seed = meta.seed;
    // The picture's pixel size: the latent's, or the decoded frames'.
    const int64_t sf = m.vae ? m.vae->sizes().config().spatial_factor() : 1;
    const int64_t frames = m.vae ? m.vae->sizes().config().pixel_frames(T) : T;
    p.width = W * sf * frames;
    p.height = H * sf;
    p.model = fs::path(meta.model).lexically_normal().parent_path().filename().string();
    if (const std::string last = fs::path(meta.model).lexically_normal().filename().string(); !last.empty()) p.model = last;
    StepmixImageInfo info;
    info.trace = trace_string(result.trace);
    info.policy_source = result.plan.policy.source;
    info.activations = std::string(activation_dtype_name(m.options.activations));
    info.extra = {{"reasoner", std::string(precision_json_name(result.reasoner))},
                  {"scheduler", result.plan.scheduler},
                  {"latent_shape", {1, C, T, H, W}},
                  {"model_path", meta.model},
                  {"prompt_ids", result.plan.cond_ids.size()},
                  {"negative_prompt_ids", result.plan.uncond_ids.size()}};
    // The chat-templated texts' lengths, where a template rendered them.
    if (result.plan.cond_rendered_bytes) info.extra["prompt_rendered_bytes"] = *result.plan.cond_rendered_bytes;
    if (result.plan.uncond_rendered_bytes)
      info.extra["negative_prompt_rendered_bytes"] = *result.plan.uncond_rendered_bytes;
    if (m.vae)
      decode.image_text = generation_png_text(p, info);
    else
      m.set.stage_file(m.image_id, encode_png(*m.image, latent_to_image(result.latent, result.plan.latent_shape),
                                              generation_png_text(p, info)));
  }
  if (m.vae && (m.image || m.video || m.frames_dir)) {
    decode.image = m.image;
    decode.video = m.video;
    decode.frames_dir = m.frames_dir;
    decode.fps = result.plan.fps;
    m.vae->decode_and_stage(result.latent, result.plan.latent_shape, decode, m.decode_ids, m.set, on_decode);
  }
  if (m.latents)
    m.set.stage_file(m.latents_id,
                     encode_safetensors(*m.latents, {make_tensor_f32("latent", {1, C, T, H, W}, result.latent)}));
  m.set.commit();
}

std::vector<std::pair<std::string, std::string>> read_png_metadata(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const PngText& t : read_png_text(path)) out.emplace_back(t.keyword, t.text);
  return out;
}

struct TensorsOutput::Impl {
  OutputSet set;
  OutputSet::Id id = 0;
  std::string path;
};

TensorsOutput::TensorsOutput(const std::string& path, const std::vector<std::pair<std::string, std::string>>& inputs)
    : impl_(std::make_unique<Impl>()) {
  for (const auto& [option, input] : inputs) impl_->set.add_input(option, input);
  impl_->id = impl_->set.add_file("--out", path);
  impl_->path = path;
  impl_->set.validate();
  std::error_code ec;
  if (!fs::is_character_file(path, ec)) output_format_for(path, "--out", {OutputFormat::Safetensors});
}

TensorsOutput::~TensorsOutput() = default;

void TensorsOutput::write(const std::vector<NamedTensor>& tensors) {
  std::vector<TensorToWrite> out;
  out.reserve(tensors.size());
  for (const NamedTensor& t : tensors) out.push_back(make_tensor_f32(t.name, t.shape, t.data));
  impl_->set.stage_file(impl_->id, encode_safetensors(impl_->path, out));
  impl_->set.commit();
}

std::string shape_string(const std::vector<int64_t>& shape) { return shape_to_string(shape); }

std::vector<float> read_noise_file(const std::string& path, const std::array<int64_t, 4>& shape) {
  const auto [C, T, H, W] = shape;
  const auto f = SafetensorsFile::open(path);
  const TensorView& noise = f->get("noise");
  if (noise.dtype != DType::F32 || noise.shape != std::vector<int64_t>{1, C, T, H, W})
    throw Error("generate", path + ": tensor 'noise' must be F32 " + shape_to_string({1, C, T, H, W}) + ", got " +
                                std::string(dtype_name(noise.dtype)) + " " + shape_to_string(noise.shape));
  std::vector<float> values(noise.as<float>(), noise.as<float>() + noise.numel());
  if (const auto bad = first_non_finite(values.data(), values.size()))
    throw Error("generate", path + ": tensor 'noise' holds a non-finite value at element " + std::to_string(*bad) +
                                " (expected finite normal samples)");
  return values;
}

}  // namespace stepmix
