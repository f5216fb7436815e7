#include "sched/config.hpp"

#include <cmath>
#include <set>

#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {

std::string flow_shift_range_text() {
  // Appended rather than "[" + std::string&&: GCC 12 warns (-Wrestrict) on that inlined insert.
  std::string text = "[";
  text += Error::number(kMinFlowShift);
  text += ", ";
  text += Error::number(kMaxFlowShift);
  return text + "]";
}

namespace {

using nlohmann::json;

// Reads fields of one JSON object, remembering which were consumed so that
// unknown fields can be rejected at the end. Absent fields take the given
// Diffusers default, and messages say so.
class FieldReader {
 public:
  FieldReader(const json& object, const std::string& source) : obj_(object), source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& expected, const std::string& got) const {
    throw Error("scheduler", source_ + ": " + field + ": expected " + expected + ", got " + got);
  }

  // The value of `key`, or `fallback` (the Diffusers default) when absent.
  json value(const std::string& key, const json& fallback) {
    seen_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? fallback : *it;
  }
  bool present(const std::string& key) const { return obj_.contains(key); }

  // `got` text: the JSON value, marked when it came from the default.
  std::string describe(const std::string& key, const json& v) const {
    return v.dump() + (present(key) ? "" : " (Diffusers default; field absent)");
  }

  bool boolean(const std::string& key, bool fallback) {
    const json v = value(key, fallback);
    if (!v.is_boolean()) fail(key, "true or false", describe(key, v));
    return v.get<bool>();
  }
  // Fields whose other value would change the math to an unsupported path.
  void require_bool(const std::string& key, bool fallback, bool required, const std::string& why = "") {
    if (boolean(key, fallback) != required)
      fail(key, std::string(required ? "true" : "false") + why, describe(key, value(key, fallback)));
  }
  double number(const std::string& key, double fallback) {
    const json v = value(key, fallback);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "a finite number", describe(key, v));
    return v.get<double>();
  }
  double positive_number(const std::string& key, double fallback) {
    const double x = number(key, fallback);
    if (!(x > 0)) fail(key, "a positive number", describe(key, value(key, fallback)));
    return x;
  }
  // A sigma shift: beyond these bounds the shifted sigmas leave the range
  // where the solvers' logarithms and ratios stay finite.
  double shift(const std::string& key) {
    const double x = positive_number(key, 1.0);
    if (!(x >= kMinFlowShift && x <= kMaxFlowShift))
      fail(key, "a positive number in " + flow_shift_range_text(), describe(key, value(key, 1.0)));
    return x;
  }
  std::optional<double> optional_number(const std::string& key) {
    const json v = value(key, nullptr);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "null or a finite number", describe(key, v));
    return v.get<double>();
  }
  // An integer in [lo, hi]; anything else is reported as written (a
  // 20-digit number is not wrapped into a negative one).
  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi,
                       const std::string& expected) {
    const json v = value(key, fallback);
    const auto n = json_integer_in(v, lo, hi);
    if (!n) fail(key, expected, describe(key, v));
    return *n;
  }
  std::string string_in(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed,
                        const std::string& why = "") {
    const json v = value(key, fallback);
    if (v.is_string()) {
      for (const auto& a : allowed)
        if (v.get<std::string>() == a) return a;
    }
    std::string expected;
    for (std::size_t i = 0; i < allowed.size(); ++i)
      expected += (i == 0 ? "" : (i + 1 == allowed.size() ? " or " : ", ")) + json(allowed[i]).dump();
    fail(key, expected + why, describe(key, v));
  }
  void require_null(const std::string& key, const std::string& why) {
    const json v = value(key, nullptr);
    if (!v.is_null()) fail(key, "null" + why, describe(key, v));
  }
  // Fields that have no effect on the supported path: only their type is checked.
  void unused(const std::string& key, bool (json::*is_type)() const noexcept, const std::string& type) {
    const json v = value(key, nullptr);
    if (!v.is_null() && !(v.*is_type)()) fail(key, type, describe(key, v));
  }

  // Rejects fields nobody consumed ("_"-prefixed metadata is allowed).
  void reject_unknown() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (it.key().rfind('_', 0) == 0 || seen_.count(it.key())) continue;
      fail(it.key(), "no such field (unknown to stepmix; refusing to guess its effect)", it.value().dump());
    }
  }

 private:
  const json& obj_;
  const std::string& source_;
  std::set<std::string> seen_;
};

