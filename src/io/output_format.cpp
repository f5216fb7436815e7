#include "io/output_format.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <vector>

#include "io/video.hpp"
#include "stepmix/error.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace {

constexpr std::array<OutputFormatInfo, 5> kFormats{{
    {OutputFormat::Png, ".png", "PNG image", true},
    {OutputFormat::Safetensors, ".safetensors", "safetensors tensors", true},
    {OutputFormat::Json, ".json", "JSON document", true},
    {OutputFormat::Markdown, ".md", "Markdown text", true},
    {OutputFormat::Mp4, ".mp4", "MP4 video (H.264)", true},
}};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The extensions of `accepted` this build writes (no .mp4 without video;
// FFmpeg is not opened to say so: a mistyped extension loads nothing).
std::string accepted_list(std::initializer_list<OutputFormat> accepted) {
  std::vector<OutputFormat> written;
  for (OutputFormat f : accepted)
    if (f != OutputFormat::Mp4 || video_built()) written.push_back(f);
  std::string out;
  for (std::size_t i = 0; i < written.size(); ++i)
    out += (i == 0 ? "" : (i + 1 == written.size() ? " or " : ", ")) +
           std::string(output_format_info(written[i]).extension);
  return out;
}

}  // namespace

const OutputFormatInfo& output_format_info(OutputFormat format) {
  for (const OutputFormatInfo& info : kFormats)
    if (info.format == format) return info;
  throw Error("output", "unknown output format");
}

bool is_video_output(const std::string& path) {
  return lower(std::filesystem::path(path).extension().string()) == output_format_info(OutputFormat::Mp4).extension;
}

OutputFormat output_format_for(const std::string& path, const std::string& option,
                               std::initializer_list<OutputFormat> accepted) {
  const std::string where = (option.empty() ? "" : option + " ") + path;
  const std::string extension = lower(std::filesystem::path(path).extension().string());
  if (extension.empty() || extension == ".")
    throw Error("output", where + ": no file extension; expected " + accepted_list(accepted) +
                              " (the extension decides the format)");
  const OutputFormatInfo* known = nullptr;
  for (const OutputFormatInfo& info : kFormats)
    if (info.extension == extension) known = &info;
  if (known && known->format == OutputFormat::Mp4) {
    const std::string unavailable = video_unavailable();
    if (!unavailable.empty()) throw Error("output", where + ": " + unavailable + "; expected " + accepted_list(accepted));
  }
  if (known && !known->implemented)
    throw Error("output", where + ": " + std::string(known->description) + " (" + extension +
                              ") is not written by this version of stepmix; expected " + accepted_list(accepted));
  if (known && std::find(accepted.begin(), accepted.end(), known->format) != accepted.end()) return known->format;
  throw Error("output", where + ": extension '" + std::filesystem::path(path).extension().string() +
                            "' is not supported here; expected " + accepted_list(accepted) +
                            " (the extension decides the format)");
}

}  // namespace stepmix
