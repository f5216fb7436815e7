// cuBLASLt on the CPU (include/cublasLt.h): the subset the GEMM engine uses,
// written from cuBLASLt's documentation, not from the engine, so that the
// engine's descriptors are checked against the library's rules:
//
// - D = alpha · scaleA · scaleB · op(A) · op(B) + beta · C, then the epilogue
//   (BIAS: D[i][j] += bias[i], one value per row of D); every matrix
//   column-major with its leading dimension; op(A) is m×k, op(B) k×n and D
//   m×n (m, n from D's layout); the scales only for FP8 operands;
// - compute type CUBLAS_COMPUTE_32F with scale type CUDA_R_32F; operand
//   pairs BF16→BF16/F32, F32→F32, E4M3→BF16/F32; C the layout of D;
// - FP8: A transposed and B not (the "TN" format), every matrix's rows and
//   leading dimension multiples of 16 bytes and its pointer 16-byte aligned;
//   the bias bf16 (other operands: D's type);
// - an attribute set with a size other than its type's is INVALID_VALUE, as
//   the header's value types say;
// - the heuristic answers NOT_SUPPORTED with no algorithm where nothing runs
//   the problem; an algorithm serves only the problem it was found for, and
//   requires the alignments the preference promised (256 bytes unless set),
//   so a pointer less aligned than its plan is refused;
// - every matrix, the bias, the scales and the workspace must be device
//   memory (the emulated device's), which on a GPU would fault.
// Sums are float32 in 8 interleaved partial sums (cuBLASLt's order is its own
// too), then the scales, C, the bias and one rounding to D's type.
#include <cublasLt.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/cuda/cublaslt_library.hpp"

namespace stepmix::cuda::detail {
bool in_device_memory(const void* p, std::size_t bytes);  // device_on_cpu.cpp
}

struct cublasLtContext {
  int live = 1;
};
struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute;
  cudaDataType_t scale_type;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  int32_t bias_type = -1;  // D's type
};
struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct cublasLtMatmulPreferenceOpaque {
  uint64_t max_workspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};  // A, B, C, D
  uint32_t reduction_mask = 0x7;
};

namespace {

using stepmix::cuda::detail::in_device_memory;

thread_local std::string last_reason;

cublasStatus_t fail(cublasStatus_t status, const std::string& why) {
  last_reason = why;
  return status;
}

cublasStatus_t ok() {
  last_reason.clear();
  return CUBLAS_STATUS_SUCCESS;
}

std::size_t element_bytes(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
  }
  return 0;
}