int train_timesteps(FieldReader& r) {
  // One training timestep makes every sigma 1: the solvers divide by zero.
  return int(r.integer("num_train_timesteps", 1000, 2, 1000000, "a positive integer in [2, 1000000]"));
}

void parse_unipc(FieldReader& r, SchedulerConfig& cfg) {
  UniPCOptions& o = cfg.unipc;
  o.num_train_timesteps = train_timesteps(r);
  r.string_in("prediction_type", "epsilon", {"flow_prediction"}, " (the model predicts a velocity)");
  r.require_bool("use_flow_sigmas", false, true);
  r.require_bool("predict_x0", true, true);
  r.require_bool("thresholding", false, false);
  r.require_bool("use_dynamic_shifting", false, false);
  r.require_bool("use_exponential_sigmas", false, false);
  r.require_bool("use_beta_sigmas", false, false);
  r.require_null("shift_terminal", "");
  r.require_null("solver_p", "");
  // Diffusers' constructor runs these three names as bh2.
  const std::string solver_type =
      r.string_in("solver_type", "bh2", {"bh2", "midpoint", "heun", "logrho"}, " (bh1 is not implemented)");
  if (solver_type != "bh2")
    cfg.notes.push_back(cfg.source + ": solver_type \"" + solver_type + "\" runs as bh2, as Diffusers runs it");
  r.string_in("final_sigmas_type", "zero", {"zero"});
  o.solver_order = int(r.integer("solver_order", 2, 1, 2, "1 or 2"));
  // Order 1 is the same either way; an order-2 final step would divide by zero.
  if (o.solver_order == 2)
    r.require_bool("lower_order_final", true, true, " (with final sigma 0 the last order-2 step divides by zero)");
  else
    r.boolean("lower_order_final", true);
  {
    // A list (null makes Diffusers' first corrector step fail).
    const json v = r.value("disable_corrector", json::array());
    bool integers = v.is_array();
    for (const json& e : integers ? v : json::array()) {
      const auto k = json_integer_in(e, INT64_MIN, INT64_MAX);
      if (!k) {
        integers = false;
        break;
      }
      o.disable_corrector.push_back(*k);
    }
    if (!integers) r.fail("disable_corrector", "a list of step indices", r.describe("disable_corrector", v));
  }
  o.flow_shift = r.shift("flow_shift");
  o.use_karras_sigmas = r.boolean("use_karras_sigmas", false);
  const std::optional<double> sigma_min = r.optional_number("sigma_min");
  const std::optional<double> sigma_max = r.optional_number("sigma_max");
  // Kept even when unused, so that a use_karras_sigmas override can use them.
  if (sigma_min && sigma_max) {
    o.sigma_min = *sigma_min;
    o.sigma_max = *sigma_max;
  }
  // use_karras_sigmas is checked once overrides are applied (apply_overrides):
  // the Cosmos3 pipeline turns it off, so a file asking for it with a shift
  // and without sigma_min/sigma_max still runs as the reference does.
  // No effect with flow sigmas: VP beta tables, spacing (timesteps are
  // overwritten), thresholding parameters, dynamic-shift type.
  r.unused("beta_start", &json::is_number, "a number");
  r.unused("beta_end", &json::is_number, "a number");
  // Diffusers' constructor names the schedule unless a table is given.
  if (const json t = r.value("trained_betas", nullptr);
      !t.is_null() && !(t.is_array() && std::all_of(t.begin(), t.end(), [](const json& b) { return b.is_number(); })))
    r.fail("trained_betas", "null or a list of numbers", r.describe("trained_betas", t));
  if (r.value("trained_betas", nullptr).is_null())
    r.string_in("beta_schedule", "linear", {"linear", "scaled_linear", "squaredcos_cap_v2"});
  else
    r.unused("beta_schedule", &json::is_string, "a string");
  r.unused("rescale_betas_zero_snr", &json::is_boolean, "true or false");
  r.unused("dynamic_thresholding_ratio", &json::is_number, "a number");
  r.unused("sample_max_value", &json::is_number, "a number");
  r.unused("steps_offset", &json::is_number_integer, "an integer");
  r.string_in("timestep_spacing", "linspace", {"linspace", "leading", "trailing"});
  r.string_in("time_shift_type", "exponential", {"exponential", "linear"});
}

