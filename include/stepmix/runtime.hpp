// How a loaded model runs, independent of what it holds: the activation dtype
// handed to the Linears, the dense-weight cache of FP8 Linears, the device.
#pragma once

#include <string_view>

namespace stepmix {

//  F32:  every activation is float32; Linears run their FP32-activation
//        arithmetic. Matches float32 references bit for bit (the options'
//        default; CPU only: a GPU refuses it, see default_activation_dtype).
//  BF16: the transformer input and every Linear input and output are bf16,
//        as production runtimes run the model (W8A16 with the bf16 weight Ŵ,
//        W8A8 quantizing from bf16). The residual stream, norms, rotary and
//        softmax statistics stay float32.
enum class ActivationDType { F32, BF16 };

// None keeps FP8 weights at 1 byte/parameter and converts them inside the
// GEMM; All keeps a dequantized BF16 copy (2 bytes/parameter more). Results
// are bit-identical across the two.
enum class WeightCache { None, All };

// Where the forward runs. Cuda needs a build with the CUDA backend.
enum class Device { Cpu, Cuda };

// How a W8A16 Linear with bf16 activations rounds its weight
// Ŵ = decode(code) · weight_scale:
//  Single:    bf16(float32(decode(code) · s_w)), one rounding (vLLM-Omni's,
//             the default);
//  Diffusers: bf16(bf16(decode(code)) · bf16(s_w)), the scale rounded to
//             bf16 first, as Diffusers, SGLang and TensorRT-LLM compute it
//             (for bit-parity tests against them).
// With float32 activations both are float32(decode(code) · s_w).
enum class W8A16Rounding { Single, Diffusers };

std::string_view activation_dtype_name(ActivationDType dtype);  // "f32" | "bf16"
std::string_view weight_cache_name(WeightCache cache);          // "none" | "all"
std::string_view device_name(Device device);                    // "cpu" | "cuda"
std::string_view w8a16_rounding_name(W8A16Rounding rounding);   // "single" | "diffusers"

// The activation dtype a run on `device` takes when none is asked for: F32 on
// the CPU (matches float32 references), BF16 on a GPU (the only one it runs;
// an explicit F32 there is refused).
ActivationDType default_activation_dtype(Device device);

// Threads of every parallel loop (the calling thread included), instead of
// STEPMIX_THREADS or the hardware thread count; call before any work.
// Results never depend on it.
void set_thread_count(int threads);

// The inverses; throw stepmix::Error naming `option` and the accepted words.
ActivationDType parse_activation_dtype(std::string_view text, std::string_view option = "--activations");
WeightCache parse_weight_cache(std::string_view text, std::string_view option = "--weight-cache");
Device parse_device(std::string_view text, std::string_view option = "--device");
W8A16Rounding parse_w8a16_rounding(std::string_view text, std::string_view option = "--w8a16-rounding");

}  // namespace stepmix
