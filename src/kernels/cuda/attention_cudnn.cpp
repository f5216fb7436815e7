// cuDNN's fused attention for the bf16 problems of cuda_kernels.hpp, beside
// the flash kernel: cuDNN's SDPA forward operation (one backend operation,
// CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, cuDNN 9.13.1 or newer), planned
// once per problem shape and cached with its workspace.
//
// The layouts are the project's, given to cuDNN as strides: q [S, Hq, D] is
// the tensor [1, Hq, S, D] with strides [S·Hq·D, D, Hq·D, 1] ("BSHD"); k and
// v [S_kv, Hkv, D] likewise with Hkv heads, which cuDNN groups onto the query
// heads as attention_bf16 does (GQA); out as q. The scale 1/sqrt(D) is a
// float32 passed by value. Non-causal only: cuDNN's operation takes its
// causal bounds from 9.21 on, and the causal understanding prefill is
// 300 tokens, which the flash kernel serves.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_cudnn.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/cudnn_library.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {
namespace {

using detail::CudnnLibrary;

constexpr const char* kFunction = "attention_cudnn_bf16";

#if CUDNN_VERSION >= 91301

constexpr std::size_t kMinimumVersion = 91301;
// The first release attention_bf16 prefers cuDNN's attention from
// (attention_cudnn_preferred, cuda_kernels.hpp says why).
constexpr std::size_t kPreferredVersion = 91501;

std::string version_text(std::size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

// "CUDNN_STATUS_...: <cuDNN's last message>".
std::string status_text(const CudnnLibrary& library, cudnnStatus_t status) {
  char detail[1024] = {0};
  library.cudnnGetLastErrorString(detail, sizeof detail);
  return library.cudnnGetErrorString(status) + (detail[0] ? std::string(": ") + detail : std::string());
}

// "attention_cudnn_bf16: cuDNN <operation>: CUDNN_STATUS_...: <message>".
void check(const CudnnLibrary& library, cudnnStatus_t status, const std::string& operation) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error("cuda", std::string(kFunction) + ": cuDNN " + operation + ": " + status_text(library, status));
}

// One backend descriptor, destroyed with the object.
class Descriptor {
 public:
  Descriptor(const CudnnLibrary& library, cudnnBackendDescriptorType_t type, std::string what)
      : library_(&library), what_(std::move(what)) {
    check(library, library.cudnnBackendCreateDescriptor(type, &descriptor_), "create " + what_);
  }
  ~Descriptor() {
    if (descriptor_) library_->cudnnBackendDestroyDescriptor(descriptor_);
  }
  Descriptor(Descriptor&& other) noexcept
      : library_(other.library_), what_(std::move(other.what_)), descriptor_(std::exchange(other.descriptor_, nullptr)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  const cudnnBackendDescriptor_t* address() const { return &descriptor_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values,
           const char* attribute) {
    check(*library_, library_->cudnnBackendSetAttribute(descriptor_, name, type, count, values),
          "set " + what_ + " " + attribute);
  }
  cudnnStatus_t try_finalize() { return library_->cudnnBackendFinalize(descriptor_); }
  void finalize() { check(*library_, try_finalize(), "finalize " + what_); }

 private:
  const CudnnLibrary* library_;
  std::string what_;
  cudnnBackendDescriptor_t descriptor_ = nullptr;
};

enum : int64_t { kQ = 1, kK, kV, kOut, kScale };

// A bf16 tensor [1, heads, rows, D] over the layout [rows, heads, D].
Descriptor rows_heads_tensor(const CudnnLibrary& library, int64_t uid, int64_t rows, int64_t heads, int64_t D,
                             const char* what) {
  Descriptor t(library, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  const cudnnDataType_t type = CUDNN_DATA_BFLOAT16;
  const int64_t dims[4] = {1, heads, rows, D}, strides[4] = {rows * heads * D, D, heads * D, 1};
  const int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "data type");
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "dimensions");
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "strides");
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "unique id");
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "alignment");
  t.finalize();
  return t;
}