void parse_flow_match(FieldReader& r, SchedulerConfig& cfg) {
  FlowMatchEulerOptions& o = cfg.flow_match;
  o.num_train_timesteps = train_timesteps(r);
  o.shift = r.shift("shift");
  o.stochastic_sampling = r.boolean("stochastic_sampling", false);
  r.require_bool("use_dynamic_shifting", false, false);
  r.require_bool("invert_sigmas", false, false);
  o.use_karras_sigmas = r.boolean("use_karras_sigmas", false);
  r.require_bool("use_exponential_sigmas", false, false);
  r.require_bool("use_beta_sigmas", false, false);
  r.require_null("shift_terminal", "");
  // Parameters of dynamic shifting, which is off.
  r.unused("base_shift", &json::is_number, "a number");
  r.unused("max_shift", &json::is_number, "a number");
  r.unused("base_image_seq_len", &json::is_number_integer, "an integer");
  r.unused("max_image_seq_len", &json::is_number_integer, "an integer");
  r.string_in("time_shift_type", "exponential", {"exponential", "linear"});

  // Distilled builds (non-standard keys): a fixed sigma list.
  const bool requires_explicit = r.boolean("fixed_step_requires_explicit_sigmas", false);
  const json fixed = r.value("fixed_step_sampler_config", nullptr);
  if (fixed.is_null()) {
    if (requires_explicit)
      r.fail("fixed_step_sampler_config", "an object with t_list when fixed_step_requires_explicit_sigmas is true",
             "null");
    return;
  }
  if (!fixed.is_object()) r.fail("fixed_step_sampler_config", "an object", fixed.dump());
  for (auto it = fixed.begin(); it != fixed.end(); ++it)
    if (it.key() != "sample_type" && it.key() != "t_list")
      r.fail("fixed_step_sampler_config." + it.key(), "no such field (known: sample_type, t_list)",
             it.value().dump());
  const json type = fixed.value("sample_type", json(nullptr));
  // Only the stochastic ("sde") fixed-step sampler is defined (docs/schedulers.md).
  if (type != json("sde"))
    r.fail("fixed_step_sampler_config.sample_type", "\"sde\"", type.dump());
  if (!o.stochastic_sampling)
    r.fail("stochastic_sampling", "true when fixed_step_sampler_config.sample_type is \"sde\"", "false");
  const json list = fixed.value("t_list", json(nullptr));
  std::vector<double> sigmas;
  bool ok = list.is_array() && !list.empty();
  for (const json& v : ok ? list : json::array()) {
    if (!v.is_number()) {
      ok = false;
      break;
    }
    const double s = v.get<double>();
    if (!(s > 0 && s <= 1) || (!sigmas.empty() && !(s < sigmas.back()))) ok = false;
    sigmas.push_back(s);
  }
  if (!ok)
    r.fail("fixed_step_sampler_config.t_list", "a non-empty, strictly decreasing list of numbers in (0, 1]",
           list.dump());
  if (requires_explicit) {
    o.explicit_sigmas = sigmas;
  } else {
    cfg.notes.push_back(cfg.source +
                        ": fixed_step_sampler_config.t_list is not used (fixed_step_requires_explicit_sigmas is "
                        "false)");
  }
}

}  // namespace

