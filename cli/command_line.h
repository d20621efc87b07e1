#pragma once
// One actmem command line, run as the `actmem` program runs it (main.cpp)
// and as the argument fuzzer does (fuzz/cli_arguments_fuzzer.cpp).

#include <ostream>

#include "commands.h"

namespace actmem::cli {

// Runs the words after the program name and returns the exit code: 0
// success or fits, 1 does not fit, 2 bad input or usage (also output that
// cannot be written), 3 an internal error. Errors are one printable line
// "actmem: error: …" on `err`.
int run_command_line(const Args& args, std::ostream& err);

}  // namespace actmem::cli