// The float32 scale, a one-element tensor passed by value (its variant-pack
// pointer is a host pointer to the value).
Descriptor scale_tensor(const CudnnLibrary& library) {
  Descriptor t(library, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "scale tensor");
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int64_t one = 1, uid = kScale, alignment = 16;
  const bool by_value = true;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "data type");
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 1, &one, "dimensions");
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 1, &one, "strides");
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "unique id");
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "alignment");
  t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "by value");
  t.finalize();
  return t;
}

// The SDPA forward operation of `p`, finalized; its tensors go to `tensors`.
// Needs no handle (nor a GPU): cuDNN checks the descriptors here.
Descriptor sdpa_operation(const CudnnLibrary& library, const AttentionProblem& p, std::vector<Descriptor>& tensors) {
  const int64_t D = p.head_dim;
  tensors.push_back(rows_heads_tensor(library, kQ, p.q_rows, p.q_heads, D, "q tensor"));
  tensors.push_back(rows_heads_tensor(library, kK, p.kv_rows, p.kv_heads, D, "k tensor"));
  tensors.push_back(rows_heads_tensor(library, kV, p.kv_rows, p.kv_heads, D, "v tensor"));
  tensors.push_back(rows_heads_tensor(library, kOut, p.q_rows, p.q_heads, D, "out tensor"));
  tensors.push_back(scale_tensor(library));
  const std::size_t first = tensors.size() - 5;
  Descriptor op(library, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, "SDPA forward operation");
  op.set(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, tensors[first].address(), "q");
  op.set(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, tensors[first + 1].address(), "k");
  op.set(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, tensors[first + 2].address(), "v");
  op.set(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, tensors[first + 3].address(), "o");
  op.set(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, tensors[first + 4].address(),
         "scale");
  op.finalize();
  return op;
}

// The library, if it is new enough for the SDPA operation.
const CudnnLibrary& library_with_sdpa() {
  const CudnnLibrary& library = detail::cudnn();
  const std::size_t version = library.cudnnGetVersion();
  detail::require(version >= kMinimumVersion, kFunction,
                  "cuDNN " + version_text(version) + " (" + library.path +
                      ") has no SDPA forward operation: it needs 9.13.1 or newer");
  return library;
}

// The engine configurations cuDNN's heuristics in `mode` rank for `graph`,
// best first, into `configs`; false with `why` when it gives none.
bool engine_configurations(const CudnnLibrary& library, const Descriptor& graph, cudnnBackendHeurMode_t mode,
                           std::vector<Descriptor>& configs, std::string& why) {
  Descriptor heuristics(library, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, graph.address(),
                 "operation graph");
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "mode");
  if (const cudnnStatus_t status = heuristics.try_finalize(); status != CUDNN_STATUS_SUCCESS) {
    why = status_text(library, status);
    return false;
  }
  int64_t count = 0;
  check(library,
        library.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                         0, &count, nullptr),
        "count engine configurations");
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(library, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration");
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0)
    check(library,
          library.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
          "get engine configurations");
  while (int64_t(configs.size()) > std::max<int64_t>(returned, 0)) configs.pop_back();
  if (configs.empty()) why = "no engine configuration";
  return !configs.empty();
}

// A problem shape's plan, what it was made from, and its workspace. One
// workspace per shape: callers that run one shape on two streams at once
// (stepmix runs one stream per forward) would share it.
struct Plan {
  std::vector<Descriptor> keep;  // the tensors, operation, graph and engine configuration of the plan
  std::unique_ptr<Descriptor> plan;
  DeviceBuffer workspace;
  float scale = 0;
};

// cuDNN's handle (made on the first use, on the current device) and the
// plans made so far, one per problem shape.
class CudnnAttention {
 public:
  // Never destroyed: the handle and descriptors live until the process ends
  // (cuDNN is never closed), as destroying them after CUDA's own teardown
  // would fail.
  static CudnnAttention& instance() {
    static CudnnAttention* attention = new CudnnAttention;
    return *attention;
  }

