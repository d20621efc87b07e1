#include "progress_line.h"

#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

namespace actmem::cli {

void add_quiet_option(CLI::App& app, bool& quiet) {
  app.add_flag("-q,--quiet", quiet, "no progress line and no notes on stderr (progress shows only on a terminal)");
}

ProgressLine::ProgressLine(std::string command, bool quiet)
    : command_(std::move(command)),
      shown_(!quiet && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      observer_(
          shown_ ? ProgressObserver([this](std::string_view what, int step, int steps) { update(what, step, steps); })
                 : ProgressObserver()) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void ProgressLine::update(std::string_view what, int step, int steps) {
  if (!shown_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // \r and "erase to end of line": the next update overwrites this one.
  fmt::print(stderr, "\r\033[K{}: [{}/{}] {} ({:.1f} s)", command_, step, steps, what, seconds);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace actmem::cli
