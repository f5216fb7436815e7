#include "quant/governed.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <string_view>

#include "quant/scale_bounds.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view strip_suffix(std::string_view s, std::string_view suffix) {
  return s.substr(0, s.size() - suffix.size());
}

[[noreturn]] void fail(const TensorStore& store, const std::string& tensor, const std::string& what) {
  throw Error("quant", store.folder() + ": tensor '" + tensor + "' " + what);
}

// One F32 element that is finite, > 0 and within the bounds of
// quant/scale_bounds.hpp. Scales are scalars ([]) or [1]
// (some loaders write [1,1]); anything else is not tensorwise.
float read_scale(const TensorStore& store, const std::string& module, const char* suffix) {
  const std::string name = module + suffix;
  const TensorView* t = store.find(name);
  if (!t) fail(store, module + ".weight", std::string("is F8_E4M3 but '") + name + "' is missing (expected " +
                                             module + ".weight_scale and " + module + ".input_scale)");
  if (t->dtype != DType::F32) fail(store, name, "must be F32, got " + std::string(dtype_name(t->dtype)));
  if (t->numel() != 1)
    fail(store, name, "must hold exactly one element (tensorwise scale), got shape " + shape_to_string(t->shape));
  float v;
  std::memcpy(&v, t->data, sizeof v);
  if (const auto problem = fp8_scale_problem(v)) fail(store, name, *problem);
  return v;
}

constexpr std::array<std::string_view, 4> kForeignScaleSuffixes = {".pre_quant_scale", ".weight_scale_2",
                                                                   ".input_scale_2", ".alpha"};

}  // namespace

bool is_foreign_scale_name(std::string_view name) {
  for (std::string_view suffix : kForeignScaleSuffixes)
    if (ends_with(name, suffix)) return true;
  return false;
}

GovernedDiscovery discover_governed_linears(const TensorStore& store) {
  GovernedDiscovery out;
  for (const std::string& name : store.names()) {
    const TensorView& t = store.get(name);
    if (name.find("_quantizer._amax") != std::string::npos)
      fail(store, name, "uses ModelOpt quantizer-state naming, which stepmix does not read (expected "
                        "<module>.weight_scale and <module>.input_scale)");
    if (is_foreign_scale_name(name))
      fail(store, name, "is not part of a tensorwise FP8 Linear (SmoothQuant / NVFP4 scales are not supported)");
    if (ends_with(name, ".weight_scale") || ends_with(name, ".input_scale")) {
      const std::string module(strip_suffix(name, ends_with(name, ".weight_scale") ? ".weight_scale" : ".input_scale"));
      const TensorView* w = store.find(module + ".weight");
      if (!w || w->dtype != DType::F8_E4M3) fail(store, name, "is a scale without an F8_E4M3 '" + module + ".weight'");
      continue;  // validated with its weight
    }
    if (t.dtype == DType::F8_E5M2) fail(store, name, "is F8_E5M2; stepmix runs E4M3 (F8_E4M3) FP8 checkpoints only");
    if (!ends_with(name, ".weight")) {
      if (t.dtype == DType::F8_E4M3) fail(store, name, "is F8_E4M3 but not a Linear weight");
      if (t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32) out.kept_16bit.push_back(name);
      continue;
    }
    const std::string module(strip_suffix(name, ".weight"));
    const auto tower = governed_tower(module);
    if (t.dtype == DType::F8_E4M3) {
      if (!tower)
        fail(store, name, "is F8_E4M3 on a module stepmix keeps in 16-bit (only the per-layer attention and MLP "
                          "projections are governed)");
      if (t.rank() != 2) fail(store, name, "must be 2-D [out, in], got shape " + shape_to_string(t.shape));
      GovernedLinear g{module, *tower, true, &t, read_scale(store, module, ".weight_scale"),
                       read_scale(store, module, ".input_scale")};
      (*tower == Tower::Generation ? out.counts.generation_fp8 : out.counts.reasoner_fp8)++;
      out.linears.push_back(g);
    } else if (tower) {
      if (t.rank() != 2) fail(store, name, "must be 2-D [out, in], got shape " + shape_to_string(t.shape));
      (*tower == Tower::Generation ? out.counts.generation_dense : out.counts.reasoner_dense)++;
      out.linears.push_back(GovernedLinear{module, *tower, false, &t, 0, 0});
    } else if (t.dtype == DType::BF16 || t.dtype == DType::F16 || t.dtype == DType::F32) {
      out.kept_16bit.push_back(name);
    }
  }
  return out;
}

}  // namespace stepmix
