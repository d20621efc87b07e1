#include "command_line.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actmem/util/error.h"
#include "actmem/util/suggest.h"
#include "standard_streams.h"

namespace actmem::cli {
namespace {

// The command-line option that carries a library argument: "batch" is
// --batch, "mesh_level" --mesh-level; the geometry's arguments are
// shortened as the mesh command spells them.
std::string option_for(const std::string& argument) {
  if (argument == "resolution_deg") return "--resolution";
  if (argument == "radius_query_fraction") return "--radius-fraction";
  std::string option = "--" + argument;
  std::replace(option.begin(), option.end(), '_', '-');
  return option;
}

void print_usage() {
  std::cout << "actmem: activation-memory planner for graph-network weather models\n\n"
               "usage: actmem COMMAND [options]   (actmem COMMAND --help for its options)\n\ncommands:\n";
  for (const auto& command : commands()) std::cout << fmt::format("  {:<10} {}\n", command.name, command.summary);
  std::cout << "\nexit codes: 0 success or fits, 1 does not fit, 2 bad input or usage, 3 internal error\n"
               "limits on what actmem accepts: docs/reliability.md\n";
}

int dispatch(const Args& args) {
  std::vector<std::string> names;
  for (const auto& command : commands()) names.emplace_back(command.name);
  if (args.empty())
    throw UsageError(fmt::format("expected a command: {}; see 'actmem --help'", fmt::join(names, ", ")));
  const std::string& name = args.front();
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage();
    return 0;
  }
  for (const auto& command : commands())
    if (command.name == name) return command.run(Args(args.begin() + 1, args.end()));
  throw UsageError(fmt::format("unknown command '{}'{}; see 'actmem --help'", name, did_you_mean(name, names)));
}

int report(std::ostream& err, const std::string& message, int code) {
  err << "actmem: error: " << one_line(message) << '\n';
  return code;
}

int run_caught(const Args& args, std::ostream& err) {
  try {
    return dispatch(args);
  } catch (const ExitRequest& exit) {
    return exit.code;
  } catch (const InputError& e) {
    return report(err, e.is_argument() ? e.renamed(option_for(e.source())).what() : e.what(), 2);
  } catch (const UsageError& e) {
    return report(err, e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report(err, "out of memory", 3);
  } catch (const std::exception& e) {
    return report(err, std::string{"internal error: "} + e.what(), 3);
  }
}

}  // namespace

int run_command_line(const Args& args, std::ostream& err) {
  const int code = run_caught(args, err);
  // An answer (0 or 1) that did not reach stdout is no answer.
  if (const std::string problem = standard_output_problem(); !problem.empty() && code <= 1)
    return report(err, "cannot write to standard output: " + problem, 2);
  return code;
}

}  // namespace actmem::cli
