// The denoising-step precision policy: the checkpoint contract
// (quantization_config.runtime.diffusion_step_policy, schema 1), user
// overrides, the per-iteration rule and the per-run controller.
// The contract: docs/step-policy.md (section numbers "§N" below refer to it);
// a summary is in docs/design.md, "The step policy".
//
// Flow for one checkpoint and one run:
//   ResolvedPolicy p = resolve_policy(config, path, overrides);  // load time, fail closed
//   check_governed_counts(p, counts_from_weights, checkpoint);    // after weight load
//   StepController c(plan_steps(p, has_fp8, num_steps));          // per run
//   { auto run = c.run_scope(); for (i...) { c.begin_step(i); ... } }
//   log(mixed_precision_log_line(p, c.plan()));
//
// Every failure throws stepmix::Error with component "policy"; messages name
// the file, the field path, the offending value and what is accepted.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stepmix {

// ---------------------------------------------------------------- words ----

// Arithmetic of a governed Linear: BF16 (unquantized checkpoint), W8A16
// (dequantized FP8 weight, 16-bit activation), W8A8 (native FP8).
enum class Precision { BF16, W8A16, W8A8 };

// "bf16", "w8a16", "w8a8" (JSON spelling; forward --precision says dense for BF16).
std::string_view precision_json_name(Precision precision);
// "BF16", "W8A16", "W8A8" (trace spelling).
std::string_view precision_trace_token(Precision precision);

// Precision a tower (or a doubly covered iteration) asks for: A16 = W8A16,
// Native = what the checkpoint serialises (W8A8 for FP8 builds).
enum class TowerMode { A16, Native };

// User switch (§6): Auto follows the checkpoint, None turns the schedule off,
// Fp8 forces it (default 3/3 when the checkpoint has no policy).
enum class MixedPrecisionMode { Auto, None, Fp8 };

// "a16" / "native".
std::string_view tower_mode_name(TowerMode mode);
// "auto" / "none" / "fp8".
std::string_view mixed_precision_mode_name(MixedPrecisionMode mode);

// Parsers for user input (CLI, API); case-insensitive; throw on other values.
MixedPrecisionMode parse_mixed_precision_mode(std::string_view text);
// Accepts a16, native and the aliases high_precision (= a16), base_precision (= native).
TowerMode parse_reasoner_mode(std::string_view text);
// Accepts a16, native (native makes iterations inside both windows W8A8).
TowerMode parse_overlap_mode(std::string_view text);

// ------------------------------------------------------- quantization ----

// What the transformer's quantization_config declares (§3.1, §3.2).
//   None:        no quantization_config (or null): a BF16 checkpoint.
//   ModelOptFp8: modelopt / FP8, static tensorwise 8-bit float W and A.
//   Unsupported: anything else (NVFP4, other ModelOpt recipes, other
//                quantizers, block/channel scales, weight-only, malformed).
// stepmix runs BF16 and ModelOpt FP8 only, so an Unsupported checkpoint is
// rejected at load whether or not it carries a policy (fail closed).
enum class QuantizationKind { None, ModelOptFp8, Unsupported };

struct QuantizationInfo {
  QuantizationKind kind = QuantizationKind::None;
  std::string quant_method;  // as written; empty when absent
  std::string quant_algo;    // as written; empty when absent
  // One phrase: why the checkpoint has this kind (for Unsupported, what is
  // wrong and what is accepted, e.g. "quantization_config.quant_algo: NVFP4
  // not supported; expected \"FP8\", got \"NVFP4\"").
  std::string reason;
  // Modules the checkpoint keeps in BF16, for reporting (never governed).
  std::vector<std::string> ignore;                  // glob form
  std::vector<std::string> modules_to_not_convert;  // substring form
  // One line per key of quantization_config stepmix does not know (ignored).
  std::vector<std::string> warnings;
};

// Classifies transformer_config["quantization_config"]. Never throws; a
// malformed declaration classifies as Unsupported.
QuantizationInfo classify_quantization(const nlohmann::json& transformer_config, const std::string& config_path);

