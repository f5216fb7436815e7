#include "eval/report_png.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "eval/text_renderer.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

void put(Image8& img, int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
  uint8_t* p = &img.pixels[(std::size_t(y) * img.width + x) * 3];
  p[0] = c[0];
  p[1] = c[1];
  p[2] = c[2];
}

void fill_rect(Image8& img, int x, int y, int w, int h, Rgb c) {
  for (int r = y; r < y + h; ++r)
    for (int q = x; q < x + w; ++q) put(img, q, r, c);
}

Image8 canvas(int width, int height, Rgb background) {
  Image8 img{width, height, 3, {}};
  img.pixels.resize(std::size_t(width) * height * 3);
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) {
    img.pixels[i] = background[0];
    img.pixels[i + 1] = background[1];
    img.pixels[i + 2] = background[2];
  }
  return img;
}

// Bresenham, `thickness` pixels square brush.
void draw_line(Image8& img, int x0, int y0, int x1, int y1, Rgb c, int thickness = 1) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    fill_rect(img, x0 - thickness / 2, y0 - thickness / 2, thickness, thickness, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

// prefix + number, through snprintf: GCC 12 warns falsely (-Wrestrict) on
// "literal" + std::to_string(n).
std::string numbered(const char* prefix, long long n) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%lld", prefix, n);
  return buf;
}

uint8_t to_u8(double unit) { return uint8_t(std::lround(std::clamp(unit, 0.0, 1.0) * 255.0)); }

}  // namespace

int text_width(const std::string& text, int pixel_size) { return TextRenderer::shared().width(text, pixel_size); }

int draw_text(Image8& img, int x, int y, const std::string& text, Rgb colour, int pixel_size) {
  return TextRenderer::shared().draw(img, x, y, text, colour, pixel_size);
}

Rgb mode_colour(const std::string& name, std::size_t index) {
  if (name == "w8a16") return {31, 119, 180};  // blue
  if (name == "w8a8") return {214, 39, 40};    // red
  if (name == "mixed") return {44, 160, 44};   // green
  static const Rgb others[] = {{255, 127, 14}, {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};
  return others[index % std::size(others)];
}

Image8 compare_grid(const CompareSetup& setup, const CompareRun& run) {
  const auto [C, T, H, W] = setup.latent_shape;
  const int disp_w = int(W * T), disp_h = int(H);
  const int scale = std::clamp(96 / std::max(disp_w, disp_h), 1, 8);
  const int cell_w = disp_w * scale, cell_h = disp_h * scale, pad = 4, header = 18;
  const std::size_t modes = run.modes.size();
  int col_w = cell_w;
  for (const CompareMode& m : run.modes) col_w = std::max(col_w, text_width(m.name) + 2);
  const std::string gain_label = numbered("diff x", std::llround(setup.diff_gain));
  const int label_w =
      std::max(text_width(numbered("prompt ", (long long)setup.prompts.size())), text_width(gain_label)) + 2 * pad;
  const int rows = int(setup.prompts.size()) * 2;
  Image8 img = canvas(label_w + int(modes) * (col_w + pad) + pad, header + rows * (cell_h + pad) + pad, {40, 40, 40});
  const Rgb ink{230, 230, 230};

  for (std::size_t m = 0; m < modes; ++m)
    draw_text(img, label_w + int(m) * (col_w + pad), 1, run.modes[m].name,
              m == 0 ? ink : mode_colour(run.modes[m].name, m));

  const bool rgb = C == 3;
  auto value = [&](const std::vector<float>& out, int64_t c, int64_t t, int64_t h, int64_t w) {
    return std::clamp(double(out[std::size_t(((c * T + t) * H + h) * W + w)]), -1.0, 1.0) * 0.5 + 0.5;
  };
  for (std::size_t p = 0; p < setup.prompts.size(); ++p) {
    const std::size_t image = p * std::size_t(setup.seeds);  // seed 0 of prompt p
    const int y_img = header + int(p) * 2 * (cell_h + pad), y_diff = y_img + cell_h + pad;
    draw_text(img, pad, y_img + cell_h / 2 - 8, numbered("prompt ", (long long)p + 1), ink);
    draw_text(img, pad, y_diff + cell_h / 2 - 8, gain_label, ink);
    const std::vector<float>& ref = run.outputs[0][image];
    for (std::size_t m = 0; m < modes; ++m) {
      const std::vector<float>& out = run.outputs[m][image];
      const int x0 = label_w + int(m) * (col_w + pad);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            Rgb px, dx;
            if (rgb) {
              for (int c = 0; c < 3; ++c) {
                px[c] = to_u8(value(out, c, t, h, w));
                dx[c] = to_u8(std::fabs(value(out, c, t, h, w) - value(ref, c, t, h, w)) * setup.diff_gain);
              }
            } else {
              double diff = 0;
              for (int64_t c = 0; c < C; ++c) diff += std::fabs(value(out, c, t, h, w) - value(ref, c, t, h, w));
              px.fill(to_u8(value(out, 0, t, h, w)));
              dx.fill(to_u8(diff / double(C) * setup.diff_gain));
            }
            const int x = x0 + int(t * W + w) * scale, y = int(h) * scale;
            fill_rect(img, x, y_img + y, scale, scale, px);
            if (m > 0) fill_rect(img, x, y_diff + y, scale, scale, dx);
          }
    }
  }
  return img;
}