bool is_fp8(cudaDataType_t type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

template <class T>
cublasStatus_t read_attribute(T& into, const void* value, std::size_t bytes, const char* name) {
  if (!value || bytes != sizeof(T))
    return fail(CUBLAS_STATUS_INVALID_VALUE,
                std::string(name) + " takes " + std::to_string(sizeof(T)) + " bytes, given " + std::to_string(bytes));
  std::memcpy(&into, value, sizeof(T));
  return ok();
}

struct Problem {
  int64_t m = 0, n = 0, k = 0;
};

// The documented rules; "" when the problem can run, else the reason (with
// the status in `status`).
std::string check_problem(const cublasLtMatmulDescOpaque& desc, const cublasLtMatrixLayoutOpaque& a,
                          const cublasLtMatrixLayoutOpaque& b, const cublasLtMatrixLayoutOpaque& c,
                          const cublasLtMatrixLayoutOpaque& d, Problem& p, cublasStatus_t& status) {
  status = CUBLAS_STATUS_INVALID_VALUE;
  for (const auto* l : {&a, &b, &c, &d})
    if (l->ld < int64_t(l->rows) || l->rows == 0 || l->cols == 0)
      return "a layout with ld " + std::to_string(l->ld) + " below its " + std::to_string(l->rows) + " rows, or empty";
  p.m = int64_t(d.rows), p.n = int64_t(d.cols);
  const int64_t a_rows = desc.transa == CUBLAS_OP_N ? int64_t(a.rows) : int64_t(a.cols);
  const int64_t a_cols = desc.transa == CUBLAS_OP_N ? int64_t(a.cols) : int64_t(a.rows);
  const int64_t b_rows = desc.transb == CUBLAS_OP_N ? int64_t(b.rows) : int64_t(b.cols);
  const int64_t b_cols = desc.transb == CUBLAS_OP_N ? int64_t(b.cols) : int64_t(b.rows);
  p.k = a_cols;
  if (a_rows != p.m || b_rows != p.k || b_cols != p.n)
    return "op(A) is " + std::to_string(a_rows) + "x" + std::to_string(a_cols) + ", op(B) " + std::to_string(b_rows) +
           "x" + std::to_string(b_cols) + ", D " + std::to_string(p.m) + "x" + std::to_string(p.n) +
           ": not an m×k by k×n product";
  if (c.type != d.type || c.rows != d.rows || c.cols != d.cols) return "C's layout is not D's";
  status = CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc.compute != CUBLAS_COMPUTE_32F || desc.scale_type != CUDA_R_32F)
    return "only CUBLAS_COMPUTE_32F with CUDA_R_32F scales is modelled";
  const bool pair_ok =
      a.type == b.type && ((a.type == CUDA_R_16BF && (d.type == CUDA_R_16BF || d.type == CUDA_R_32F)) ||
                           (a.type == CUDA_R_32F && d.type == CUDA_R_32F) ||
                           (a.type == CUDA_R_8F_E4M3 && (d.type == CUDA_R_16BF || d.type == CUDA_R_32F)));
  if (!pair_ok) return "this pair of operand and output types is not supported";
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT && desc.epilogue != CUBLASLT_EPILOGUE_BIAS)
    return "epilogue " + std::to_string(desc.epilogue) + " is not modelled";
  if (desc.epilogue == CUBLASLT_EPILOGUE_BIAS) {
    // FP8 operands take a bf16 bias (whatever D's type); others D's type.
    const int32_t bias_type = desc.bias_type == -1 ? int32_t(d.type) : desc.bias_type;
    if (is_fp8(a.type) ? bias_type != CUDA_R_16BF : bias_type != int32_t(d.type))
      return "bias type " + std::to_string(bias_type) + " with operand type " + std::to_string(a.type) +
             " and output type " + std::to_string(d.type);
  }
  if (is_fp8(a.type)) {
    if (desc.transa != CUBLAS_OP_T || desc.transb != CUBLAS_OP_N)
      return "FP8 needs A transposed and B not (the TN format)";
    for (const auto* l : {&a, &b, &d}) {
      const uint64_t size = element_bytes(l->type);
      if (l->rows * size % 16 != 0 || uint64_t(l->ld) * size % 16 != 0)
        return "FP8: a matrix's rows (" + std::to_string(l->rows) + ") and leading dimension (" +
               std::to_string(l->ld) + ") must be multiples of 16 bytes";
    }
  }
  return "";
}

// What an algorithm remembers of the problem it was found for.
uint64_t problem_tag(const cublasLtMatmulDescOpaque& desc, const cublasLtMatrixLayoutOpaque& a,
                     const cublasLtMatrixLayoutOpaque& b, const cublasLtMatrixLayoutOpaque& d) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v :
       {uint64_t(desc.transa), uint64_t(desc.transb), uint64_t(desc.epilogue), uint64_t(a.type), uint64_t(a.rows),
        uint64_t(a.cols), uint64_t(a.ld), uint64_t(b.type), uint64_t(b.rows), uint64_t(b.cols), uint64_t(b.ld),
        uint64_t(d.type), uint64_t(d.rows), uint64_t(d.cols), uint64_t(d.ld)})
    h = (h ^ v) * 1099511628211ull;
  return h;
}
constexpr uint64_t kAlgoMark = 0x5354455043504Cull;

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  uint32_t bytes = 256;
  while (bytes > 1 && a % bytes != 0) bytes /= 2;
  return bytes;
}

