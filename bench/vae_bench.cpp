// VAE decode benchmark driver, run by bench/run-vae.sh:
//   bench_vae --vae DIR --latent FILE [--repeats N] [--activations f32|bf16] [--device cpu|cuda] [--pixels OUT.f32]
// Loads the decoder once, decodes the F32 tensor 'latent' N times and prints
// one JSON line: wall-clock ms of each decode and the CPU time it took (all
// threads; on a shared machine the wall clock also counts the neighbours'
// share of the cores, CPU time does not), the multiply-accumulates the
// convolutions executed (taps on zero frames and padding skipped) and what
// the full kernels amount to (what an implementation that multiplies the
// zeros computes), and the peak resident memory of the decodes alone (the
// high-water mark is reset after loading, Linux clear_refs). --pixels writes
// the last decode's [1, 3, F, H, W] float32 values raw, for the peer to
// compare. --device cuda decodes on the GPU (bf16; bench/cuda_vae_check.sh):
// the multiply-accumulates are then not counted (0) and the peak GPU memory
// of the decodes is given instead of the resident memory.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/vae_device.hpp"
#include "io/safetensors.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/kernel_set.hpp"
#include "vae/vae.hpp"

namespace {

std::atomic<double> g_macs{0}, g_full_macs{0}, g_conv_seconds{0};
stepmix::kernels::Conv3dFunction g_inner = nullptr;

void add(std::atomic<double>& a, double v) {
  double old = a.load();
  while (!a.compare_exchange_weak(old, old + v)) {
  }
}

// The active convolution, counting its work.
void counting_conv3d(const stepmix::kernels::Conv3dArgs& args) {
  add(g_macs, stepmix::kernels::conv3d_macs(args));
  const auto& w = *args.weights;
  add(g_full_macs, double(args.frames_out) * double(args.h_out * args.w_out) * double(w.taps()) * double(w.c_in) *
                       double(w.c_out));
  const auto start = std::chrono::steady_clock::now();
  g_inner(args);
  add(g_conv_seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

long status_kib(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double one = -1;
  f >> one;
  return one;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vae_dir, latent_file, pixels_out, activations = "f32", device = "cpu";
  int repeats = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--vae") vae_dir = value;
    else if (key == "--latent") latent_file = value;
    else if (key == "--repeats") repeats = std::atoi(value.c_str());
    else if (key == "--activations") activations = value;
    else if (key == "--pixels") pixels_out = value;
    else if (key == "--device") device = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (vae_dir.empty() || latent_file.empty() || repeats < 1 || (activations != "f32" && activations != "bf16") ||
      (device != "cpu" && device != "cuda")) {
    std::fprintf(stderr,
                 "usage: %s --vae DIR --latent FILE [--repeats N] [--activations f32|bf16] [--device cpu|cuda] "
                 "[--pixels OUT]\n",
                 argv[0]);
    return 2;
  }
  try {
    stepmix::vae::VaeOptions options;
    options.encoder = false;
    options.arithmetic = activations == "bf16" ? stepmix::kernels::GemmArithmetic::BF16 : stepmix::kernels::GemmArithmetic::F32;
    const auto load_start = std::chrono::steady_clock::now();
    const stepmix::vae::WanVae vae = stepmix::vae::WanVae::load(vae_dir, options);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const auto file = stepmix::SafetensorsFile::open(latent_file);
    const stepmix::TensorView& latent = file->get("latent");
    const std::vector<float> values(latent.as<float>(), latent.as<float>() + latent.numel());
    const auto& shape = latent.shape;
    stepmix::vae::RunOptions run;
    if (device == "cuda") run.device = &stepmix::vae_device_for(stepmix::Device::Cuda);
    const stepmix::vae::MemoryEstimate estimate = run.device ? vae.estimate_decode_on_device(shape[2], shape[3], shape[4])
                                                             : vae.estimate_decode(shape[2], shape[3], shape[4], false);

    stepmix::kernels::ConvolutionFamily counting = stepmix::kernels::active_convolution();
    g_inner = counting.conv3d;
    counting.conv3d = counting_conv3d;
    stepmix::kernels::override_convolution(&counting);
    std::ofstream("/proc/self/clear_refs") << "5";  // reset the RSS high-water mark
    const long rss_before = status_kib("VmRSS:");
    stepmix::cuda::reset_peak_allocated_bytes();
    std::vector<double> ms, cpu_ms;
    std::vector<float> pixels;
    double macs = 0, full_macs = 0, conv_ms = 0;
    const double load = load_average();
    for (int r = 0; r < repeats; ++r) {
      g_macs = 0;
      g_full_macs = 0;
      g_conv_seconds = 0;
      std::vector<float> last;
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = process_cpu_seconds();
      int64_t frames = 0, height = 0, width = 0;
      vae.decode(values.data(), shape, [&](int64_t t, const stepmix::vae::Frame& rgb) {
        frames = t + 1;
        height = rgb.h;
        width = rgb.w;
        if (!pixels_out.empty() && r == repeats - 1) last.insert(last.end(), rgb.f32.begin(), rgb.f32.end());
      }, run);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      cpu_ms.push_back(1e3 * (process_cpu_seconds() - cpu_start));
      macs = g_macs;
      full_macs = g_full_macs;
      conv_ms = 1e3 * g_conv_seconds;
      if (!last.empty()) {
        // Channels-last frames -> [1, 3, F, H, W].
        pixels.assign(last.size(), 0.0f);
        for (int64_t t = 0; t < frames; ++t)
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t p = 0; p < height * width; ++p)
              pixels[std::size_t((c * frames + t) * height * width + p)] = last[std::size_t((t * height * width + p) * 3 + c)];
      }
    }
    const long hwm = status_kib("VmHWM:");
    if (!pixels_out.empty())
      std::ofstream(pixels_out, std::ios::binary).write(reinterpret_cast<const char*>(pixels.data()),
                                                        std::streamsize(pixels.size() * sizeof(float)));
    std::printf("{\"shape\": [%lld, %lld, %lld, %lld, %lld], \"activations\": \"%s\", \"device\": \"%s\", "
                "\"kernels\": \"%s\", \"peak_gpu_mib\": %.1f, \"ms\": [",
                (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3], (long long)shape[4],
                activations.c_str(), device.c_str(),
                run.device ? "cuda" : stepmix::kernels::active_kernels().convolution_variant,
                double(stepmix::cuda::peak_allocated_bytes()) / (1 << 20));
    for (std::size_t i = 0; i < ms.size(); ++i) std::printf("%s%.1f", i ? ", " : "", ms[i]);
    std::printf("], \"cpu_ms\": [");
    for (std::size_t i = 0; i < cpu_ms.size(); ++i) std::printf("%s%.1f", i ? ", " : "", cpu_ms[i]);
    std::printf("], \"conv_ms\": %.1f, \"macs\": %.6g, \"full_kernel_macs\": %.6g, \"load_s\": %.1f, \"rss_after_load_mib\": %.1f, "
                "\"peak_rss_during_decode_mib\": %.1f, \"estimate_mib\": %.1f, \"load_average\": %.2f}\n",
                conv_ms, macs, full_macs, load_s, rss_before / 1024.0, hwm / 1024.0, double(estimate.total()) / (1 << 20), load);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_vae: %s\n", e.what());
    return 2;
  }
  return 0;
}
