// The CUDA backend of a build without CUDA (no toolkit, or STEPMIX_CUDA=OFF):
// the entry points of cuda_device.hpp and cuda_kernels.hpp, each reporting
// that this binary has no CUDA. probe_device() says so as its reason; every
// operation throws Error("cuda", "<function>: built without CUDA ...").
#include <string>

#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {
namespace {

constexpr const char* kWithoutCuda =
    "built without CUDA (configure with the CUDA toolkit installed and STEPMIX_CUDA=AUTO or ON)";

[[noreturn]] void without_cuda(const char* function) {
  throw Error("cuda", std::string(function) + ": " + kWithoutCuda);
}

}  // namespace

bool built_with_cuda() { return false; }
std::string build_info() { return "built without CUDA"; }

DeviceInfo probe_device(int device) {
  DeviceInfo info;
  info.device = device;
  info.reason = kWithoutCuda;
  return info;
}

bool cuda_available(std::string* why_not) {
  if (why_not) *why_not = kWithoutCuda;
  return false;
}

// As the real one: the reason alone, the line the CLI prints.
DeviceInfo require_device(int) { throw Error("cuda", kWithoutCuda); }
MemoryInfo device_memory() { without_cuda("device_memory"); }
void require_device_memory(std::size_t, const std::string&) { without_cuda("require_device_memory"); }
std::size_t allocated_bytes() { return 0; }
std::size_t peak_allocated_bytes() { return 0; }
void reset_peak_allocated_bytes() {}

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  if (bytes) without_cuda("cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::release() noexcept {}
void DeviceBuffer::upload(const void*, std::size_t bytes) {
  if (bytes) without_cuda("DeviceBuffer::upload");
}
void DeviceBuffer::download(void*, std::size_t bytes) const {
  if (bytes) without_cuda("DeviceBuffer::download");
}

Stream::Stream() { without_cuda("cudaStreamCreateWithFlags"); }
Stream::~Stream() = default;
Stream::Stream(Stream&&) noexcept {}
Stream& Stream::operator=(Stream&&) noexcept { return *this; }
void Stream::synchronize() const { without_cuda("cudaStreamSynchronize"); }
void synchronize(StreamHandle, const char* operation) { without_cuda(operation); }
void fill_zero(void*, std::size_t, StreamHandle) { without_cuda("fill_zero"); }
void copy_device(void*, const void*, std::size_t, StreamHandle) { without_cuda("copy_device"); }
void copy_to_device(void*, const void*, std::size_t, StreamHandle) { without_cuda("copy_to_device"); }
void copy_to_host(void*, const void*, std::size_t, StreamHandle) { without_cuda("copy_to_host"); }

StreamTimer::StreamTimer() { without_cuda("cudaEventCreate"); }
StreamTimer::~StreamTimer() = default;
void StreamTimer::start(StreamHandle) { without_cuda("StreamTimer::start"); }
double StreamTimer::stop_ms(StreamHandle) { without_cuda("StreamTimer::stop_ms"); }

void quantize_e4m3_f32(const float*, int64_t, float, uint8_t*, StreamHandle) { without_cuda("quantize_e4m3_f32"); }
void quantize_e4m3_bf16(const uint16_t*, int64_t, float, uint8_t*, StreamHandle) {
  without_cuda("quantize_e4m3_bf16");
}
void dequantize_e4m3_to_bf16(const uint8_t*, int64_t, float, uint16_t*, StreamHandle) {
  without_cuda("dequantize_e4m3_to_bf16");
}

struct GemmRunner::Impl {};
GemmRunner::GemmRunner(std::size_t) { without_cuda("GemmRunner"); }
GemmRunner::~GemmRunner() = default;
GemmRunner::GemmRunner(GemmRunner&&) noexcept = default;
GemmRunner& GemmRunner::operator=(GemmRunner&&) noexcept = default;
std::size_t GemmRunner::cached_plans() const { return 0; }

void gemm_bf16(GemmRunner&, const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, GemmBias, uint16_t*,
               StreamHandle) {
  without_cuda("gemm_bf16");
}
void gemm_w8a8(GemmRunner&, const uint8_t*, const uint8_t*, int64_t, int64_t, int64_t, const float*, const float*,
               GemmBias, uint16_t*, StreamHandle) {
  without_cuda("gemm_w8a8");
}
void gemm_w8a16(GemmRunner&, const uint16_t*, const uint8_t*, float, int64_t, int64_t, int64_t, GemmBias, uint16_t*,
                uint16_t*, StreamHandle) {
  without_cuda("gemm_w8a16");
}

void linear_rows_f32(const float*, const void*, bool, int64_t, int64_t, int64_t, GemmBias, float*, StreamHandle) {
  without_cuda("linear_rows_f32");
}

bool attention_flash_supported(const AttentionProblem&) { return false; }
void attention_flash_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                          StreamHandle, FlashVariant) {
  without_cuda("attention_flash_bf16");
}
void attention_reference_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                              StreamHandle) {
  without_cuda("attention_reference_bf16");
}
bool attention_cudnn_available(std::string* why) {
  if (why) *why = std::string("attention_cudnn_bf16: ") + kWithoutCuda;
  return false;
}
void attention_cudnn_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                          StreamHandle) {
  without_cuda("attention_cudnn_bf16");
}
bool attention_cudnn_preferred(const AttentionProblem&, std::string* why) {
  if (why) *why = std::string("attention_cudnn_bf16: ") + kWithoutCuda;
  return false;
}
AttentionChoice attention_choice() { without_cuda("attention_choice"); }
AttentionEngine attention_engine(const AttentionProblem&) { without_cuda("attention_engine"); }
void attention_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                    StreamHandle) {
  without_cuda("attention_bf16");
}

