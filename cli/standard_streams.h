#pragma once
// The process's standard streams: output that cannot be written is an
// error, never a silent success.

#include <string>

namespace actmem::cli {

// Occupies closed standard file descriptors (0, 1, 2) so that no file the
// program opens lands on them: stdin with /dev/null, stdout and stderr with
// /dev/full, so that writing to them fails as writing to a closed one would.
void guard_standard_streams();

// Flushes stdout; "" when everything written reached it, else why not
// ("it is closed", "No space left on device").
std::string standard_output_problem();

}  // namespace actmem::cli
