#pragma once
// The actmem subcommands and what they share.
//
// Each command is a function from its arguments (everything after the
// command name) to an exit code: 0 success / fits, 1 does not fit, 2 bad
// input or usage. Bad input is reported by throwing actmem::InputError or
// UsageError; main() prints "actmem: error: …" once and exits 2.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

namespace actmem::cli {

using Args = std::vector<std::string>;

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const Args& args);
};

// The command table, in the order `actmem --help` lists it.
const std::vector<Command>& commands();

// A command-line mistake (unknown option, missing value, …).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown to end the program early with a code (e.g. after printing --help).
struct ExitRequest {
  int code;
};

// Parses `args` into `app`. --help prints the help and throws ExitRequest{0};
// any parse error throws UsageError naming the command, and an unknown option
// suggests the closest known one. Option values are checked as they are
// parsed (InputError).
void parse(CLI::App& app, const Args& args);

// For the argument fuzzer (fuzz/cli_arguments_fuzzer.cpp): when on, parse()
// ends every command with ExitRequest{0} once its command line is parsed and
// its values checked, before it reads a file or computes anything.
void stop_after_parsing(bool on);

// A JSON value as text, indented (invalid UTF-8 in strings replaced, never
// an exception); print_json() writes it to stdout with a trailing newline.
std::string dump(const nlohmann::json& value);
void print_json(const nlohmann::json& value);

int run_models(const Args& args);
int run_devices(const Args& args);
int run_rules(const Args& args);
int run_mesh(const Args& args);
int run_simulate(const Args& args);
int run_fit(const Args& args);
int run_plan(const Args& args);
int run_sweep(const Args& args);
int run_report(const Args& args);

}  // namespace actmem::cli
