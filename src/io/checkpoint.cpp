#include "io/checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cctype>
#include <fstream>
#include <set>

#include "io/file_access.hpp"
#include "io/json_input.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json_file(const std::string& path, const std::string& component) {
  return parse_json_text(read_small_file(path, component), path, component);
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Regular files in `folder` whose names end in `suffix`, sorted. A folder
// that cannot be listed is an error naming it and why (not a raw
// std::filesystem message).
std::vector<std::string> list_files(const std::string& folder, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(folder, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!ends_with(it->path().filename().string(), suffix)) continue;
    // A weights file that is a folder, a FIFO or a link to nothing is an
    // error, not a file to skip (the tensors it was meant to hold would be
    // reported missing instead).
    const std::string path = it->path().string();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error("checkpoint", path + ": " + errno_phrase(errno));
    if (!S_ISREG(st.st_mode))
      throw Error("checkpoint", path + ": not a regular file (" + file_type_phrase(st.st_mode) + ")");
    out.push_back(path);
  }
  if (ec) throw Error("checkpoint", folder + ": cannot list the folder: " + errno_phrase(ec.value()));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_weight_map(const json& index, const std::string& index_path) {
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object() ||
      index["weight_map"].empty())
    throw Error("checkpoint", index_path + ": weight_map: expected a non-empty object {tensor name: shard file}");
  std::map<std::string, std::string> out;
  for (const auto& [name, shard_json] : index["weight_map"].items()) {
    if (!shard_json.is_string())
      throw Error("checkpoint", index_path + ": weight_map." + name + ": expected a shard file name");
    const std::string shard = shard_json.get<std::string>();
    // A NUL ("\u0000" in JSON) would cut the name short when it reaches open()
    // (and the error message when it is printed).
    if (shard.find('\0') != std::string::npos)
      throw Error("checkpoint", index_path + ": weight_map." + name + ": " + json(shard).dump() +
                                    " contains a NUL character, not a *.safetensors file name");
    // Shards live beside the index: no directories, no escapes.
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == ".." || !ends_with(shard, ".safetensors"))
      throw Error("checkpoint", index_path + ": weight_map." + name + ": '" + shard +
                                    "' is not a *.safetensors file name in the same folder");
    out.emplace(name, shard);
  }
  return out;
}

TensorStore TensorStore::open_folder(const std::string& folder, const SafetensorsLimits& limits) {
  TensorStore store;
  store.folder_ = folder;
  const auto indexes = list_files(folder, ".safetensors.index.json");
  if (indexes.size() > 1)
    throw Error("checkpoint", folder + ": " + std::to_string(indexes.size()) +
                                  " *.safetensors.index.json files; expected at most one");

  if (indexes.empty()) {
    // Unsharded: every *.safetensors in the folder, names must be unique.
    const auto shards = list_files(folder, ".safetensors");
    if (shards.empty()) throw Error("checkpoint", folder + ": no *.safetensors file");
    for (const auto& path : shards) {
      store.files_.push_back(SafetensorsFile::open(path, limits));
      for (const auto& [name, view] : store.files_.back()->tensors()) {
        auto [it, inserted] = store.index_.emplace(name, &view);
        if (!inserted)
          throw Error("checkpoint", folder + ": tensor '" + name + "' is in both " + it->second->file + " and " +
                                        path);
      }
    }
    store.strip_model_prefix();
    return store;
  }

  const std::string& index_path = indexes.front();
  store.index_file_ = index_path;
  const auto weight_map = parse_weight_map(read_json_file(index_path, "checkpoint"), index_path);
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
  for (const auto& [name, shard] : weight_map) {
    auto it = shards.find(shard);
    if (it == shards.end()) {
      it = shards.emplace(shard, SafetensorsFile::open((fs::path(folder) / shard).string(), limits)).first;
      store.files_.push_back(it->second);
    }
    const TensorView* view = it->second->find(name);
    if (!view)
      throw Error("checkpoint", index_path + ": weight_map names tensor '" + name + "' in " + shard +
                                    ", which does not hold it");
    store.index_.emplace(name, view);
  }
  // So would a whole shard the index does not name.
  for (const std::string& path : list_files(folder, ".safetensors")) {
    const std::string name = fs::path(path).filename().string();
    if (!shards.count(name))
      throw Error("checkpoint", index_path + ": " + path + " is not named in weight_map; every *.safetensors file "
                                             "of the folder must be a shard of the index");
  }
  // A tensor the index does not list would be silently invisible: refuse it.
  for (const auto& file : store.files_)
    for (const auto& [name, view] : file->tensors()) {
      auto it = store.index_.find(name);
      if (it == store.index_.end())
        throw Error("checkpoint", index_path + ": tensor '" + name + "' in " + file->path() +
                                      " is missing from weight_map");
      if (it->second != &view)
        throw Error("checkpoint", index_path + ": tensor '" + name + "' is in " + file->path() +
                                      " but the index maps it to another shard");
    }
  store.strip_model_prefix();
  return store;
}

