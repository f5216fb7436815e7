// Which Linears the policy governs (docs/step-policy.md §8.1) and the
// load-time presence check (§8.3). Towers follow what the attention code
// computes: the text stream uses to_{q,k,v,out} (reasoner), the vision
// stream add_{q,k,v}_proj and
// to_add_out (generation), whatever the Diffusers name-based split says.
#include <array>
#include <cctype>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

struct GovernedSuffix {
  std::string_view name;
  Tower tower;
};

constexpr std::array<GovernedSuffix, 14> kGovernedSuffixes{{
    {"self_attn.add_q_proj", Tower::Generation},
    {"self_attn.add_k_proj", Tower::Generation},
    {"self_attn.add_v_proj", Tower::Generation},
    {"self_attn.to_add_out", Tower::Generation},
    {"mlp_moe_gen.gate_proj", Tower::Generation},
    {"mlp_moe_gen.up_proj", Tower::Generation},
    {"mlp_moe_gen.down_proj", Tower::Generation},
    {"self_attn.to_q", Tower::Reasoner},
    {"self_attn.to_k", Tower::Reasoner},
    {"self_attn.to_v", Tower::Reasoner},
    {"self_attn.to_out", Tower::Reasoner},
    {"mlp.gate_proj", Tower::Reasoner},
    {"mlp.up_proj", Tower::Reasoner},
    {"mlp.down_proj", Tower::Reasoner},
}};

// Canonical decimal layer index: "0", "17"; not "", "07", "-1".
bool is_layer_index(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text.front() == '0')) return false;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string counts_text(const GovernedCounts& counts) {
  return "generation_fp8=" + std::to_string(counts.generation_fp8) +
         " generation_dense=" + std::to_string(counts.generation_dense) +
         " reasoner_fp8=" + std::to_string(counts.reasoner_fp8) +
         " reasoner_dense=" + std::to_string(counts.reasoner_dense);
}

[[noreturn]] void fail_missing_tower(Tower tower, const GovernedCounts& counts, const std::string& checkpoint,
                                     const ResolvedPolicy& policy) {
  throw Error(policy_detail::kComponent,
              checkpoint + ": no compatible serialised ModelOpt FP8 Linears under " + std::string(tower_name(tower)) +
                  " tower; counts=" + counts_text(counts) + " (mixed_precision source=" + policy.source + ")");
}

}  // namespace

std::optional<Tower> governed_tower(std::string_view module_path) {
  constexpr std::string_view kLayersPrefix = "layers.";
  if (!module_path.starts_with(kLayersPrefix)) return std::nullopt;
  const std::string_view rest = module_path.substr(kLayersPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !is_layer_index(rest.substr(0, dot))) return std::nullopt;
  const std::string_view suffix = rest.substr(dot + 1);
  for (const auto& governed : kGovernedSuffixes) {
    if (suffix == governed.name) return governed.tower;
  }
  return std::nullopt;
}

void check_governed_counts(const ResolvedPolicy& policy, const GovernedCounts& counts, const std::string& checkpoint) {
  if (!policy.enabled) return;
  if (counts.generation_fp8 <= 0) fail_missing_tower(Tower::Generation, counts, checkpoint, policy);
  if (policy.reasoner == TowerMode::A16 && counts.reasoner_fp8 <= 0) {
    fail_missing_tower(Tower::Reasoner, counts, checkpoint, policy);
  }
}

}  // namespace stepmix