double shift_of(const SchedulerConfig& config) {
  return config.kind == SchedulerKind::unipc_multistep ? config.unipc.flow_shift : config.flow_match.shift;
}

std::string_view scheduler_kind_name(SchedulerKind kind) {
  switch (kind) {
    case SchedulerKind::unipc_multistep: return "UniPCMultistepScheduler";
    case SchedulerKind::flow_match_euler: return "FlowMatchEulerDiscreteScheduler";
  }
  return "?";
}

std::optional<SchedulerKind> scheduler_kind_from_name(std::string_view class_name) {
  for (SchedulerKind k : {SchedulerKind::unipc_multistep, SchedulerKind::flow_match_euler})
    if (scheduler_kind_name(k) == class_name) return k;
  return std::nullopt;
}

SchedulerConfig parse_scheduler_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error("scheduler", source + ": expected a JSON object, got " + std::string(j.type_name()));
  SchedulerConfig cfg;
  cfg.source = source;
  FieldReader r(j, source);
  const json cls = r.value("_class_name", nullptr);
  std::optional<SchedulerKind> kind;
  if (cls.is_string()) kind = scheduler_kind_from_name(cls.get<std::string>());
  if (!kind) r.fail("_class_name", "\"UniPCMultistepScheduler\" or \"FlowMatchEulerDiscreteScheduler\"", cls.dump());
  cfg.kind = *kind;
  if (cfg.kind == SchedulerKind::unipc_multistep)
    parse_unipc(r, cfg);
  else
    parse_flow_match(r, cfg);
  r.reject_unknown();
  return cfg;
}

SchedulerConfig load_scheduler_config(const std::string& path) {
  // Size and nesting limits, duplicate keys refused, every parser exception
  // (out_of_range for 1e400 included) a stepmix::Error naming the file.
  return parse_scheduler_config(parse_json_text(read_small_file(path, "scheduler"), path, "scheduler"), path);
}

namespace {

// Karras flow sigmas need their bounds, and the reference ignores flow_shift
// on that grid: a shift that would silently do nothing is a request stepmix
// cannot honour. Checked once overrides are applied (the Cosmos3 pipeline
// turns Karras off) and again when a scheduler is made.
void check_karras_grid(const SchedulerConfig& cfg) {
  if (cfg.kind != SchedulerKind::unipc_multistep || !cfg.unipc.use_karras_sigmas) return;
  if (cfg.unipc.native_flow_grid)
    throw Error("scheduler", cfg.source + ": use_native_flow_schedule with Karras sigmas: expected use_karras_sigmas "
                                          "false (the native grid is a flow grid)");
  if (!(cfg.unipc.sigma_min > 0) || !(cfg.unipc.sigma_max > cfg.unipc.sigma_min))
    throw Error("scheduler", cfg.source + ": sigma_min, sigma_max: expected 0 < sigma_min < sigma_max when "
                                          "use_karras_sigmas is true, got " +
                                 std::to_string(cfg.unipc.sigma_min) + ", " + std::to_string(cfg.unipc.sigma_max));
  if (cfg.unipc.flow_shift != 1.0)
    throw Error("scheduler", "flow_shift " + std::to_string(cfg.unipc.flow_shift) + " with Karras sigmas (" +
                                 cfg.source +
                                 "): the reference ignores flow_shift on the Karras grid; turn use_karras_sigmas "
                                 "off to use a shift (as the Cosmos3 examples do) or keep flow_shift 1.0");
}

}  // namespace

