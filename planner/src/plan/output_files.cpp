// OutputFiles and write_file_atomically() (actmem/plan/output_files.h).
#include "actmem/plan/output_files.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "actmem/util/error.h"

namespace actmem {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kNameMax = 255;       // NAME_MAX on Linux file systems
constexpr std::size_t kTargetPrefix = 180;  // bytes of the target's name kept in a temporary's
constexpr const char* kMarker = ".actmem-tmp.";
constexpr int kMaxLinkHops = 40;  // as the kernel's ELOOP

[[noreturn]] void fail(const std::string& path, const std::string& what, int error) {
  throw InputError(path, "", fmt::format("{}: {}", what, std::strerror(error)));
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

// ---- paths that name one of this process's descriptors

// N when `folder` (canonical) is this process's descriptor folder
// (/proc/<pid>/fd or /proc/<pid>/task/<tid>/fd) and `name` is the decimal
// N of a descriptor open in it.
std::optional<int> descriptor_entry(const fs::path& folder, const std::string& name) {
  const std::string self = fmt::format("/proc/{}/", ::getpid());
  const std::string f = folder.string();
  if (!f.starts_with(self) || !f.ends_with("/fd")) return std::nullopt;
  const std::string middle = f.substr(self.size(), f.size() - self.size() - 2);  // "" or "task/<tid>/"
  if (!middle.empty() && (!middle.starts_with("task/") || middle.find('/', 5) != middle.size() - 1))
    return std::nullopt;
  if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int fd = std::stoi(name);
  return ::fcntl(fd, F_GETFD) != -1 ? std::optional<int>(fd) : std::nullopt;
}

// The descriptor `path` names, following symbolic links one at a time and
// stopping at the /proc entry of a descriptor (whose "link" the kernel
// resolves to the open file itself, not to a name that could be replaced).
std::optional<int> descriptor_named(const std::string& path) {
  fs::path at = path;
  for (int hop = 0; hop < kMaxLinkHops; ++hop) {
    std::error_code ec;
    const fs::path folder = fs::canonical(at.has_parent_path() ? at.parent_path() : fs::path("."), ec);
    if (ec) return std::nullopt;
    if (const auto fd = descriptor_entry(folder, at.filename().string())) return fd;
    const fs::path next = fs::read_symlink(at, ec);
    if (ec) return std::nullopt;  // not a link: a file, or nothing
    at = next.is_absolute() ? next : folder / next;
  }
  return std::nullopt;
}

// ---- temporaries

// ".<start of the target's name>.actmem-tmp.": every temporary of the target
// starts so; the writer's pid and a serial number follow.
std::string temporary_prefix(const fs::path& target) {
  std::string prefix = ".";  // (built in steps: GCC 12 warns falsely on "." + string)
  prefix += target.filename().string().substr(0, kTargetPrefix);
  prefix += kMarker;
  return prefix;
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

// A character device or FIFO opened for writing. A FIFO's open waits for
// a reader, forever: here for at most `reader_wait`, then an error.
int open_for_writing_through(const std::string& path, std::chrono::milliseconds reader_wait) {
  const auto deadline = std::chrono::steady_clock::now() + reader_wait;
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != ENXIO) fail(path, "cannot open for writing", errno);
    if (std::chrono::steady_clock::now() >= deadline)
      throw InputError(path, "",
                       fmt::format("is a FIFO that no process opened for reading within {:g} s",
                                   static_cast<double>(reader_wait.count()) / 1000));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

// One staged path: a temporary to rename onto `target`, or text to write
// through a descriptor.
struct OutputFiles::Output {
  std::string path;   // as given, for errors
  int fd = -1;        // the temporary, or the descriptor written through
  bool owned = true;  // fd is ours to close (not the process's own descriptor)
  bool through = false;
  bool unnamed = false;  // an O_TMPFILE inode, named only at publish()
  fs::path temporary, target;
  std::string text;  // for `through`, until publish()

  ~Output() {
    if (fd >= 0 && owned) ::close(fd);
    if (!through && !unnamed && !temporary.empty()) ::unlink(temporary.c_str());
  }

  // Opens a temporary in the target's folder with `mode` (the umask applies
  // to a new file's; a replaced file's is set exactly) and writes `content`.
  void write_temporary(const std::string& content, std::optional<mode_t> mode) {
    const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
    remove_stale_temporaries(folder, target);
    // An O_TMPFILE inode is named through /proc/self/fd: without /proc, a named temporary.
    fd = ::access("/proc/self/fd", X_OK) == 0 ? ::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
    unnamed = fd >= 0;
    if (!unnamed) {
      temporary = temporary_name(folder, target);
      fd = ::open(temporary.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
      if (fd < 0) {
        const int error = errno;
        temporary.clear();
        fail(path, "cannot write", error);
      }
    }
    if (mode && ::fchmod(fd, *mode) != 0) fail(path, "cannot keep the file's permissions", errno);
    if (!write_all(fd, content) || ::fsync(fd) != 0) fail(path, "cannot write", errno);
  }

  // Gives the temporary the target's name.
  void rename_onto_target() {
    if (unnamed) {
      temporary = temporary_name(target.has_parent_path() ? target.parent_path() : fs::path("."), target);
      const std::string self = fmt::format("/proc/self/fd/{}", fd);
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temporary.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        const int error = errno;
        temporary.clear();
        fail(path, "cannot write", error);
      }
      unnamed = false;  // named now: unlinked on failure
    }
    if (std::rename(temporary.c_str(), target.c_str()) != 0) fail(path, "cannot write", errno);
    temporary.clear();
  }
};

OutputFiles::OutputFiles(std::chrono::milliseconds reader_wait) : reader_wait_(reader_wait) {}
OutputFiles::~OutputFiles() = default;

void OutputFiles::stage(const std::string& path, std::string text) {
  if (path.empty()) throw InputError(path, "", "expected a file name, got an empty one");
  if (path.find('\0') != std::string::npos) throw InputError(path, "", "expected a file name without NUL bytes");
  auto out = std::make_unique<Output>();
  out->path = path;
  if (const auto fd = descriptor_named(path)) {
    out->fd = *fd;
    out->owned = false;
    out->through = true;
    out->text = std::move(text);
    staged_.push_back(std::move(out));
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) fail(path, "cannot write", errno);
    if (::lstat(path.c_str(), &st) == 0)
      throw InputError(path, "", "is a symbolic link to a missing file; refusing to replace the link");
    out->target = path;
    out->write_temporary(text, std::nullopt);
  } else if (S_ISREG(st.st_mode)) {
    // A symbolic link's target is replaced; the link stays.
    std::error_code ec;
    out->target = fs::is_symlink(path, ec) ? fs::canonical(path, ec) : fs::path(path);
    if (ec) fail(path, "cannot resolve the symbolic link", ec.value());
    out->write_temporary(text, st.st_mode & 07777);
  } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    out->fd = open_for_writing_through(path, reader_wait_);
    if (::fstat(out->fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
      throw InputError(path, "", "changed while it was opened; refusing to write through it");
    ::fcntl(out->fd, F_SETFL, ::fcntl(out->fd, F_GETFL) & ~O_NONBLOCK);  // writes wait for the reader
    out->through = true;
    out->text = std::move(text);
  } else if (S_ISDIR(st.st_mode)) {
    throw InputError(path, "", "is a directory");
  } else {
    throw InputError(path, "", "is not a regular file; refusing to replace it");
  }
  staged_.push_back(std::move(out));
}

void OutputFiles::publish() {
  for (const auto& out : staged_)
    if (!out->through) out->rename_onto_target();
  for (const auto& out : staged_) {
    if (!out->through) continue;
    if (!out->owned) std::fflush(nullptr);  // what stdio holds for the same descriptor goes first
    if (!write_all(out->fd, out->text)) fail(out->path, "cannot write", errno);
    if (out->owned) {
      const int fd = out->fd;
      out->fd = -1;
      if (::close(fd) != 0) fail(out->path, "cannot write", errno);
    }
  }
  staged_.clear();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  OutputFiles out;
  out.stage(path, text);
  out.publish();
}

}  // namespace actmem
