// The two pictures of a `stepmix compare` report, drawn without a graphics
// library: RGB Image8 canvases, a 3×5 pixel font for labels (upper-case
// letters, digits, - . : , and space), nearest-neighbour upscaling.
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

// Exposed for tests: draws `text` (upper-cased) at (x, y) with each font
// pixel `scale`×`scale`; returns the width drawn.
int draw_text(Image8& canvas, int x, int y, const std::string& text, Rgb colour, int scale = 2);
int text_width(const std::string& text, int scale = 2);

}  // namespace stepmix