float element(cudaDataType_t type, const void* base, int64_t index) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(base)[index];
    case CUDA_R_16BF: return stepmix::bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_8F_E4M3: return stepmix::e4m3_to_float(static_cast<const uint8_t*>(base)[index]);
    case CUDA_R_8F_E5M2: break;
  }
  return 0.0f;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "null handle pointer");
  *handle = new cublasLtContext;
  return ok();
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return ok();
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : last_reason.empty() ? "error" : last_reason.c_str();
}
const char* cublasLtOnCpuLastReason() { return last_reason.c_str(); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  if (!desc) return fail(CUBLAS_STATUS_INVALID_VALUE, "null descriptor pointer");
  *desc = new cublasLtMatmulDescOpaque{compute, scale_type};
  return ok();
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return ok();
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* value, std::size_t bytes) {
  if (!desc) return fail(CUBLAS_STATUS_INVALID_VALUE, "null descriptor");
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      int32_t op = 0;
      if (const cublasStatus_t s = read_attribute(op, value, bytes, "TRANSA/TRANSB"); s != CUBLAS_STATUS_SUCCESS)
        return s;
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) return fail(CUBLAS_STATUS_INVALID_VALUE, "operation not N or T");
      (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transa : desc->transb) = op;
      return ok();
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attribute(desc->epilogue, value, bytes, "EPILOGUE");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attribute(desc->bias, value, bytes, "BIAS_POINTER");
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return read_attribute(desc->a_scale, value, bytes, "A_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return read_attribute(desc->b_scale, value, bytes, "B_SCALE_POINTER");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read_attribute(desc->bias_type, value, bytes, "BIAS_DATA_TYPE");
  }
  return fail(CUBLAS_STATUS_INVALID_VALUE, "unknown descriptor attribute");
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!layout || element_bytes(type) == 0) return fail(CUBLAS_STATUS_INVALID_VALUE, "layout pointer or type");
  *layout = new cublasLtMatrixLayoutOpaque{type, rows, cols, ld};
  return ok();
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return ok();
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (!preference) return fail(CUBLAS_STATUS_INVALID_VALUE, "null preference pointer");
  *preference = new cublasLtMatmulPreferenceOpaque;
  return ok();
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return ok();
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute, const void* value,
                                                    std::size_t bytes) {
  if (!preference) return fail(CUBLAS_STATUS_INVALID_VALUE, "null preference");
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attribute(preference->max_workspace, value, bytes, "MAX_WORKSPACE_BYTES");
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return read_attribute(preference->reduction_mask, value, bytes, "REDUCTION_SCHEME_MASK");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return read_attribute(preference->alignment[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], value, bytes,
                            "MIN_ALIGNMENT");
  }
  return fail(CUBLAS_STATUS_INVALID_VALUE, "unknown preference attribute");
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
  if (!handle || !desc || !a || !b || !c || !d || !preference || requested < 1 || !results || !returned)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "a null argument or no result requested");
  *returned = 0;
  Problem p;
  cublasStatus_t status;
  const std::string why = check_problem(*desc, *a, *b, *c, *d, p, status);
  if (!why.empty()) return fail(status, why);
  // FP8 kernels need 16-byte aligned matrices: none if the preference
  // promises less.
  if (is_fp8(a->type))
    for (uint32_t promised : preference->alignment)
      if (promised < 16) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "FP8: a preference promises under 16-byte alignment");
  cublasLtMatmulHeuristicResult_t& r = results[0];
  std::memset(&r, 0, sizeof r);
  r.algo.data[0] = kAlgoMark;
  r.algo.data[1] = problem_tag(*desc, *a, *b, *d);
  for (int i = 0; i < 4; ++i) r.algo.data[2 + i] = preference->alignment[i];
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returned = 1;
  return ok();
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a, const void* B, cublasLtMatrixLayout_t b, const void* beta,
                              const void* C, cublasLtMatrixLayout_t c, void* D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t) {
  if (!handle || !desc || !alpha || !beta || !a || !b || !c || !d || !algo)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "a null argument");
  Problem p;
  cublasStatus_t status;
  if (const std::string why = check_problem(*desc, *a, *b, *c, *d, p, status); !why.empty()) return fail(status, why);
  if (algo->data[0] != kAlgoMark || algo->data[1] != problem_tag(*desc, *a, *b, *d))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "the algorithm was not found for this problem");
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  // Each matrix: device memory, at least as aligned as the plan promised
  // (and 16 bytes for FP8).
  const struct {
    const char* name;
    const void* p;
    const cublasLtMatrixLayoutOpaque* l;
    uint32_t promised;
  } matrices[] = {{"A", A, a, uint32_t(algo->data[2])},
                  {"B", B, b, uint32_t(algo->data[3])},
                  {"C", C, c, uint32_t(algo->data[4])},
                  {"D", D, d, uint32_t(algo->data[5])}};
  for (const auto& m : matrices) {
    if (m.name[0] == 'C' && beta_value == 0.0f && !m.p) continue;
    const std::size_t bytes = ((m.l->cols - 1) * uint64_t(m.l->ld) + m.l->rows) * element_bytes(m.l->type);
    if (!m.p || !in_device_memory(m.p, bytes))
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(m.name) + " is not device memory");
    if (alignment_of(m.p) < m.promised)
      return fail(CUBLAS_STATUS_INVALID_VALUE, std::string(m.name) + " is " + std::to_string(alignment_of(m.p)) +
                                                   "-byte aligned; the algorithm was found for " +
                                                   std::to_string(m.promised));
    if (is_fp8(a->type) && alignment_of(m.p) < 16)
      return fail(CUBLAS_STATUS_NOT_SUPPORTED, std::string("FP8: ") + m.name + " is not 16-byte aligned");
  }
  if (workspace_bytes > 0 && !in_device_memory(workspace, workspace_bytes))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "the workspace is not device memory");
  float scale = alpha_value;
  if (is_fp8(a->type)) {
    float sa = 1.0f, sb = 1.0f;
    for (const auto& [pointer, into] : {std::pair{desc->a_scale, &sa}, std::pair{desc->b_scale, &sb}}) {
      if (!pointer) continue;
      if (!in_device_memory(pointer, 4)) return fail(CUBLAS_STATUS_INVALID_VALUE, "a scale is not device memory");
      *into = *static_cast<const float*>(pointer);
    }
    scale = alpha_value * (sa * sb);
  }
  const bool with_bias = desc->epilogue == CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t bias_type = desc->bias_type == -1 ? d->type : cudaDataType_t(desc->bias_type);
  if (with_bias && (!desc->bias || !in_device_memory(desc->bias, std::size_t(p.m) * element_bytes(bias_type))))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "the bias is not device memory of m values");

  // op(A) rows and op(B) columns, widened once.
  std::vector<float> rows(std::size_t(p.m * p.k)), cols(std::size_t(p.n * p.k));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t q = 0; q < p.k; ++q)
      rows[std::size_t(i * p.k + q)] = element(a->type, A, desc->transa == CUBLAS_OP_N ? i + q * a->ld : q + i * a->ld);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t q = 0; q < p.k; ++q)
      cols[std::size_t(j * p.k + q)] = element(b->type, B, desc->transb == CUBLAS_OP_N ? q + j * b->ld : j + q * b->ld);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      const float* x = &rows[std::size_t(i * p.k)];
      const float* y = &cols[std::size_t(j * p.k)];
      float partial[8] = {};
      int64_t q = 0;
      for (; q + 8 <= p.k; q += 8)
        for (int s = 0; s < 8; ++s) partial[s] += x[q + s] * y[q + s];
      for (; q < p.k; ++q) partial[q % 8] += x[q] * y[q];
      const float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                        ((partial[4] + partial[5]) + (partial[6] + partial[7]));
      float v = sum * scale;
      if (beta_value != 0.0f) v += beta_value * element(c->type, C, i + j * c->ld);
      if (with_bias) v += element(bias_type, desc->bias, i);
      const int64_t at = i + j * d->ld;
      if (d->type == CUDA_R_32F)
        static_cast<float*>(D)[at] = v;
      else
        static_cast<uint16_t*>(D)[at] = stepmix::float_to_bf16_rne(v);
    }
  return ok();
}

// The backend opens cuBLASLt at its first GEMM engine
// (src/kernels/cuda/cublaslt_library.hpp); on the CPU its table holds this
// model of the library.

const stepmix::cuda::detail::CublasLtLibrary& stepmix::cuda::detail::cublaslt() {
  static const CublasLtLibrary library = [] {
    CublasLtLibrary model;
#define STEPMIX_CUBLASLT_BIND(name) model.name = &::name;
    STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_CUBLASLT_BIND)
#undef STEPMIX_CUBLASLT_BIND
    model.path = "the CPU model of cuBLASLt (tests/cuda/on_cpu/cublaslt_on_cpu.cpp)";
    return model;
  }();
  return library;
}
