#ifndef SEXTANT_ORCHESTRATOR_REPORT_SVG_CANVAS_H_
#define SEXTANT_ORCHESTRATOR_REPORT_SVG_CANVAS_H_

#include <string>
#include <utility>
#include <vector>

namespace sextant {

// Escapes text for use in XML/HTML character data and attribute values: & < > " ' become
// entities, and control characters other than tab and newline (invalid in XML) become U+FFFD.
std::string EscapeXml(const std::string& text);

// Builds one inline <svg> element as text. Coordinates are pixels from the top left. Every
// string that reaches the output (text, titles, classes, colours) is escaped, so data from a
// run (parameter values, names, messages) cannot inject markup. Numbers are written with at
// most one decimal, which keeps 1,000-trial charts small. Not thread-safe.
class SvgCanvas {
 public:
  // id becomes the svg's id; data_marks counts data-bearing elements and is written as the
  // data-marks attribute (tests and the page's render check read it).
  SvgCanvas(std::string id, int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }

  void Line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double stroke_width = 1, const std::string& dash = "");
  void Rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "", const std::string& stroke = "");
  void Circle(double cx, double cy, double r, const std::string& fill,
              const std::string& title = "", const std::string& stroke = "");
  // An x-shaped mark of half-size r.
  void Cross(double cx, double cy, double r, const std::string& stroke,
             const std::string& title = "");
  // An upward triangle centred on (cx, cy).
  void Triangle(double cx, double cy, double r, const std::string& fill,
                const std::string& title = "");
  void Polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                double stroke_width = 1, double opacity = 1, const std::string& title = "");
  // anchor: start | middle | end. rotate: degrees about (x, y).
  void Text(double x, double y, const std::string& text, const std::string& anchor = "start",
            int size = 11, const std::string& fill = "#333", double rotate = 0);

  // Counts the next mark as data (a point, bar or curve drawn from the run's records).
  void CountData(int n = 1) { data_marks_ += n; }
  int data_marks() const { return data_marks_; }

  // The finished <svg> element.
  std::string Finish() const;

 private:
  std::string id_;
  int width_, height_;
  int data_marks_ = 0;
  std::string body_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_REPORT_SVG_CANVAS_H_