// Throws unless the checkpoint is BF16 or ModelOpt FP8 (the loader's gate).
void require_supported_quantization(const QuantizationInfo& quant, const std::string& config_path);

// Throws unless the weights are what the declaration says: F8_E4M3 governed
// Linears (`fp8_modules`, e.g. "layers.0.self_attn.to_q") exactly when it
// declares ModelOpt FP8, and none of them among the modules it keeps in BF16
// (`ignore` globs, `modules_to_not_convert` substrings). `weights_folder`
// and `config_path` name the two sides in the message.
void require_weights_match_quantization(const QuantizationInfo& quant, const std::vector<std::string>& fp8_modules,
                                        const std::string& weights_folder, const std::string& config_path);

// hf_quant_config.json at the checkpoint root is never a policy source (§1):
// returns one warning per reason to ignore something in it (a runtime key).
std::vector<std::string> root_quant_config_warnings(const nlohmann::json& hf_quant_config, const std::string& path);

// ---------------------------------------------------------- the policy ----

// A validated schema-1 policy. Fixed fields (type, index_space, default_mode)
// have a single legal value and are not stored.
struct StepPolicy {
  int first_steps = 3;
  int last_steps = 3;
  TowerMode overlap = TowerMode::A16;
  TowerMode reasoner = TowerMode::A16;
  std::vector<std::string> scope{"transformer"};
};

struct ParsedPolicy {
  bool exists = false;  // runtime.diffusion_step_policy present and valid
  bool inert = false;   // exists, but scope lacks "transformer" (§5): ignored
  StepPolicy policy;    // meaningful when exists
  std::vector<std::string> warnings;  // e.g. unknown keys inside runtime

  bool applies() const { return exists && !inert; }
};

// §4 checks 1–14 in order, first failure wins. Check 14 rejects a policy that
// applies on a checkpoint that is not ModelOpt FP8 (NVFP4: "NVFP4 not supported").
ParsedPolicy parse_step_policy(const nlohmann::json& transformer_config, const std::string& config_path);

// Diffusers' precedence for a config handed in through the API: when the live
// config declares no policy (no runtime key, runtime null, or a runtime object
// without diffusion_step_policy), the on-disk transformer/config.json runtime
// is copied in. A live policy, or a malformed live runtime (left for the parser
// to reject), is kept. Nothing is overlaid when either side has no
// quantization_config object.
nlohmann::json overlay_runtime_from_disk(const nlohmann::json& api_config, const nlohmann::json& disk_config);

// ------------------------------------------------------------ resolution ----

struct PolicyOverrides {
  MixedPrecisionMode mode = MixedPrecisionMode::Auto;
  std::optional<int> first_steps;
  std::optional<int> last_steps;
  std::optional<TowerMode> reasoner;
  std::optional<TowerMode> overlap;

  bool any_field() const { return first_steps || last_steps || reasoner || overlap; }
};

struct ResolvedPolicy {
  bool enabled = false;
  // checkpoint, checkpoint+override, forced, forced+override (enabled);
  // disabled, no-policy (off), the spec's set: a BF16 checkpoint (its
  // trace is BF16 throughout) and a policy whose scope leaves out the
  // transformer (`notes` says so) are both no-policy.
  std::string source = "no-policy";
  // When off: 0/0, overlap a16, reasoner native (what actually runs, §9).
  int first_steps = 0;
  int last_steps = 0;
  TowerMode overlap = TowerMode::A16;
  TowerMode reasoner = TowerMode::Native;
  QuantizationInfo quant;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // information, not a problem (spec §5: an inert policy is logged at info level)
};

// §6. Parses (all §4 errors), rejects Unsupported quantization in every mode,
// then: overrides with mode none → error; overrides under auto without an
// applying policy → error; forcing (fp8 or overrides) on a BF16 checkpoint →
// error; negative override counts → error.
ResolvedPolicy resolve_policy(const nlohmann::json& transformer_config, const std::string& config_path,
                              const PolicyOverrides& overrides);

// ------------------------------------------------------ governed Linears ----

enum class Tower { Generation, Reasoner };

// "generation" / "reasoner".
std::string_view tower_name(Tower tower);

