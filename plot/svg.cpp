#include "plot/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.hpp"
#include "util/format.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

// Coordinates to a tenth of a pixel: enough on screen, and it keeps files small. Pictures map
// data onto their frames with finite arithmetic; a coordinate beyond a million pixels is
// off any screen and is drawn there, and one that is not a number is tetra's bug, refused
// rather than written.
std::string px(double v) {
  check(!std::isnan(v), "svg: a coordinate that is not a number");
  return short_number(std::clamp(v, -1e6, 1e6), 1);
}

std::string attributes(const SvgAttrs& attrs) {
  std::string out;
  for (const auto& [k, v] : attrs) out += " " + k + "=\"" + xml_escape(v) + "\"";
  return out;
}

}  // namespace

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, const std::string& fill,
               const SvgAttrs& attrs, const std::string& title) {
  body_ += "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(w, 0.0)) +
           "\" height=\"" + px(std::max(h, 0.0)) + "\" fill=\"" + fill + "\"" + attributes(attrs);
  body_ += title.empty() ? "/>\n" : "><title>" + xml_escape(title) + "</title></rect>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               const std::string& dash) {
  body_ += "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" +
           px(y2) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + px(width) + "\"" +
           (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                   double width) {
  std::string pts;
  for (const auto& [x, y] : points) {
    if (!pts.empty()) pts += ' ';
    pts.append(px(x)).append(1, ',').append(px(y));
  }
  body_ += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + stroke +
           "\" stroke-width=\"" + px(width) + "\" stroke-linejoin=\"round\"/>\n";
}

void Svg::text(double x, double y, const std::string& text, const TextStyle& s) {
  body_ += "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" font-size=\"" + px(s.size) +
           "\" text-anchor=\"" + s.anchor + "\" fill=\"" + s.fill + "\"" +
           (s.bold ? " font-weight=\"bold\"" : "") + ">" + xml_escape(text) + "</text>\n";
}

void Svg::begin_group(const SvgAttrs& attrs) {
  body_ += "<g" + attributes(attrs) + ">\n";
  ++open_groups_;
}

void Svg::end_group() {
  check(open_groups_ > 0, "svg: end_group without begin_group");
  body_ += "</g>\n";
  --open_groups_;
}

std::string Svg::str() const {
  check(open_groups_ == 0, "svg: ", open_groups_, " group(s) left open");
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width_) + "\" height=\"" +
         px(height_) + "\" viewBox=\"0 0 " + px(width_) + " " + px(height_) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         body_ + "</svg>\n";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string micro_batch_color(int mb) {
  // Ten hues that stay apart for the color-blind as far as ten can (Tableau's order).
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[((mb % 10) + 10) % 10];
}

std::string forward_color(int mb) {
  // Halfway to white.
  const std::string c = micro_batch_color(mb);
  char out[8];
  int rgb[3];
  for (int i = 0; i < 3; ++i) rgb[i] = std::stoi(c.substr(1 + 2 * i, 2), nullptr, 16);
  std::snprintf(out, sizeof out, "#%02x%02x%02x", (rgb[0] + 255) / 2, (rgb[1] + 255) / 2,
                (rgb[2] + 255) / 2);
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count, double min_step) {
  if (!(hi > lo)) hi = lo + 1;
  // Each end divided first: hi - lo itself may overflow (from -1e308 to 1e308).
  const double raw = hi / std::max(count, 1) - lo / std::max(count, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * mag >= raw) {
      step = f * mag;
      break;
    }
  step = std::max(step, min_step);
  // Counted, not stepped: where step is below the resolution of lo (a step number of 1e17),
  // t += step would not move. At most count + 1 ticks fit; rounding may add one.
  std::vector<double> ticks;
  const double first = std::ceil(lo / step) * step;
  for (int i = 0; i <= count + 1; ++i) {
    const double t = first + i * step;
    if (!std::isfinite(t) || !(t - hi <= 1e-9 * step)) break;  // hi + slack may overflow
    if (!ticks.empty() && t <= ticks.back()) continue;
    ticks.push_back(std::abs(t) < 1e-12 * step ? 0.0 : t);
  }
  return ticks;
}

std::string short_number(double x, int digits) {
  // Where fixed notation would show more digits than anyone reads, or none of a value that is
  // not zero: four significant digits with an exponent ("1e+308", "3e-300").
  const double a = std::abs(x);
  if (!std::isfinite(x) || a >= 1e9 || (a > 0 && a < 0.5 * std::pow(10.0, -digits)))
    return format_number("%.4g", x);
  std::string s = format_number(("%." + std::to_string(digits) + "f").c_str(), x);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

void write_svg(const std::string& path, const std::string& svg) {
  std::string problem = output_file_problem(path);
  check(problem.empty(), "cannot write '", path, "': ", problem);
  problem = replace_file(path, svg);
  check(problem.empty(), "cannot write '", path, "': ", problem);
}

}  // namespace tetra
