// The two pictures of a `stepmix compare` report: RGB Image8 canvases,
// nearest-neighbour upscaling, labels drawn with a real font through FreeType
// (eval/text_renderer.hpp; without a font the plots have no labels).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "io/png.hpp"
#include "eval/report.hpp"

namespace stepmix {

using Rgb = std::array<uint8_t, 3>;

// Colour of a mode in the grid headers and the plot: w8a16 blue, w8a8 red,
// mixed green, other modes from a fixed palette by their column index.
Rgb mode_colour(const std::string& name, std::size_t index);

// Rows: per prompt (seed 0), the outputs (columns: reference, then each mode
// with its name above) and below them |mode − reference| · diff_gain on the
// [0, 1] image scale (white = large). Gray/latent outputs show channel 0 and
// the difference averaged over channels; 3-channel outputs show RGB. Frames
// sit side by side.
Image8 compare_grid(const CompareSetup& setup, const CompareRun& run);

// Per-step error curves by mode: x = loop iteration, y = log10 scale with a
// labelled gridline per decade, one polyline per mode, a legend of coloured
// boxes with the mode names. `report` is compare_report_json's output.
Image8 step_error_plot(const nlohmann::json& report);

// Draws UTF-8 `text` with the top of its line at (x, y), `pixel_size` pixels
// high, with the shared renderer; returns the width drawn (0 without a font).
int draw_text(Image8& canvas, int x, int y, const std::string& text, Rgb colour, int pixel_size = 13);
int text_width(const std::string& text, int pixel_size = 13);

}  // namespace stepmix
