#include "svg.h"

#include <cmath>

#include <fmt/format.h>

namespace actmem::picture {
namespace {

void append_attributes(std::string& out, const Attributes& attributes) {
  for (const auto& [name, value] : attributes) {
    out += ' ';
    out += name;
    out += "=\"";
    out += escape_xml(value);
    out += '"';
  }
}

void append_title(std::string& out, std::string_view title) {
  if (title.empty()) return;
  out += "<title>";
  out += escape_xml(title);
  out += "</title>";
}

}  // namespace

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string px(double value) {
  const double rounded = std::round(value * 10.0) / 10.0;
  if (rounded == 0.0) return "0";  // also -0
  std::string text = fmt::format("{:.1f}", rounded);
  if (text.ends_with(".0")) text.resize(text.size() - 2);
  return text;
}

SvgWriter::SvgWriter(double width, double height, const Attributes& attributes) {
  out_ = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}")", px(width),
                     px(height), px(width), px(height));
  append_attributes(out_, attributes);
  out_ += ">\n";
}

void SvgWriter::element(std::string_view tag, const Attributes& attributes, std::string_view title) {
  out_ += '<';
  out_ += tag;
  append_attributes(out_, attributes);
  if (title.empty()) {
    out_ += "/>\n";
    return;
  }
  out_ += '>';
  append_title(out_, title);
  out_ += fmt::format("</{}>\n", tag);
}

void SvgWriter::text(double x, double y, std::string_view content, const Attributes& attributes) {
  out_ += fmt::format(R"(<text x="{}" y="{}")", px(x), px(y));
  append_attributes(out_, attributes);
  out_ += '>';
  out_ += escape_xml(content);
  out_ += "</text>\n";
}

void SvgWriter::open(std::string_view tag, const Attributes& attributes, std::string_view title) {
  out_ += '<';
  out_ += tag;
  append_attributes(out_, attributes);
  out_ += '>';
  append_title(out_, title);
  out_ += '\n';
  open_.emplace_back(tag);
}

void SvgWriter::close() {
  out_ += fmt::format("</{}>\n", open_.back());
  open_.pop_back();
}

std::string SvgWriter::finish(bool standalone) {
  while (!open_.empty()) close();
  out_ += "</svg>\n";
  if (standalone) out_.insert(0, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  return std::move(out_);
}

}  // namespace actmem::picture
