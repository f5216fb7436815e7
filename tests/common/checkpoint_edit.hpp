// Builds modified copies of a golden transformer folder for hostile-input
// tests: copy every tensor, let the test edit the list, write it to a temp
// folder with the original config.json.
#pragma once

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"

namespace stepmix::test {

inline std::vector<TensorToWrite> load_all_tensors(const std::string& file) {
  auto f = SafetensorsFile::open(file);
  std::vector<TensorToWrite> out;
  for (const auto& [name, v] : f->tensors()) out.push_back(make_tensor_raw(name, v.dtype, v.shape, v.data, v.nbytes));
  return out;
}

inline TensorToWrite* find_tensor(std::vector<TensorToWrite>& ts, const std::string& name) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const TensorToWrite& t) { return t.name == name; });
  return it == ts.end() ? nullptr : &*it;
}

inline void erase_tensor(std::vector<TensorToWrite>& ts, const std::string& name) {
  ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const TensorToWrite& t) { return t.name == name; }), ts.end());
}

// Writes `tensors` + a copy of `config_json_path` into `folder`.
inline void write_transformer_folder(const std::filesystem::path& folder, const std::vector<TensorToWrite>& tensors,
                                     const std::string& config_json_path) {
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(config_json_path, folder / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  write_safetensors((folder / "diffusion_pytorch_model.safetensors").string(), tensors);
}

}  // namespace stepmix::test