  void run(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
           StreamHandle stream) {
    std::lock_guard lock(mutex_);
    const CudnnLibrary& library = open();
    const auto key = key_of(p);
    auto found = plans_.find(key);
    if (found == plans_.end()) found = plans_.emplace(key, make_plan(library, p)).first;
    Plan& plan = found->second;
    Descriptor pack(library, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    const int64_t uids[5] = {kQ, kK, kV, kOut, kScale};
    void* pointers[5] = {const_cast<uint16_t*>(q), const_cast<uint16_t*>(k), const_cast<uint16_t*>(v), out,
                         &plan.scale};
    void* workspace = plan.workspace.data();
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids, "unique ids");
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, pointers, "data pointers");
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "workspace");
    pack.finalize();
    check(library, library.cudnnSetStream(handle_, stream), "set stream");
    check(library, library.cudnnBackendExecute(handle_, plan.plan->get(), pack.get()), "execute");
  }

  // attention_cudnn_preferred for a non-causal problem: a library of
  // kPreferredVersion or newer with a handle, and a plan for the shape (made
  // now, kept for run). Why not, when not: a library that cannot serve is
  // remembered for the life of the process, a shape no engine takes per shape.
  bool preferred(const AttentionProblem& p, std::string& why) {
    std::lock_guard lock(mutex_);
    if (!unusable_.empty()) {
      why = unusable_;
      return false;
    }
    const CudnnLibrary* library = nullptr;
    try {
      // The version before the handle: a library too old to be preferred
      // costs no handle (nor the device memory cuDNN's start-up takes).
      library = &library_with_sdpa();
      if (const std::size_t version = library->cudnnGetVersion(); version < kPreferredVersion) {
        why = unusable_ = std::string(kFunction) + ": cuDNN " + version_text(version) + " (" + library->path +
                          ") is older than 9.15.1, from which attention_bf16 prefers it";
        return false;
      }
      if (!handle_) require_device(0);  // the GPU the backend runs on (a Hopper one)
      open();
    } catch (const std::exception& e) {
      why = unusable_ = e.what();
      return false;
    }
    const auto key = key_of(p);
    if (plans_.count(key)) return true;
    if (const auto refused = refused_.find(key); refused != refused_.end()) {
      why = refused->second;
      return false;
    }
    try {
      plans_.emplace(key, make_plan(*library, p));
      return true;
    } catch (const std::exception& e) {
      why = refused_[key] = e.what();
      return false;
    }
  }

  // open() for a caller that does not hold the lock (attention_cudnn_available).
  void open_under_lock() {
    std::lock_guard lock(mutex_);
    open();
  }

  // Opens the library and makes the handle; throws why it cannot. The caller
  // holds mutex_ (the handle is made once).
  const CudnnLibrary& open() {
    const CudnnLibrary& library = library_with_sdpa();
    if (!handle_) check(library, library.cudnnCreate(&handle_), "create handle");
    return library;
  }

 private:
  CudnnAttention() = default;

  Plan make_plan(const CudnnLibrary& library, const AttentionProblem& p) {
    const int64_t D = p.head_dim;
    Plan plan;
    plan.scale = 1.0f / std::sqrt(float(D));
    Descriptor op = sdpa_operation(library, p, plan.keep);
    Descriptor graph(library, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, op.address(), "operations");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_, "handle");
    graph.finalize();

    // cuDNN's heuristics rank the engines, mode A and then the fallback
    // list (as cuDNN's frontend asks); the first whose plan builds wins.
    std::string why;
    for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics A" : "fallback heuristics";
      std::vector<Descriptor> configs;
      if (!engine_configurations(library, graph, mode, configs, why)) {
        why = std::string(mode_name) + ": " + why;
        continue;
      }
      for (Descriptor& config : configs) {
        auto candidate = std::make_unique<Descriptor>(library, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "plan");
        candidate->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, config.address(),
                       "engine configuration");
        const cudnnStatus_t status = candidate->try_finalize();
        if (status != CUDNN_STATUS_SUCCESS) {
          why = std::string(mode_name) + ": no engine of " + std::to_string(configs.size()) +
                " builds a plan (the last: " + status_text(library, status) + ")";
          continue;
        }
        int64_t workspace_bytes = 0, n = 0;
        check(library,
              library.cudnnBackendGetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                               CUDNN_TYPE_INT64, 1, &n, &workspace_bytes),
              "get workspace size");
        plan.workspace = DeviceBuffer(std::size_t(workspace_bytes));
        plan.plan = std::move(candidate);
        plan.keep.push_back(std::move(op));
        plan.keep.push_back(std::move(graph));
        plan.keep.push_back(std::move(config));
        return plan;
      }
    }
    throw Error("cuda", std::string(kFunction) + ": " + std::to_string(p.q_rows) + " x " +
                            std::to_string(p.kv_rows) + " rows, " + std::to_string(p.q_heads) + "/" +
                            std::to_string(p.kv_heads) + " heads of " + std::to_string(D) + ": " + why);
  }

  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;
  static Key key_of(const AttentionProblem& p) {
    return std::make_tuple(p.q_rows, p.kv_rows, p.q_heads, p.kv_heads, p.head_dim);
  }

  std::mutex mutex_;
  cudnnHandle_t handle_ = nullptr;
  std::map<Key, Plan> plans_;
  std::map<Key, std::string> refused_;  // shapes no engine took, and why (preferred)
  std::string unusable_;                // why the library cannot serve attention_bf16 (preferred)
};