void rms_norm_to_bf16(const float*, int64_t, int64_t, const float*, float, NormKind, uint16_t*, StreamHandle) {
  without_cuda("rms_norm_to_bf16");
}
void head_norm_rotary_bf16(uint16_t*, int64_t, int64_t, int64_t, const float*, float, NormKind, const float*,
                           const float*, StreamHandle) {
  without_cuda("head_norm_rotary_bf16");
}
void silu_gate_bf16(const uint16_t*, const uint16_t*, int64_t, uint16_t*, StreamHandle) {
  without_cuda("silu_gate_bf16");
}
void silu_f32(float*, int64_t, StreamHandle) { without_cuda("silu_f32"); }
void relu_squared_bf16(uint16_t*, int64_t, StreamHandle) { without_cuda("relu_squared_bf16"); }
void add_bf16_to_f32(float*, const uint16_t*, int64_t, StreamHandle) { without_cuda("add_bf16_to_f32"); }
void add_row_f32(float*, int64_t, int64_t, const float*, StreamHandle) { without_cuda("add_row_f32"); }
void widen_bf16(const uint16_t*, int64_t, float*, StreamHandle) { without_cuda("widen_bf16"); }
void round_to_bf16(const float*, int64_t, uint16_t*, StreamHandle) { without_cuda("round_to_bf16"); }

void timestep_sinusoid(float, float, float*, StreamHandle) { without_cuda("timestep_sinusoid"); }
void cfg_combine(const float*, const float*, int64_t, float, float*, StreamHandle) { without_cuda("cfg_combine"); }
void euler_step(float*, const float*, int64_t, float, StreamHandle) { without_cuda("euler_step"); }
void flag_non_finite_f32(const float*, int64_t, uint32_t*, StreamHandle) { without_cuda("flag_non_finite_f32"); }
void unipc_step_f32(const sched::UniPCStep&, int64_t, float*, const float*, const float*, const float*, float*, float*,
                    StreamHandle) {
  without_cuda("unipc_step_f32");
}
void patchify(const float*, const PatchGrid&, float*, StreamHandle) { without_cuda("patchify"); }
void unpatchify(const float*, const PatchGrid&, const int64_t*, int64_t, float*, StreamHandle) {
  without_cuda("unpatchify");
}

void conv_gather_taps_bf16(const ConvFrames&, const ConvGeometry&, int64_t, int64_t, uint16_t*, StreamHandle) {
  without_cuda("conv_gather_taps_bf16");
}
void conv_epilogue_f32(float*, const float*, const float*, int64_t, int64_t, StreamHandle) {
  without_cuda("conv_epilogue_f32");
}
void channel_rms_norm(const float*, int64_t, int64_t, const float*, float, bool, bool, void*, StreamHandle) {
  without_cuda("channel_rms_norm");
}
void upsample_nearest2(const float*, int64_t, int64_t, int64_t, bool, void*, StreamHandle) {
  without_cuda("upsample_nearest2");
}
void duplicate_up(const float*, int64_t, int64_t, int64_t, int64_t, int, int, int, float*, StreamHandle) {
  without_cuda("duplicate_up");
}
void channel_slice(const float*, int64_t, int64_t, int64_t, int64_t, float*, StreamHandle) {
  without_cuda("channel_slice");
}
void unpatchify_clamped(const float*, int64_t, int64_t, int64_t, int, float*, StreamHandle) {
  without_cuda("unpatchify_clamped");
}
void patchify_pixels(const float*, int64_t, int64_t, int64_t, int, float*, StreamHandle) {
  without_cuda("patchify_pixels");
}
void average_down(const ConvFloatFrames&, int, int64_t, int64_t, int64_t, int64_t, int, float*, StreamHandle) {
  without_cuda("average_down");
}
void split_qkv(const float*, int64_t, int64_t, float*, float*, float*, StreamHandle) { without_cuda("split_qkv"); }
void softmax_rows(float*, int64_t, int64_t, StreamHandle) { without_cuda("softmax_rows"); }
void gemm_bf16_to_f32(GemmRunner&, const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, float*, StreamHandle,
                      int64_t) {
  without_cuda("gemm_bf16_to_f32");
}
void gemm_f32(GemmRunner&, const float*, const float*, int64_t, int64_t, int64_t, float, float*, StreamHandle) {
  without_cuda("gemm_f32");
}

void fill_uniform_f32(float*, int64_t, uint64_t, float, float, StreamHandle) { without_cuda("fill_uniform_f32"); }
void fill_uniform_bf16(uint16_t*, int64_t, uint64_t, float, float, StreamHandle) {
  without_cuda("fill_uniform_bf16");
}
void fill_random_e4m3(uint8_t*, int64_t, uint64_t, StreamHandle) { without_cuda("fill_random_e4m3"); }

}  // namespace stepmix::cuda
