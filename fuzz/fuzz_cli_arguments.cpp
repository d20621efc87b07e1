// The command line: any words (the input split at NUL bytes) are parsed by
// the real commands, which stop once their arguments are checked
// (stop_after_parsing). The exit code is 0 or 2, never 3 (a bug), and an
// error is one printable line "actmem: error: …".
#include <iostream>
#include <sstream>
#include <streambuf>

#include "command_line.h"
#include "fuzz_support.h"

namespace {

// Discards what the commands print (help, usage).
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

actmem::cli::Args words_of(std::string_view text) {
  actmem::cli::Args words;
  std::size_t start = 0;
  while (start <= text.size() && words.size() < 64) {
    const std::size_t end = std::min(text.find('\0', start), text.size());
    words.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static NullBuffer null;
  std::cout.rdbuf(&null);
  actmem::cli::stop_after_parsing(true);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using actmem::fuzz::expect;
  const actmem::cli::Args words = size == 0 ? actmem::cli::Args{} : words_of(actmem::fuzz::text_of(data, size));
  std::ostringstream err;
  const int code = actmem::cli::run_command_line(words, err);
  const std::string message = err.str();
  expect(code == 0 || code == 2, "exit 0 (parsed) or 2 (bad input or usage)");
  if (message.empty()) return 0;
  expect(code == 2, "an error means exit 2");
  const std::string_view prefix = "actmem: error: ";
  expect(message.starts_with(prefix) && message.back() == '\n', "one error line");
  actmem::fuzz::expect_printable(std::string_view(message).substr(prefix.size(), message.size() - prefix.size() - 1));
  return 0;
}