void apply_overrides(SchedulerConfig& cfg, const SchedulerOverrides& ov) {
  if (ov.kind && *ov.kind != cfg.kind) {
    if (*ov.kind == SchedulerKind::flow_match_euler) {
      FlowMatchEulerOptions fm;
      fm.num_train_timesteps = cfg.unipc.num_train_timesteps;
      fm.shift = cfg.unipc.use_karras_sigmas ? 1.0 : cfg.unipc.flow_shift;
      fm.precision = cfg.unipc.precision;
      cfg.flow_match = fm;
    } else {
      UniPCOptions u;
      u.num_train_timesteps = cfg.flow_match.num_train_timesteps;
      u.flow_shift = cfg.flow_match.shift;
      u.precision = cfg.flow_match.precision;
      cfg.unipc = u;
    }
    cfg.kind = *ov.kind;
    cfg.notes.push_back("scheduler overridden to " + std::string(scheduler_kind_name(cfg.kind)) +
                        " (defaults apart from num_train_timesteps and the shift)");
  }
  if (ov.use_karras_sigmas) {
    if (cfg.kind != SchedulerKind::unipc_multistep && *ov.use_karras_sigmas)
      throw Error("scheduler", "use_karras_sigmas override: only UniPC supports Karras sigmas");
    bool& karras =
        cfg.kind == SchedulerKind::unipc_multistep ? cfg.unipc.use_karras_sigmas : cfg.flow_match.use_karras_sigmas;
    if (karras && !*ov.use_karras_sigmas)
      cfg.notes.push_back(cfg.source +
                          ": use_karras_sigmas true is turned off, as the Cosmos3 video examples and vLLM-Omni do");
    karras = *ov.use_karras_sigmas;
  }
  if (ov.native_flow_grid) {
    // The pipeline passes the grid to the scheduler; only UniPC's flow path
    // is defined for it here (FlowMatch Euler and Karras would take it
    // differently).
    if (cfg.kind != SchedulerKind::unipc_multistep)
      throw Error("scheduler", cfg.source + ": use_native_flow_schedule is implemented for UniPC only, not " +
                                   std::string(scheduler_kind_name(cfg.kind)));
    cfg.unipc.native_flow_grid = true;
    cfg.notes.push_back("use_native_flow_schedule (model_index.json): UniPC on the native flow grid "
                        "linspace(1 - 1/T, 0, N+1), shifted");
  }
  if (ov.flow_shift) {
    if (!(*ov.flow_shift >= kMinFlowShift && *ov.flow_shift <= kMaxFlowShift))
      throw Error("scheduler", "flow_shift override: expected a number in " + flow_shift_range_text() + ", got " +
                                   Error::number(*ov.flow_shift));
    if (cfg.kind == SchedulerKind::unipc_multistep) {
      cfg.unipc.flow_shift = *ov.flow_shift;
    } else {
      cfg.flow_match.shift = *ov.flow_shift;
    }
  }
  if (cfg.kind == SchedulerKind::unipc_multistep && cfg.unipc.use_karras_sigmas) {
    check_karras_grid(cfg);
    cfg.notes.push_back(cfg.source + ": UniPC uses Karras flow sigmas (sigma_min " +
                        std::to_string(cfg.unipc.sigma_min) + ", sigma_max " + std::to_string(cfg.unipc.sigma_max) +
                        "), as Diffusers does for this file");
  }
  if (ov.precision) {
    cfg.unipc.precision = *ov.precision;
    cfg.flow_match.precision = *ov.precision;
  }
}

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& cfg) {
  check_karras_grid(cfg);
  if (cfg.kind == SchedulerKind::unipc_multistep) return std::make_unique<UniPCMultistepScheduler>(cfg.unipc);
  if (cfg.flow_match.use_karras_sigmas)
    throw Error("scheduler", cfg.source +
                                 ": use_karras_sigmas true: Karras sigmas are implemented for UniPC only "
                                 "(the Cosmos3 pipeline turns them off)");
  return std::make_unique<FlowMatchEulerDiscreteScheduler>(cfg.flow_match);
}

}  // namespace stepmix::sched
