#include "standard_streams.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <unistd.h>

namespace actmem::cli {
namespace {

bool stdout_was_closed = false;

// Opens `device` on `fd` if `fd` is closed; true if it was.
bool occupy_if_closed(int fd, const char* device, int flags) {
  if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) return false;
  const int opened = ::open(device, flags);
  if (opened >= 0 && opened != fd) {
    ::dup2(opened, fd);
    ::close(opened);
  }
  return true;
}

}  // namespace

void guard_standard_streams() {
  occupy_if_closed(STDIN_FILENO, "/dev/null", O_RDONLY);
  stdout_was_closed = occupy_if_closed(STDOUT_FILENO, "/dev/full", O_WRONLY);
  occupy_if_closed(STDERR_FILENO, "/dev/full", O_WRONLY);
}

std::string standard_output_problem() {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout;
  if (!failed) return "";
  if (stdout_was_closed) return "it is closed";
  return errno != 0 ? std::strerror(errno) : "write error";
}

}  // namespace actmem::cli
