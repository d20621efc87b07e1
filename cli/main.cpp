// actmem: will this training step fit, and how to make it fit.
// A thin entry point: the command line is run by command_line.cpp over the
// command table in commands.cpp.

#include <iostream>

#include "command_line.h"
#include "standard_streams.h"

int main(int argc, char** argv) {
  actmem::cli::guard_standard_streams();
  return actmem::cli::run_command_line(actmem::cli::Args(argv + 1, argv + argc), std::cerr);
}
