// The report's options: `actmem report` command lines run to the end (the
// figures gathered, the pages drawn, the files written) on a model small
// enough that a report takes milliseconds. The words (the input split at
// NUL bytes) are the options; the exit code is 0, 1 or 2, never 3 (a bug);
// an error is one printable line "actmem: error: …"; and a report that
// fails writes nothing: the folder holds after it what it held before.
//
// Bounded by the harness, not by the input: the model is always the micro
// model below (--model and its value are dropped), and any word holding a
// '/' is dropped, so that every file the command reads or writes is in the
// harness's own fresh folder; a rollout above 4 is read as 4 (a long
// rollout of even the micro model takes seconds under the sanitizers).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "command_line.h"
#include "fuzz_support.h"

namespace {

namespace fs = std::filesystem;

// 1 processor step: PhysicsNeMo's export has no setting for it.
constexpr const char* kMicroModel =
    R"({"name": "micro", "architecture": "graphcast", "grid_nodes": 40, "mesh_nodes": 12, "grid2mesh_edges": 60,
        "mesh_edges": 60, "mesh2grid_edges": 120, "latent_size": 4, "mlp_hidden_layers": 1, "processor_steps": 1,
        "grid_input_features": 20, "mesh_input_features": 20, "edge_features": 2, "output_features": 2})";

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

// The files of the folder with their contents.
std::vector<std::pair<std::string, std::string>> files_in(const fs::path& folder) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    out.emplace_back(entry.path().filename().string(), text.str());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A rollout value as the harness bounds it: a number above 4 is 4.
std::string bounded_rollout(const std::string& value) {
  const bool number = !value.empty() && value.size() < 18 && value.find_first_not_of("0123456789") == std::string::npos;
  return number && std::stoll(value) > 4 ? "4" : value;
}

actmem::cli::Args words_of(std::string_view text) {
  actmem::cli::Args words{"report", "--model", "micro.json", "--quiet"};
  std::size_t start = 0;
  enum class Next { word, dropped, rollout } next = Next::word;
  while (start <= text.size() && words.size() < 64) {
    const std::size_t end = std::min(text.find('\0', start), text.size());
    std::string word(text.substr(start, end - start));
    start = end + 1;
    const Next was = std::exchange(next, Next::word);
    if (was == Next::dropped || word.find('/') != std::string::npos) continue;
    if (was == Next::rollout) word = bounded_rollout(word);
    if (word == "--model" || word.starts_with("--model=")) {
      next = word == "--model" ? Next::dropped : Next::word;
      continue;
    }
    if (word == "--rollout") next = Next::rollout;
    if (word.starts_with("--rollout=")) word = "--rollout=" + bounded_rollout(word.substr(10));
    words.push_back(word);
  }
  return words;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static NullBuffer null;
  std::cout.rdbuf(&null);
  const int devnull = ::open("/dev/null", O_WRONLY);  // what `-o -` writes goes nowhere
  ::dup2(devnull, STDOUT_FILENO);
  return 0;
}

// The harness's own folder as the working directory while a command runs,
// and libFuzzer's again after it (the corpus and findings are relative).
class InFolder {
 public:
  InFolder() : before_(fs::current_path()) {
    static const fs::path folder = [] {
      std::string pattern = (fs::temp_directory_path() / "actmem-fuzz-report.XXXXXX").string();
      return fs::path(::mkdtemp(pattern.data()));
    }();
    fs::current_path(folder);
  }
  ~InFolder() { fs::current_path(before_); }
  InFolder(const InFolder&) = delete;
  InFolder& operator=(const InFolder&) = delete;

 private:
  fs::path before_;
};

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using actmem::fuzz::expect;
  const InFolder in_folder;
  // A fresh folder each time: the micro model alone (a report may have been written over it).
  for (const auto& entry : fs::directory_iterator(fs::current_path())) fs::remove_all(entry.path());
  std::ofstream("micro.json") << kMicroModel;
  const auto before = files_in(fs::current_path());
  std::ostringstream err;
  const int code = actmem::cli::run_command_line(words_of(actmem::fuzz::text_of(data, size)), err);
  const std::string message = err.str();
  expect(code >= 0 && code <= 2, "exit 0 (fits), 1 (does not fit) or 2 (bad input or usage)");
  if (code == 2) {
    const std::string_view prefix = "actmem: error: ";
    expect(message.starts_with(prefix) && message.back() == '\n', "one error line");
    actmem::fuzz::expect_printable(std::string_view(message).substr(prefix.size(), message.size() - prefix.size() - 1));
    expect(files_in(fs::current_path()) == before, "a failed report writes nothing");
  }
  return 0;
}
