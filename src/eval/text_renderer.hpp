// Text for the compare plots, drawn with FreeType from a system font that
// fontconfig finds at run time ("DejaVu Sans" from fonts-dejavu-core, else
// its best sans-serif match). Glyphs are anti-aliased and blended into an
// RGB Image8 by their coverage. When no font can be loaded the renderer is
// unavailable: it says so once on stderr and draws nothing, so a machine
// without fonts still gets its plots, only without labels.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "io/png.hpp"

namespace stepmix {

class TextRenderer {
 public:
  // The process-wide renderer (looked up on first use).
  static const TextRenderer& shared();
  // A renderer for one font file; unavailable when it cannot be loaded.
  static std::unique_ptr<TextRenderer> from_file(const std::string& font_path);
  // The file fontconfig picks for `family`, or "" when it finds none.
  static std::string find_font(const std::string& family);

  ~TextRenderer();
  TextRenderer(const TextRenderer&) = delete;
  TextRenderer& operator=(const TextRenderer&) = delete;

  bool available() const { return face_ != nullptr; }
  const std::string& font_path() const { return font_path_; }

  // Draws UTF-8 `text` with the top of its line box at (x, y), glyphs
  // `pixel_size` pixels high (the em size), in `colour`; returns the advance
  // width. Pixels outside the canvas are skipped. Draws nothing and returns 0
  // when unavailable.
  int draw(Image8& canvas, int x, int y, const std::string& text, std::array<uint8_t, 3> colour,
           int pixel_size) const;
  // The advance width draw() would return.
  int width(const std::string& text, int pixel_size) const;

 private:
  TextRenderer() = default;
  int render(Image8* canvas, int x, int y, const std::string& text, std::array<uint8_t, 3> colour,
             int pixel_size) const;

  void* library_ = nullptr;  // FT_Library
  void* face_ = nullptr;     // FT_Face
  std::string font_path_;
};

}  // namespace stepmix