Image8 step_error_plot(const json& report) {
  const int width = 760, height = 440, left = 70, right = 560, top = 40, bottom = 390;
  Image8 img = canvas(width, height, {255, 255, 255});
  const Rgb axis{60, 60, 60}, grid{220, 220, 220};
  const int steps = report.at("steps").get<int>();

  struct Curve {
    std::string name;
    Rgb colour;
    std::vector<double> values;  // +inf for null (division by a zero reference)
  };
  std::vector<Curve> curves;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool any_zero = false;
  const json& modes = report.at("modes");
  for (std::size_t m = 0; m < modes.size(); ++m) {
    if (modes[m]["step_error"].is_null()) continue;
    const std::string name = modes[m]["name"].get<std::string>();
    Curve c{name, mode_colour(name, m), {}};
    for (const json& v : modes[m]["step_error"]["mean"]) {
      const double x = v.is_number() ? v.get<double>() : std::numeric_limits<double>::infinity();
      c.values.push_back(x);
      any_zero |= x == 0;
      if (x > 0 && std::isfinite(x)) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
    }
    curves.push_back(std::move(c));
  }
  int dec_lo = -6, dec_hi = 0;
  if (std::isfinite(lo)) {
    dec_lo = int(std::floor(std::log10(lo)));
    dec_hi = std::max(dec_lo + 1, int(std::ceil(std::log10(hi))));
  }
  auto y_of = [&](double v) {
    if (!(v > 0)) return bottom;  // zero error: drawn on the bottom axis
    if (!std::isfinite(v)) return top;
    const double f = (std::log10(v) - dec_lo) / double(dec_hi - dec_lo);
    return int(std::lround(bottom - std::clamp(f, 0.0, 1.0) * (bottom - top)));
  };
  auto x_of = [&](int s) {
    return steps <= 1 ? (left + right) / 2 : int(std::lround(left + double(s) / (steps - 1) * (right - left)));
  };

  draw_text(img, left, 10, "Relative latent error vs reference, per step", axis, 15);
  for (int d = dec_lo; d <= dec_hi; ++d) {
    const int y = y_of(std::pow(10.0, d));
    draw_line(img, left, y, right, y, grid);
    const std::string label = numbered("1e", d);
    draw_text(img, left - 8 - text_width(label), y - 8, label, axis);
  }
  const int tick = steps <= 12 ? 1 : (steps + 9) / 10;
  for (int s = 0; s < steps; ++s) {
    if (s % tick != 0 && s != steps - 1) continue;
    const int x = x_of(s);
    draw_line(img, x, bottom, x, bottom + 4, axis);
    const std::string label = std::to_string(s);
    draw_text(img, x - text_width(label) / 2, bottom + 8, label, axis);
  }
  draw_text(img, (left + right) / 2 - text_width("denoising step") / 2, bottom + 26, "denoising step", axis);
  if (any_zero) draw_text(img, right + 20, bottom - 14, "zero error: on the step axis", axis, 11);
  draw_line(img, left, top, left, bottom, axis);
  draw_line(img, left, bottom, right, bottom, axis);

  for (const Curve& c : curves) {
    for (int s = 0; s < int(c.values.size()); ++s) {
      const int x = x_of(s), y = y_of(c.values[std::size_t(s)]);
      fill_rect(img, x - 2, y - 2, 5, 5, c.colour);
      if (s > 0) draw_line(img, x_of(s - 1), y_of(c.values[std::size_t(s - 1)]), x, y, c.colour, 2);
    }
  }
  int y = top;
  for (const Curve& c : curves) {
    fill_rect(img, right + 20, y, 14, 14, c.colour);
    draw_text(img, right + 40, y - 1, c.name, axis);
    y += 22;
  }
  return img;
}

}  // namespace stepmix