// §8.1 by what the attention code computes. module_path is the
// transformer-relative module name as in the safetensors files, e.g.
// "layers.7.mlp_moe_gen.down_proj" (no ".weight" suffix, no prefix). Every
// other module (proj_in, norms, time_embedder.*, ...) is not governed.
std::optional<Tower> governed_tower(std::string_view module_path);

// Governed Linears found at weight load, by tower and storage.
struct GovernedCounts {
  int generation_fp8 = 0;
  int reasoner_fp8 = 0;
  int generation_dense = 0;
  int reasoner_dense = 0;
};

// §8.3: with the schedule on, the generation tower (and the reasoner tower
// when reasoner is a16) must hold at least one serialised FP8 Linear.
void check_governed_counts(const ResolvedPolicy& policy, const GovernedCounts& counts, const std::string& checkpoint);

// -------------------------------------------------------------- the plan ----

// §7 for one iteration i of an N-iteration loop, first/last window counts.
// N == 1 is native (false) regardless of counts. Throws when N <= 0, i is
// outside [0, N) or a count is negative.
bool step_is_a16(int i, int num_steps, int first_steps, int last_steps, TowerMode overlap);

struct StepPlan {
  std::vector<Precision> generation;  // one per loop iteration
  Precision reasoner = Precision::W8A8;  // static for the run (§9)
  Precision native = Precision::W8A8;    // outside a run: W8A8, or BF16 without FP8
};

// The most denoising steps a plan (and a request, stepmix/model.hpp) has.
inline constexpr int kMaxSteps = 10000;

// Precision of every iteration of one loop. checkpoint_has_fp8 = the
// transformer holds serialised FP8 governed Linears. Without them everything
// is BF16 (an enabled schedule without FP8 is an error); schedule off on FP8 →
// W8A8 everywhere, reasoner included. Throws when num_steps is outside
// [1, kMaxSteps].
StepPlan plan_steps(const ResolvedPolicy& policy, bool checkpoint_has_fp8, int num_steps);
// The same per tower (§11: a token names what the tower's governed Linears
// run): a tower without serialised FP8 Linears runs BF16 while the other
// holds some, which only a run with the schedule off (or, for the reasoner,
// reasoner "native") can have; an enabled schedule whose generation tower has
// no FP8 Linear is an error, as check_governed_counts says.
StepPlan plan_steps(const ResolvedPolicy& policy, const GovernedCounts& counts, int num_steps);

// Run-length summary in loop order, e.g. "W8A16x3 / W8A8x29 / W8A16x3"
// (empty string for no iterations).
std::string trace_string(const std::vector<Precision>& trace);

// §11: "mixed_precision source=<s> reasoner=<TOKEN> generation=<trace>".
std::string mixed_precision_log_line(const ResolvedPolicy& policy, const StepPlan& plan);

// ---------------------------------------------------------- controller ----

// Per-request precision state of one transformer instance (§10). The loop
// calls begin_step(i) once per iteration, before any transformer call of that
// iteration (CFG passes share the selection). Outside a run both towers read
// native, so warm-up and later calls never inherit A16. Not thread-safe: one
// request per transformer instance at a time.
class StepController {
 public:
  explicit StepController(StepPlan plan);

  // Selects plan.generation[i] and the run's reasoner precision; records the
  // token. Throws when i is outside [0, N).
  void begin_step(int i);
  Precision generation() const;
  Precision reasoner() const;
  // Back to native (the recorded trace is kept for reporting).
  void reset();

  const StepPlan& plan() const { return plan_; }
  // Generation tokens of the iterations begun since the last run_scope().
  const std::vector<Precision>& recorded_trace() const { return recorded_; }

  // Starts a run (clears the recorded trace) and resets to native when it
  // goes out of scope, also during stack unwinding.
  class RunScope {
   public:
    explicit RunScope(StepController& controller);
    ~RunScope();
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    StepController& controller_;
  };
  [[nodiscard]] RunScope run_scope() { return RunScope(*this); }

 private:
  StepPlan plan_;
  bool in_step_ = false;
  Precision generation_;
  std::vector<Precision> recorded_;
};

}  // namespace stepmix
