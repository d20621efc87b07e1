#include "util/json_text.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"

namespace actmem::detail {
namespace {

using json = nlohmann::json;

// Builds the document from the parser's events (nlohmann's own DOM builder
// cannot bound the depth or say where a number overflowed). Throws
// InputError; never returns false.
class BoundedDocument final : public nlohmann::json_sax<json> {
 public:
  BoundedDocument(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  json take() { return std::move(root_); }

  bool null() override { return add(nullptr); }
  bool boolean(bool value) override { return add(value); }
  bool number_integer(number_integer_t value) override { return add(value); }
  bool number_unsigned(number_unsigned_t value) override { return add(value); }
  bool number_float(number_float_t value, const string_t&) override { return add(value); }
  bool string(string_t& value) override { return add(std::move(value)); }
  bool binary(binary_t&) override { return add(nullptr); }  // not produced by JSON text
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& name) override {
    key_ = std::move(name);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) override {
    if (e.id == 406)  // out_of_range: a number beyond float64
      throw InputError(source_, pointer_here(), fmt::format("number out of range: {}", token));
    throw InputError(location_of(position), "", "invalid JSON: " + reason(e.what()));
  }

 private:
  // Adds a value at the current place: the root, the next item of an
  // array, or the member named by the last key.
  json& place(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return parent.back();
    }
    json& member = parent[key_];
    member = std::move(value);
    return member;
  }
  bool add(json&& value) {
    count();
    place(std::move(value));
    return true;
  }
  bool open(json&& container) {
    count();
    if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      throw InputError(source_, pointer_here(),
                       fmt::format("arrays and objects nested more than {} levels deep", kMaxJsonDepth));
    path_.push_back(segment_here());
    open_.push_back(&place(std::move(container)));
    return true;
  }
  bool close() {
    open_.pop_back();
    path_.pop_back();
    return true;
  }

  // Counts the value about to be added.
  void count() {
    if (++values_ > kMaxJsonValues)
      throw InputError(
          source_, pointer_here(),
          fmt::format("more than {} values in one document; actmem's documents hold far fewer", kMaxJsonValues));
  }

  // The pointer segment of the value about to be added.
  std::string segment_here() const {
    if (open_.empty()) return "";
    const json& parent = *open_.back();
    return parent.is_array() ? std::to_string(parent.size()) : pointer_segment(key_);
  }
  std::string pointer_here() const {
    std::string pointer;
    for (std::size_t i = 1; i < path_.size(); ++i) pointer += "/" + path_[i];
    if (!open_.empty()) pointer += "/" + segment_here();
    return pointer;
  }

  // "source:line:column" of the byte just past the offending character.
  std::string location_of(std::size_t position) const {
    std::size_t line = 1, column = 1;
    const std::size_t end = std::min<std::size_t>(position > 0 ? position - 1 : 0, text_.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fmt::format("{}:{}:{}", source_, line, column);
  }
  static std::string reason(std::string what) {
    if (const auto cut = what.find("syntax error"); cut != std::string::npos) return what.substr(cut);
    return what;
  }

  std::string_view text_;
  const std::string& source_;
  json root_;
  std::vector<json*> open_;        // the arrays and objects being filled, outermost first
  std::vector<std::string> path_;  // their pointer segments ("" for the root)
  std::string key_;
  std::int64_t values_ = 0;  // placed so far
};

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  BoundedDocument document(text, source);
  json::sax_parse(text.begin(), text.end(), &document);
  return document.take();
}

bool names_regular_file(const std::string& path) {
  std::error_code ec;
  return path.find('\0') == std::string::npos && std::filesystem::is_regular_file(path, ec);
}

nlohmann::json read_json_file(const std::string& path) {
  if (path.find('\0') != std::string::npos) throw InputError(path, "", "expected a file name without NUL bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file for reading");
  std::string text;
  std::vector<char> chunk(1 << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > static_cast<std::size_t>(kMaxJsonFileBytes))
      throw InputError(
          path, "",
          fmt::format("file larger than {} MiB; actmem's JSON files are far smaller", kMaxJsonFileBytes >> 20));
  }
  if (in.bad()) throw InputError(path, "", "cannot read the file");
  return parse_json(text, path);
}

}  // namespace actmem::detail
