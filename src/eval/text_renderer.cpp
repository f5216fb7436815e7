#include "eval/text_renderer.hpp"

#include <fontconfig/fontconfig.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#include <cstdio>
#include <mutex>

#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// Code points of UTF-8 text; a byte that does not start a valid sequence
// stands for U+FFFD.
template <class Fn>
void for_each_code_point(const std::string& text, Fn&& fn) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    if (s[i] < 0x80) {
      fn(uint32_t(s[i++]));
      continue;
    }
    const std::size_t n = detail::utf8_sequence_length(s + i, text.size() - i);
    if (n == 0) {
      fn(uint32_t(0xFFFD));
      ++i;
      continue;
    }
    uint32_t cp = s[i] & (n == 2 ? 0x1Fu : n == 3 ? 0x0Fu : 0x07u);
    for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (s[i + k] & 0x3Fu);
    fn(cp);
    i += n;
  }
}

}  // namespace

std::string TextRenderer::find_font(const std::string& family) {
  FcConfig* config = FcInitLoadConfigAndFonts();
  if (!config) return "";
  std::string path;
  FcPattern* pattern = FcNameParse(reinterpret_cast<const FcChar8*>(family.c_str()));
  if (pattern) {
    FcPatternAddBool(pattern, FC_SCALABLE, FcTrue);
    FcConfigSubstitute(config, pattern, FcMatchPattern);
    FcDefaultSubstitute(pattern);
    FcResult result = FcResultNoMatch;
    if (FcPattern* match = FcFontMatch(config, pattern, &result)) {
      FcChar8* file = nullptr;
      if (FcPatternGetString(match, FC_FILE, 0, &file) == FcResultMatch && file)
        path = reinterpret_cast<const char*>(file);
      FcPatternDestroy(match);
    }
    FcPatternDestroy(pattern);
  }
  FcConfigDestroy(config);
  return path;
}

std::unique_ptr<TextRenderer> TextRenderer::from_file(const std::string& font_path) {
  std::unique_ptr<TextRenderer> r(new TextRenderer());
  r->font_path_ = font_path;
  FT_Library library = nullptr;
  if (font_path.empty() || FT_Init_FreeType(&library) != 0) return r;
  FT_Face face = nullptr;
  if (FT_New_Face(library, font_path.c_str(), 0, &face) != 0 || !FT_IS_SCALABLE(face)) {
    if (face) FT_Done_Face(face);
    FT_Done_FreeType(library);
    return r;
  }
  r->library_ = library;
  r->face_ = face;
  return r;
}

TextRenderer::~TextRenderer() {
  if (face_) FT_Done_Face(static_cast<FT_Face>(face_));
  if (library_) FT_Done_FreeType(static_cast<FT_Library>(library_));
}

const TextRenderer& TextRenderer::shared() {
  static const std::unique_ptr<TextRenderer> renderer = [] {
    auto r = from_file(find_font("DejaVu Sans"));
    if (!r->available())
      std::fprintf(stderr, "warning: no usable font found through fontconfig (install fonts-dejavu-core); "
                           "plots are drawn without labels\n");
    return r;
  }();
  return *renderer;
}

int TextRenderer::render(Image8* canvas, int x, int y, const std::string& text, std::array<uint8_t, 3> colour,
                         int pixel_size) const {
  if (!face_ || pixel_size <= 0) return 0;
  const auto face = static_cast<FT_Face>(face_);
  if (FT_Set_Pixel_Sizes(face, 0, FT_UInt(pixel_size)) != 0) return 0;
  const int baseline = y + int(face->size->metrics.ascender >> 6);
  int pen = x;
  FT_UInt previous = 0;
  for_each_code_point(text, [&](uint32_t cp) {
    const FT_UInt index = FT_Get_Char_Index(face, cp);
    if (previous && index && FT_HAS_KERNING(face)) {
      FT_Vector kerning{};
      if (FT_Get_Kerning(face, previous, index, FT_KERNING_DEFAULT, &kerning) == 0) pen += int(kerning.x >> 6);
    }
    previous = index;
    if (FT_Load_Glyph(face, index, canvas ? FT_LOAD_RENDER : FT_LOAD_DEFAULT) != 0) return;
    const FT_GlyphSlot g = face->glyph;
    if (canvas && g->bitmap.pixel_mode == FT_PIXEL_MODE_GRAY) {
      const FT_Bitmap& bm = g->bitmap;
      for (unsigned row = 0; row < bm.rows; ++row) {
        const int py = baseline - g->bitmap_top + int(row);
        if (py < 0 || py >= canvas->height) continue;
        for (unsigned col = 0; col < bm.width; ++col) {
          const int px = pen + g->bitmap_left + int(col);
          if (px < 0 || px >= canvas->width) continue;
          const unsigned coverage = bm.buffer[std::ptrdiff_t(row) * bm.pitch + col];
          if (coverage == 0) continue;
          uint8_t* p = &canvas->pixels[(std::size_t(py) * canvas->width + px) * 3];
          for (int c = 0; c < 3; ++c) p[c] = uint8_t((p[c] * (255 - coverage) + colour[c] * coverage + 127) / 255);
        }
      }
    }
    pen += int(g->advance.x >> 6);
  });
  return pen - x;
}

int TextRenderer::draw(Image8& canvas, int x, int y, const std::string& text, std::array<uint8_t, 3> colour,
                       int pixel_size) const {
  if (canvas.channels != 3) throw Error("report", "text is drawn on RGB canvases only");
  return render(&canvas, x, y, text, colour, pixel_size);
}

int TextRenderer::width(const std::string& text, int pixel_size) const {
  return render(nullptr, 0, 0, text, {0, 0, 0}, pixel_size);
}

}  // namespace stepmix
