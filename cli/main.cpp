// actmem: will this training step fit, and how to make it fit.
// A thin dispatcher over the library: the command table lives in commands.cpp.

#include <exception>
#include <iostream>

#include <fmt/format.h>

#include "actmem/error.h"
#include "actmem/suggest.h"
#include "commands.h"

namespace {

void print_usage() {
  std::cout << "actmem: activation-memory planner for graph-network weather models\n\n"
               "usage: actmem COMMAND [options]   (actmem COMMAND --help for its options)\n\ncommands:\n";
  for (const auto& command : actmem::cli::commands())
    std::cout << fmt::format("  {:<10} {}\n", command.name, command.summary);
  std::cout << "\nexit codes: 0 success or fits, 1 does not fit, 2 bad input or usage\n";
}

int dispatch(int argc, char** argv) {
  using namespace actmem::cli;
  if (argc < 2) {
    print_usage();
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage();
    return 0;
  }
  std::vector<std::string> names;
  for (const auto& command : commands()) {
    if (command.name == name) return command.run(Args(argv + 2, argv + argc));
    names.emplace_back(command.name);
  }
  throw UsageError(fmt::format("unknown command '{}'{}; see 'actmem --help'", name, actmem::did_you_mean(name, names)));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const actmem::cli::ExitRequest& exit) {
    return exit.code;
  } catch (const actmem::InputError& e) {
    std::cerr << "actmem: error: " << e.what() << '\n';
    return 2;
  } catch (const actmem::cli::UsageError& e) {
    std::cerr << "actmem: error: " << e.what() << '\n';
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "actmem: error: out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "actmem: error: internal error: " << e.what() << '\n';
    return 3;
  }
}
