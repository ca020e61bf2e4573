#include "orchestrator/report/svg_canvas.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sextant {
namespace {

// One decimal is below a pixel's resolution and keeps big charts small.
std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  double r = std::round(v * 10) / 10;
  if (r == std::floor(r)) return absl::StrCat(static_cast<long long>(r));
  return absl::StrFormat("%.1f", r);
}

std::string TitleElement(const std::string& title) {
  return title.empty() ? "" : absl::StrCat("<title>", EscapeXml(title), "</title>");
}

// A self-closing element, or an open/close pair around a <title> (the hover tooltip).
std::string Element(const std::string& tag, const std::string& attrs, const std::string& title) {
  if (title.empty()) return absl::StrCat("<", tag, attrs, "/>");
  return absl::StrCat("<", tag, attrs, ">", TitleElement(title), "</", tag, ">");
}

}  // namespace

std::string EscapeXml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
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
        out += "&#39;";
        break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n') {
          out += "\xEF\xBF\xBD";
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

SvgCanvas::SvgCanvas(std::string id, int width, int height)
    : id_(std::move(id)), width_(width), height_(height) {}

void SvgCanvas::Line(double x1, double y1, double x2, double y2, const std::string& stroke,
                     double stroke_width, const std::string& dash) {
  absl::StrAppend(
      &body_, "<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2), "\" y2=\"", Num(y2),
      "\" stroke=\"", EscapeXml(stroke), "\"",
      stroke_width != 1 ? absl::StrCat(" stroke-width=\"", Num(stroke_width), "\"") : "",
      dash.empty() ? "" : absl::StrCat(" stroke-dasharray=\"", EscapeXml(dash), "\""), "/>");
}

void SvgCanvas::Rect(double x, double y, double w, double h, const std::string& fill,
                     const std::string& title, const std::string& stroke) {
  std::string attrs =
      absl::StrCat(" x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(std::max(w, 0.0)),
                   "\" height=\"", Num(std::max(h, 0.0)), "\" fill=\"", EscapeXml(fill), "\"");
  if (!stroke.empty()) absl::StrAppend(&attrs, " stroke=\"", EscapeXml(stroke), "\"");
  absl::StrAppend(&body_, Element("rect", attrs, title));
}

void SvgCanvas::Circle(double cx, double cy, double r, const std::string& fill,
                       const std::string& title, const std::string& stroke) {
  std::string attrs = absl::StrCat(" cx=\"", Num(cx), "\" cy=\"", Num(cy), "\" r=\"", Num(r),
                                   "\" fill=\"", EscapeXml(fill), "\"");
  if (!stroke.empty()) absl::StrAppend(&attrs, " stroke=\"", EscapeXml(stroke), "\"");
  absl::StrAppend(&body_, Element("circle", attrs, title));
}

void SvgCanvas::Cross(double cx, double cy, double r, const std::string& stroke,
                      const std::string& title) {
  std::string d =
      absl::StrCat("M", Num(cx - r), " ", Num(cy - r), "L", Num(cx + r), " ", Num(cy + r), "M",
                   Num(cx - r), " ", Num(cy + r), "L", Num(cx + r), " ", Num(cy - r));
  absl::StrAppend(&body_, Element("path",
                                  absl::StrCat(" d=\"", d, "\" stroke=\"", EscapeXml(stroke),
                                               "\" stroke-width=\"2\""),
                                  title));
}

void SvgCanvas::Triangle(double cx, double cy, double r, const std::string& fill,
                         const std::string& title) {
  std::string pts = absl::StrCat(Num(cx), ",", Num(cy - r), " ", Num(cx + r), ",", Num(cy + r), " ",
                                 Num(cx - r), ",", Num(cy + r));
  absl::StrAppend(
      &body_, Element("polygon",
                      absl::StrCat(" points=\"", pts, "\" fill=\"", EscapeXml(fill), "\""), title));
}

void SvgCanvas::Polyline(const std::vector<std::pair<double, double>>& points,
                         const std::string& stroke, double stroke_width, double opacity,
                         const std::string& title) {
  if (points.empty()) return;
  std::string pts;
  pts.reserve(points.size() * 10);
  for (size_t i = 0; i < points.size(); ++i) {
    absl::StrAppend(&pts, i ? " " : "", Num(points[i].first), ",", Num(points[i].second));
  }
  std::string attrs =
      absl::StrCat(" points=\"", pts, "\" fill=\"none\" stroke=\"", EscapeXml(stroke), "\"");
  if (stroke_width != 1) absl::StrAppend(&attrs, " stroke-width=\"", Num(stroke_width), "\"");
  if (opacity < 1)
    absl::StrAppend(&attrs, " stroke-opacity=\"", absl::StrFormat("%.2f", opacity), "\"");
  absl::StrAppend(&body_, Element("polyline", attrs, title));
}

void SvgCanvas::Text(double x, double y, const std::string& text, const std::string& anchor,
                     int size, const std::string& fill, double rotate) {
  absl::StrAppend(&body_, "<text x=\"", Num(x), "\" y=\"", Num(y), "\"",
                  anchor == "start" ? "" : absl::StrCat(" text-anchor=\"", EscapeXml(anchor), "\""),
                  size == 11 ? "" : absl::StrCat(" font-size=\"", size, "\""),
                  fill == "#333" ? "" : absl::StrCat(" fill=\"", EscapeXml(fill), "\""),
                  rotate == 0 ? ""
                              : absl::StrCat(" transform=\"rotate(", Num(rotate), " ", Num(x), " ",
                                             Num(y), ")\""),
                  ">", EscapeXml(text), "</text>");
}

std::string SvgCanvas::Finish() const {
  return absl::StrCat("<svg class=\"chart\" id=\"", EscapeXml(id_), "\" data-marks=\"", data_marks_,
                      "\" width=\"", width_, "\" height=\"", height_, "\" viewBox=\"0 0 ", width_,
                      " ", height_,
                      "\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" "
                      "font-size=\"11\">",
                      body_, "</svg>");
}

}  // namespace sextant
