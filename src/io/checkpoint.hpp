// Diffusers model directories and (possibly sharded) transformer weights.
//
//   MODEL_DIR/model_index.json                       optional
//   MODEL_DIR/transformer/config.json                the model + quantization_config
//   MODEL_DIR/transformer/*.safetensors              weights, maybe sharded through
//   MODEL_DIR/transformer/*.safetensors.index.json   {"weight_map": {tensor: shard}}
//   MODEL_DIR/scheduler/scheduler_config.json        optional
//   MODEL_DIR/text_tokenizer/tokenizer.json          optional (tokenizer/ as fallback)
// A directory that is itself a transformer folder (config.json + safetensors)
// loads too.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.hpp"

namespace stepmix {

// Read a JSON file (a regular file within kMaxJsonFileBytes, nested at most
// kMaxJsonDepth levels: io/json_input.hpp); errors name the file and the
// parse position.
nlohmann::json read_json_file(const std::string& path, const std::string& component);

// The "weight_map" of a *.safetensors.index.json: tensor name -> shard file
// name (a plain *.safetensors name in the index's folder). Throws naming the
// index file and the entry.
std::map<std::string, std::string> parse_weight_map(const nlohmann::json& index, const std::string& index_path);

// All tensors of one transformer folder, across shards. Names resolve through
// the index when there is one, so a scale may live in another shard than its
// weight. Some exports wrap every key under a leading "model."; the store
// removes that one prefix so callers always see "layers.0....".
class TensorStore {
 public:
  static TensorStore open_folder(const std::string& folder, const SafetensorsLimits& limits = {});

  const TensorView* find(const std::string& name) const;
  const TensorView& get(const std::string& name) const;  // throws naming the folder
  // Names without the "model." prefix; TensorView::name keeps the stored name.
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;  // sorted
  std::size_t size() const { return index_.size(); }
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  const std::string& folder() const { return folder_; }
  std::optional<std::string> index_file() const { return index_file_; }

 private:
  void strip_model_prefix();

  std::string folder_;
  std::optional<std::string> index_file_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

struct ModelDirectory {
  std::string root;             // as given by the user
  std::string transformer_dir;  // folder holding config.json + weights
  std::string config_path;
  nlohmann::json config;        // transformer/config.json
  std::optional<std::string> model_index_path;
  nlohmann::json model_index;   // null when absent
  std::optional<std::string> scheduler_config_path;
  std::optional<std::string> tokenizer_path;
  std::optional<std::string> hf_quant_config_path;
  nlohmann::json hf_quant_config;  // null when absent; checked by check_root_quant_config

  // Reads config.json and the side files that exist; hf_quant_config.json
  // is checked here, so every command refuses the same inconsistent
  // checkpoint. Throws stepmix::Error naming the file.
  static ModelDirectory open(const std::string& path);
};

// Whether a file named `file_name` (no folder) is one that stepmix's readers
// open in a model folder: weights and their index, the configs, tokenizer
// and chat template, calibration and compare prompts, the classifier. An
// output must never replace one (OutputSet::add_input protects them).
bool is_model_file_name(const std::string& file_name);
// The weights among them: *.safetensors and *.safetensors.index.json.
bool is_weights_file_name(const std::string& file_name);

// Resident bytes of this process's mappings of files under `folder`
// (/proc/self/smaps): the weight pages actually in memory, not the file size.
int64_t mapped_resident_bytes(const std::string& folder);

// hf_quant_config.json (checkpoint root) against transformer/config.json:
// a JSON object whose quant_algo (and quant_method, when given) equal those
// of quantization_config, none at all for a 16-bit checkpoint, and no
// kv_cache_quant_algo (not implemented). Accepts the flat form
// {"quant_algo": ...} and ModelOpt's {"quantization": {"quant_algo": ...}}.
void check_root_quant_config(const nlohmann::json& hf_quant_config, const std::string& hf_path,
                             const nlohmann::json& config, const std::string& config_path);

}  // namespace stepmix
