#include "actmem/util/error.h"

#include <fmt/format.h>

namespace actmem {
namespace {

std::string compose(const std::string& source, const std::string& field, const std::string& message) {
  std::string text;
  if (!source.empty()) text += source + ": ";
  if (!field.empty()) text += field + ": ";
  return one_line(text + message);
}

// Characters that change how a terminal lays out what follows them: the
// line and paragraph separators, which end a line, and the bidirectional
// formatting characters (marks, embeddings, overrides, isolates), which
// can make text read otherwise than it is stored ("Trojan Source").
bool moves_text(std::uint32_t code) {
  return code == 0x061c || code == 0x200e || code == 0x200f || (code >= 0x2028 && code <= 0x202e) ||
         (code >= 0x2066 && code <= 0x2069);
}

// Length of the valid UTF-8 sequence at text[i] (1 to 4), or 0 when the
// bytes there are not one, or are a control character (C0, DEL or C1) or
// one that moves text (moves_text()).
std::size_t printable_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x20 || lead == 0x7f) return 0;
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0fu;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0u) != 0x80u) return 0;
    code = (code << 6) | (byte(i + k) & 0x3fu);
  }
  static constexpr std::uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  const bool valid = code >= kLeast[length] && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
  const bool c1_control = code >= 0x80 && code <= 0x9f;
  return valid && !c1_control && !moves_text(code) ? length : 0;
}

}  // namespace

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), kMaxMessageBytes) + 4);
  std::size_t fits_with_ellipsis = 0;  // out's length at the last piece that leaves room for "..."
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = printable_sequence(text, i);
    if (length == 0)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
    else
      out.append(text.substr(i, length));
    i += std::max<std::size_t>(length, 1);
    if (out.size() > kMaxMessageBytes) {
      out.resize(fits_with_ellipsis);
      return out + "...";
    }
    if (out.size() <= kMaxMessageBytes - 3) fits_with_ellipsis = out.size();
  }
  return out;
}

InputError::InputError(std::string source, std::string field, std::string message)
    : std::runtime_error(compose(source, field, message)),
      source_(std::move(source)),
      field_(std::move(field)),
      message_(std::move(message)) {}

InputError InputError::argument(std::string name, std::string message) {
  InputError e(std::move(name), "", std::move(message));
  e.argument_ = true;
  return e;
}

InputError InputError::renamed(std::string name) const {
  InputError e(std::move(name), field_, message_);
  e.argument_ = argument_;
  return e;
}

std::string pointer_segment(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

}  // namespace actmem
