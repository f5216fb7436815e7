// Which format an output path asks for: the extension decides, in one table
// (add a row for a new format, e.g. video). An extension a command does not
// write, or a path without one, is an error naming it and listing what that
// option accepts; stepmix never writes PNG bytes under a .jpg name, and
// never changes the name it was given.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace stepmix {

enum class OutputFormat { Png, Safetensors, Json, Markdown, Mp4 };

struct OutputFormatInfo {
  OutputFormat format;
  std::string_view extension;    // with the dot, lower case
  std::string_view description;  // for messages: "PNG image"
  bool implemented;              // false: known, refused with "not written by this version"
};

// The table: .png, .safetensors, .json, .md, .mp4.
const OutputFormatInfo& output_format_info(OutputFormat format);

// The format `path` names, which must be one of `accepted`. The extension is
// matched without regard to case (".PNG" is PNG). Throws
// stepmix::Error("output", "<option> <path>: extension '.jpg' is not
// supported here; expected .png or .safetensors (the extension decides the
// format)").
OutputFormat output_format_for(const std::string& path, const std::string& option,
                               std::initializer_list<OutputFormat> accepted);

}  // namespace stepmix
