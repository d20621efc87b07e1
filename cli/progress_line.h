#pragma once
// One line of progress on stderr while a command works, for a person at a
// terminal: shown only when stderr is a terminal and --quiet was not given
// (never when piped or redirected), rewritten in place, erased at the end.
// While it lives it also shows the library's progress (actmem/util/progress.h)
// on this thread, e.g. the steps of a large geometry computation.

#include <chrono>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "actmem/util/progress.h"

namespace actmem::cli {

// Adds --quiet to a command: no progress line and no notes on stderr.
void add_quiet_option(CLI::App& app, bool& quiet);

class ProgressLine {
 public:
  // `command` prefixes every line ("actmem sweep: …").
  ProgressLine(std::string command, bool quiet);
  ~ProgressLine();  // erases the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool shown() const { return shown_; }
  // "actmem sweep: [3/24] tpu-v4, batch 2, rollout 4 (1.2 s)"
  void update(std::string_view what, int step, int steps);
  // Erases the line (before writing to stdout on the same terminal); the
  // next update draws it again.
  void clear();

 private:
  std::string command_;
  bool shown_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  ScopedProgressObserver observer_;
};

}  // namespace actmem::cli