void TensorStore::strip_model_prefix() {
  static const std::string prefix = "model.";
  std::map<std::string, const TensorView*> canonical;
  for (const auto& [name, view] : index_) {
    const bool prefixed = name.compare(0, prefix.size(), prefix) == 0;
    const std::string key = prefixed ? name.substr(prefix.size()) : name;
    auto [it, inserted] = canonical.emplace(key, view);
    if (!inserted)
      throw Error("checkpoint", folder_ + ": tensors '" + it->second->name + "' and '" + view->name +
                                    "' both name '" + key + "' once the leading 'model.' is removed");
  }
  index_ = std::move(canonical);
}

const TensorView* TensorStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& TensorStore::get(const std::string& name) const {
  if (const TensorView* v = find(name)) return *v;
  throw Error("checkpoint", folder_ + ": tensor '" + name + "' not found");
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

namespace {
bool is_transformer_folder(const fs::path& p) {
  struct stat st {};
  return ::stat((p / "config.json").c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && !list_files(p.string(), ".safetensors").empty();
}

// Why `p` (a transformer/ that is there) is not a transformer folder.
std::string transformer_folder_problem(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return p.string() + ": " + errno_phrase(errno);
  if (!S_ISDIR(st.st_mode)) return p.string() + ": not a folder (" + file_type_phrase(st.st_mode) + ")";
  const fs::path config = p / "config.json";
  if (::stat(config.c_str(), &st) != 0) return config.string() + ": " + errno_phrase(errno);
  if (!S_ISREG(st.st_mode)) return config.string() + ": not a regular file (" + file_type_phrase(st.st_mode) + ")";
  return p.string() + ": no *.safetensors file";
}
// An optional side file: absent is fine, but something that is there and is
// not a regular file (a FIFO, a device, a folder), or cannot be looked at
// (permission denied), is an error rather than silently treated as absent.
std::optional<std::string> optional_file(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw Error("checkpoint", p.string() + ": " + errno_phrase(errno));
  }
  if (!S_ISREG(st.st_mode))
    throw Error("checkpoint", p.string() + ": not a regular file (" + file_type_phrase(st.st_mode) + ")");
  return p.string();
}

// The quantization a JSON object declares: quant_method, quant_algo and
// kv_cache_quant_algo, at the top level (the copy of quantization_config
// stepmix and Diffusers write) or under "quantization" (ModelOpt's own
// hf_quant_config.json layout).
struct DeclaredQuantization {
  json method, algo, kv_cache, weight_only;
  std::string prefix;  // "" or "quantization." for messages
};

DeclaredQuantization declared_quantization(const json& j) {
  DeclaredQuantization d;
  const json* holder = &j;
  if (j.contains("quantization") && j["quantization"].is_object()) {
    holder = &j["quantization"];
    d.prefix = "quantization.";
  }
  d.method = holder->value("quant_method", json());
  d.algo = holder->value("quant_algo", json());
  d.kv_cache = holder->value("kv_cache_quant_algo", json());
  d.weight_only = holder->value("weight_only", json());
  return d;
}

}  // namespace

void check_root_quant_config(const json& hf_quant_config, const std::string& hf_path, const json& config,
                             const std::string& config_path) {
  auto fail = [&](const std::string& field, const std::string& problem) {
    throw Error("checkpoint", hf_path + ": " + field + ": " + problem);
  };
  if (!hf_quant_config.is_object())
    throw Error("checkpoint", hf_path + ": expected a JSON object, got " + std::string(hf_quant_config.type_name()));
  const DeclaredQuantization hf = declared_quantization(hf_quant_config);
  if (!hf.kv_cache.is_null())
    fail(hf.prefix + "kv_cache_quant_algo",
         "expected null (KV-cache quantization is not implemented), got " + hf.kv_cache.dump());
  if (!hf.weight_only.is_null() && hf.weight_only != false)
    fail(hf.prefix + "weight_only", "expected false or absent (the activations are quantized too), got " +
                                        hf.weight_only.dump());
  const json* qc = config.is_object() && config.contains("quantization_config") && !config["quantization_config"].is_null()
                       ? &config["quantization_config"]
                       : nullptr;
  if (!qc) {
    if (!hf.algo.is_null())
      fail(hf.prefix + "quant_algo", "names " + hf.algo.dump() + ", but " + config_path +
                                         " has no quantization_config (a 16-bit checkpoint); the two must agree");
    return;
  }
  if (!qc->is_object()) return;  // the transformer config's own check reports it
  const DeclaredQuantization own = declared_quantization(*qc);
  if (hf.algo.is_null())
    fail(hf.prefix + "quant_algo", "missing; expected " + own.algo.dump() + " as " + config_path +
                                       " quantization_config.quant_algo declares");
  if (hf.algo != own.algo)
    fail(hf.prefix + "quant_algo", hf.algo.dump() + " disagrees with " + config_path +
                                       " quantization_config.quant_algo " + own.algo.dump());
  if (!hf.method.is_null() && hf.method != own.method)
    fail(hf.prefix + "quant_method", hf.method.dump() + " disagrees with " + config_path +
                                         " quantization_config.quant_method " + own.method.dump());
}

ModelDirectory ModelDirectory::open(const std::string& path) {
  const fs::path root(path);
  struct stat root_st {};
  if (::stat(path.c_str(), &root_st) != 0) throw Error("checkpoint", path + ": " + errno_phrase(errno));
  if (!S_ISDIR(root_st.st_mode))
    throw Error("checkpoint", path + ": not a directory (" + file_type_phrase(root_st.st_mode) + ")");
  ModelDirectory dir;
  dir.root = path;
  if (is_transformer_folder(root / "transformer")) {
    dir.transformer_dir = (root / "transformer").string();
  } else if (is_transformer_folder(root)) {
    dir.transformer_dir = root.string();
  } else {
    struct stat st {};
    const std::string why = ::lstat((root / "transformer").c_str(), &st) == 0
                                ? " (" + transformer_folder_problem(root / "transformer") + ")"
                                : "";
    throw Error("checkpoint", path + ": expected a Diffusers model directory (transformer/config.json and "
                                     "transformer/*.safetensors) or a transformer folder (config.json and "
                                     "*.safetensors)" + why);
  }
  dir.config_path = (fs::path(dir.transformer_dir) / "config.json").string();
  dir.config = read_json_file(dir.config_path, "config");
  if (!dir.config.is_object()) throw Error("config", dir.config_path + ": expected a JSON object");

  // Root-level files only exist for a full model directory.
  const bool full = dir.transformer_dir != root.string();
  if (full) {
    // A component folder that is a link to nothing, or no folder, is an
    // error: taken as absent it would change the run (no VAE: the raw latent
    // is written; no scheduler: the default one samples).
    for (const char* component : {"vae", "scheduler", "text_tokenizer", "tokenizer"}) {
      const fs::path folder = root / component;
      struct stat st {};
      if (::lstat(folder.c_str(), &st) != 0) continue;
      if (::stat(folder.c_str(), &st) != 0) throw Error("checkpoint", folder.string() + ": " + errno_phrase(errno));
      if (!S_ISDIR(st.st_mode))
        throw Error("checkpoint", folder.string() + ": not a folder (" + file_type_phrase(st.st_mode) + ")");
    }
    dir.model_index_path = optional_file(root / "model_index.json");
    if (dir.model_index_path) {
      dir.model_index = read_json_file(*dir.model_index_path, "config");
      if (!dir.model_index.is_object())
        throw Error("config", *dir.model_index_path + ": expected a JSON object, got " +
                                  std::string(dir.model_index.type_name()));
      // A component it declares ([library, class]; [null, null] is none)
      // must be there.
      for (const auto& [component, config] :
           {std::pair{"vae", "config.json"}, std::pair{"scheduler", "scheduler_config.json"}}) {
        const auto it = dir.model_index.find(component);
        if (it == dir.model_index.end() || !it->is_array() || it->empty() || (*it)[0].is_null()) continue;
        const fs::path needed = root / component / config;
        if (!fs::is_regular_file(needed))
          throw Error("checkpoint", *dir.model_index_path + ": " + component + ": declares " + it->dump() + ", but " +
                                        needed.string() + " does not exist");
      }
    }
    dir.scheduler_config_path = optional_file(root / "scheduler" / "scheduler_config.json");
    dir.tokenizer_path = optional_file(root / "text_tokenizer" / "tokenizer.json");
    if (!dir.tokenizer_path) dir.tokenizer_path = optional_file(root / "tokenizer" / "tokenizer.json");
    dir.hf_quant_config_path = optional_file(root / "hf_quant_config.json");
    if (dir.hf_quant_config_path) {
      // Whole-model loaders read this file instead of the transformer's
      // config: a copy that is not JSON, or names another format, means the
      // checkpoint says two different things.
      dir.hf_quant_config = read_json_file(*dir.hf_quant_config_path, "checkpoint");
      check_root_quant_config(dir.hf_quant_config, *dir.hf_quant_config_path, dir.config, dir.config_path);
    }
  }
  return dir;
}

bool is_model_file_name(const std::string& file_name) {
  static const std::set<std::string> names = {
      "config.json",         "model_index.json",      "hf_quant_config.json", "scheduler_config.json",
      "tokenizer.json",      "tokenizer_config.json", "chat_template.jinja",  "calibration_prompts.txt",
      "compare_prompts.txt", "classifier.json"};
  return is_weights_file_name(file_name) || names.count(file_name) > 0;
}

bool is_weights_file_name(const std::string& file_name) {
  return ends_with(file_name, ".safetensors") || ends_with(file_name, ".safetensors.index.json");
}

int64_t mapped_resident_bytes(const std::string& folder) {
  std::error_code ec;
  const std::string prefix = fs::weakly_canonical(folder, ec).string() + "/";
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  int64_t kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      const auto slash = line.find('/');
      inside = slash != std::string::npos && line.compare(slash, prefix.size(), prefix) == 0;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      kib += std::stoll(line.substr(4));
    }
  }
  return kib * 1024;
}

}  // namespace stepmix
