// A small SVG writer: tetra draws its pictures itself (tetra plot, tetra plan --draw), with
// no plotting dependency; any browser shows the files. Coordinates are pixels, y down.
//
//   Svg svg(600, 300);
//   svg.rect(10, 10, 40, 12, micro_batch_color(2), {{"class", "F"}}, "F mb2 chunk1");
//   svg.text(300, 20, "title", {.size = 14, .anchor = "middle"});
//   write_svg(path, svg.str());
//
// Elements may carry attributes (class, data-*) so that a test can read a picture back.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tetra {

using SvgAttrs = std::vector<std::pair<std::string, std::string>>;

struct TextStyle {
  double size = 11;
  const char* anchor = "start";  // start, middle, end
  const char* fill = "#222";
  bool bold = false;
};

class Svg {
 public:
  Svg(double width, double height);

  // A filled rectangle; `title` (a tooltip in browsers) is left out when empty.
  void rect(double x, double y, double w, double h, const std::string& fill,
            const SvgAttrs& attrs = {}, const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            const std::string& dash = "");
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                double width = 1.5);
  void text(double x, double y, const std::string& text, const TextStyle& style = {});
  // <g> with attributes, closed by end_group(); groups nest.
  void begin_group(const SvgAttrs& attrs);
  void end_group();

  double width() const { return width_; }
  double height() const { return height_; }
  // The document: header, a white background, the elements.
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
  int open_groups_ = 0;
};

// Text with &, <, >, " and ' escaped for XML.
std::string xml_escape(const std::string& s);

// The fill of micro-batch mb: a palette of ten distinct hues, repeating. Forward boxes use it
// lightened (forward_color), backward boxes as it is, so one hue follows a micro-batch.
std::string micro_batch_color(int mb);
std::string forward_color(int mb);

// Round tick values covering [lo, hi], about `count` of them (1, 2 or 5 times a power of 10),
// at least `min_step` apart (1 for steps, which are whole).
std::vector<double> nice_ticks(double lo, double hi, int count = 6, double min_step = 0);

// "12.5" with at most `digits` decimals and no trailing zeros.
std::string short_number(double x, int digits = 2);

// Writes `svg` to `path` through a temporary and a rename; throws tetra::Error (naming the
// path) when it is not a writable regular file or the write fails.
void write_svg(const std::string& path, const std::string& svg);

}  // namespace tetra
