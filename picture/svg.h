#pragma once
// SVG markup written as text, for pictures that need no script and no
// network: elements are appended in order, attributes are escaped, numbers
// are rounded to 0.1 px. Presentation is in attributes (fill, stroke,
// font-size), not in a style sheet, so an SVG is the same inline in HTML and
// standalone in a file.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace actmem::picture {

using Attributes = std::vector<std::pair<std::string, std::string>>;

// Text with &, <, >, " and ' replaced by entities.
std::string escape_xml(std::string_view text);

// A coordinate: rounded to 0.1, without exponent or trailing zeros ("12.5", "-3", "0").
std::string px(double value);

class SvgWriter {
 public:
  // Opens <svg> of the given size (also its viewBox) with `attributes`.
  SvgWriter(double width, double height, const Attributes& attributes);

  // <tag attributes/>, or with a <title> child (a tooltip) when `title` is not empty.
  void element(std::string_view tag, const Attributes& attributes, std::string_view title = {});
  // <text x y attributes>content</text>.
  void text(double x, double y, std::string_view content, const Attributes& attributes = {});
  // <tag attributes> … until the matching close(); a <title> first when given.
  void open(std::string_view tag, const Attributes& attributes, std::string_view title = {});
  void close();
  // Closes what is open and </svg>; `standalone` adds the XML declaration
  // for a file of its own.
  std::string finish(bool standalone = false);

 private:
  std::string out_;
  std::vector<std::string> open_;
};

}  // namespace actmem::picture