#else

// Headers older than the SDPA operation: what attention_cudnn_available says.
std::string headers_too_old() {
  return std::string(kFunction) + ": built against cuDNN " + std::to_string(CUDNN_MAJOR) + "." +
         std::to_string(CUDNN_MINOR) + "'s headers, which have no SDPA forward operation (9.13.1 or newer)";
}

#endif  // CUDNN_VERSION >= 91301

}  // namespace

namespace detail {

void validate_cudnn_attention(const AttentionProblem& p) {
#if CUDNN_VERSION >= 91301
  if (p.q_rows == 0) return;  // as attention_cudnn_bf16: nothing to give cuDNN
  std::vector<Descriptor> tensors;
  sdpa_operation(library_with_sdpa(), p, tensors);
#else
  throw Error("cuda", headers_too_old());
#endif
}

}  // namespace detail

bool attention_cudnn_available(std::string* why) {
#if CUDNN_VERSION >= 91301
  try {
    require_device(0);
    CudnnAttention::instance().open_under_lock();
    return true;
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return false;
  }
#else
  if (why) *why = headers_too_old();
  return false;
#endif
}

bool attention_cudnn_preferred(const AttentionProblem& p, std::string* why) {
  std::string reason = detail::cudnn_attention_shape_refusal(p);
  bool preferred = false;
  if (!reason.empty())
    reason = std::string(kFunction) + ": " + reason;
  else if (p.q_rows <= 0 || p.kv_rows <= 0 || p.q_heads <= 0 || p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0)
    reason = std::string(kFunction) + ": no rows, or heads that do not group";
  else
#if CUDNN_VERSION >= 91301
    preferred = CudnnAttention::instance().preferred(p, reason);
#else
    reason = headers_too_old();
#endif
  if (!preferred && why) *why = reason;
  return preferred;
}

void attention_cudnn_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                          uint16_t* out, StreamHandle stream) {
  detail::check_attention(kFunction, p, q, k, v, out);
  const std::string refusal = detail::cudnn_attention_shape_refusal(p);
  detail::require(refusal.empty(), kFunction, refusal);
  detail::require(detail::aligned(q, 16) && detail::aligned(k, 16) && detail::aligned(v, 16) &&
                      detail::aligned(out, 16),
                  kFunction, "q, k, v and out must be 16-byte aligned");
  if (p.q_rows == 0) return;
#if CUDNN_VERSION >= 91301
  CudnnAttention::instance().run(p, q, k, v, out, stream);
#else
  throw Error("cuda", headers_too_old());
#endif
}

}  // namespace stepmix::cuda
