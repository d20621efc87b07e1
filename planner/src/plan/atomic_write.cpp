// write_file_atomically(), declared in actmem/plan/plan_document.h: output files
// that readers see whole or not at all, and nothing else touched.
//
// - A regular file (or a missing one) is replaced by rename() from a
//   temporary file in the same folder, written and synced first. A symbolic
//   link is followed: its target is replaced, the link stays.
// - A character device or a FIFO (/dev/stdout, /dev/null, a pipe) is
//   written through; a directory, a block device or a socket is refused.
// - The temporary file is an unnamed O_TMPFILE inode that only gets a name
//   for the instant between linkat() and rename(), or, where the file system
//   lacks O_TMPFILE, a named file. Its name holds the writer's pid and fits
//   within NAME_MAX whatever the target's name; temporaries of the same
//   target whose writer is dead (SIGKILL) are removed before each write.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "actmem/plan/plan_document.h"
#include "actmem/util/error.h"

namespace actmem {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kNameMax = 255;       // NAME_MAX on Linux file systems
constexpr std::size_t kTargetPrefix = 180;  // bytes of the target's name kept in a temporary's
constexpr const char* kMarker = ".actmem-tmp.";

[[noreturn]] void fail(const std::string& path, const std::string& what, int error) {
  throw InputError(path, "", fmt::format("{}: {}", what, std::strerror(error)));
}

// ".<start of the target's name>.actmem-tmp.": every temporary of the target
// starts so; the writer's pid and a serial number follow.
std::string temporary_prefix(const fs::path& target) {
  std::string prefix = ".";  // (built in steps: GCC 12 warns falsely on "." + string)
  prefix += target.filename().string().substr(0, kTargetPrefix);
  prefix += kMarker;
  return prefix;
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Removes temporaries of `target` left by writers that no longer run.
void remove_stale_temporaries(const fs::path& folder, const fs::path& target) {
  const std::string prefix = temporary_prefix(target);
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(it->path(), ec);
  }
}

// A fresh temporary name next to `target`.
fs::path temporary_name(const fs::path& folder, const fs::path& target) {
  static std::atomic<std::uint64_t> serial{0};  // threads apart; the pid tells processes apart
  const std::string name = fmt::format("{}{}.{}", temporary_prefix(target), ::getpid(), ++serial);
  return folder / name.substr(0, kNameMax);
}

// Gives the written, synced file `fd` the name `target` atomically. With
// `unnamed` (O_TMPFILE) it is first linked under a temporary name.
bool publish(int fd, bool unnamed, const fs::path& temporary, const fs::path& target) {
  if (unnamed) {
    const std::string self = fmt::format("/proc/self/fd/{}", fd);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temporary.c_str(), AT_SYMLINK_FOLLOW) != 0) return false;
  }
  if (std::rename(temporary.c_str(), target.c_str()) == 0) return true;
  const int error = errno;
  ::unlink(temporary.c_str());
  errno = error;
  return false;
}

// Writes `text` to a new file in `folder` and renames it onto `target`.
// Returns errno, 0 on success.
int replace(const fs::path& folder, const fs::path& target, const std::string& text, bool try_unnamed) {
  const fs::path temporary = temporary_name(folder, target);
  int fd = try_unnamed ? ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644) : -1;
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = ::open(temporary.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ::fchmod(fd, 0644);  // a plan is meant to be shared, whatever the umask
  bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  int error = ok ? 0 : errno;
  ok = ok && publish(fd, unnamed, temporary, target);
  if (!ok && error == 0) error = errno;
  ::close(fd);
  if (!ok && !unnamed) ::unlink(temporary.c_str());
  // Without /proc, linkat() of an O_TMPFILE fails: write a named file instead.
  if (!ok && unnamed && error == ENOENT) return replace(folder, target, text, false);
  return ok ? 0 : error;
}

void write_through(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open for writing", errno);
  const bool ok = write_all(fd, text);
  const int error = errno;
  if (::close(fd) != 0 || !ok) fail(path, "cannot write", ok ? errno : error);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  if (path.empty()) throw InputError(path, "", "expected a file name, got an empty one");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return write_through(path, text);
    if (S_ISDIR(st.st_mode)) throw InputError(path, "", "is a directory");
    if (!S_ISREG(st.st_mode)) throw InputError(path, "", "is not a regular file; refusing to replace it");
  } else if (errno != ENOENT) {
    fail(path, "cannot write", errno);
  } else if (::lstat(path.c_str(), &st) == 0) {
    throw InputError(path, "", "is a symbolic link to a missing file; refusing to replace the link");
  }
  // A symbolic link's target is replaced; the link stays.
  fs::path target = path;
  if (std::error_code ec; fs::is_symlink(path, ec)) {
    target = fs::canonical(path, ec);
    if (ec) fail(path, "cannot resolve the symbolic link", ec.value());
  }
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  remove_stale_temporaries(folder, target);
  if (const int error = replace(folder, target, text, true); error != 0) fail(path, "cannot write", error);
}

}  // namespace actmem
