// OutputFiles and write_file_atomically() (src/plan/output_files.cpp): what
// they do to what is already at the path (decided on what is there, not on
// the name), how long names may be, what a failed command leaves (nothing),
// and which temporary files outlive them (none, not even a killed writer's).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "actmem/plan/output_files.h"
#include "actmem/util/error.h"

using namespace actmem;
namespace fs = std::filesystem;

namespace {

// A fresh folder, removed at the end of the test.
struct Folder {
  fs::path path;
  Folder() {
    std::string pattern = (fs::temp_directory_path() / "actmem-write-test.XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~Folder() { fs::remove_all(path); }
  std::vector<std::string> hidden() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.path().filename().string().starts_with(".")) names.push_back(entry.path().filename().string());
    return names;
  }
};

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace

TEST_SUITE("output files") {
  TEST_CASE("output files: a new file, then a replacement, with no temporary left") {
    const Folder folder;
    const fs::path target = folder.path / "plan.json";
    write_file_atomically(target.string(), "one");
    write_file_atomically(target.string(), "two");
    CHECK(read(target) == "two");
    CHECK((fs::status(target).permissions() & fs::perms::others_read) != fs::perms::none);
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("output files: a 250-character name works (the temporary's name stays within NAME_MAX)") {
    const Folder folder;
    const fs::path target = folder.path / (std::string(245, 'p') + ".json");
    write_file_atomically(target.string(), "long");
    CHECK(read(target) == "long");
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("output files: a symbolic link stays a link, its target is replaced") {
    const Folder folder;
    write_file_atomically((folder.path / "real.json").string(), "old");
    fs::create_symlink("real.json", folder.path / "link.json");
    write_file_atomically((folder.path / "link.json").string(), "new");
    CHECK(fs::is_symlink(folder.path / "link.json"));
    CHECK(read(folder.path / "real.json") == "new");
    fs::create_symlink("missing.json", folder.path / "dangling.json");
    CHECK_THROWS_WITH_AS(write_file_atomically((folder.path / "dangling.json").string(), "x"),
                         doctest::Contains("is a symbolic link to a missing file"), InputError);
  }

  TEST_CASE("output files: devices and FIFOs are written through, never replaced (was: /dev/null replaced by root)") {
    const Folder folder;
    // A null device of its own (root only), never /dev/null itself: a
    // regression would replace that for the whole machine.
    const fs::path null = folder.path / "null";
    if (::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) {
      write_file_atomically(null.string(), "discarded");
      CHECK(fs::is_character_file(null));
    }
    const fs::path fifo = folder.path / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string received;
    std::thread reader([&] { received = read(fifo); });
    write_file_atomically(fifo.string(), "through the pipe");
    reader.join();
    CHECK(received == "through the pipe");
    CHECK(fs::is_fifo(fifo));
  }

  TEST_CASE("output files: a FIFO no process reads is refused after the wait, not waited on forever") {
    const Folder folder;
    const fs::path fifo = folder.path / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    OutputFiles out(std::chrono::milliseconds(50));
    CHECK_THROWS_WITH_AS(out.stage(fifo.string(), "x"),
                         doctest::Contains("is a FIFO that no process opened for reading within 0.05 s"), InputError);
  }

  TEST_CASE(
      "output files: a path naming an open descriptor writes through it (was: `-o /dev/stdout >> log` "
      "replaced the log)") {
    const Folder folder;
    const fs::path log = folder.path / "log.txt";
    std::ofstream(log) << "kept\n";
    const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND);  // as the shell's `>> log.txt`
    REQUIRE(fd >= 0);
    const fs::path link = folder.path / "out";
    fs::create_symlink(fmt::format("/dev/fd/{}", fd), link);
    for (const std::string& path : {fmt::format("/proc/self/fd/{}", fd), fmt::format("/dev/fd/{}", fd), link.string()})
      write_file_atomically(path, path + "\n");
    ::close(fd);
    CHECK(read(log) == fmt::format("kept\n/proc/self/fd/{0}\n/dev/fd/{0}\n{1}\n", fd, link.string()));
    CHECK(fs::is_symlink(link));
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("output files: a replaced file keeps its permissions, a new one gets the umask's (were all 0644)") {
    const Folder folder;
    const fs::path secret = folder.path / "secret.json";
    std::ofstream(secret) << "old";
    fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
    write_file_atomically(secret.string(), "new");
    CHECK(read(secret) == "new");
    CHECK(fs::status(secret).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
    const mode_t before = ::umask(027);
    write_file_atomically((folder.path / "fresh.json").string(), "x");
    ::umask(before);
    CHECK(fs::status(folder.path / "fresh.json").permissions() ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  }

  TEST_CASE("output files: one failure leaves every file as it was (was: a failed report replaced its SVG)") {
    const Folder folder;
    const fs::path kept = folder.path / "keep.svg";
    std::ofstream(kept) << "kept";
    {
      OutputFiles out;
      out.stage(kept.string(), "replaced");
      CHECK_THROWS_AS(out.stage((folder.path / "nodir" / "x.html").string(), "html"), InputError);
    }  // never published
    CHECK(read(kept) == "kept");
    CHECK(folder.hidden().empty());
    OutputFiles out;
    out.stage(kept.string(), "one");
    out.stage((folder.path / "two.html").string(), "two");
    CHECK(read(kept) == "kept");  // nothing in place before publish()
    out.publish();
    CHECK(read(kept) == "one");
    CHECK(read(folder.path / "two.html") == "two");
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("output files: a directory, an empty name or a missing folder is an InputError") {
    const Folder folder;
    CHECK_THROWS_WITH_AS(write_file_atomically(folder.path.string(), "x"), doctest::Contains("is a directory"),
                         InputError);
    CHECK_THROWS_AS(write_file_atomically("", "x"), InputError);
    CHECK_THROWS_WITH_AS(write_file_atomically((folder.path / "a").string() + std::string(1, '\0') + "b", "x"),
                         doctest::Contains("expected a file name without NUL bytes"), InputError);
    CHECK_THROWS_AS(write_file_atomically((folder.path / "no" / "such.json").string(), "x"), InputError);
  }

  TEST_CASE("output files: temporaries a killed writer left are removed, a live writer's are not") {
    const Folder folder;
    const fs::path stale = folder.path / (".plan.json.actmem-tmp." + std::to_string(dead_pid()) + ".1");
    const fs::path live = folder.path / (".plan.json.actmem-tmp." + std::to_string(::getpid()) + ".999");
    const fs::path other = folder.path / (".other.json.actmem-tmp." + std::to_string(dead_pid()) + ".1");
    for (const fs::path& p : {stale, live, other}) std::ofstream(p) << "partial";
    write_file_atomically((folder.path / "plan.json").string(), "whole");
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));
    CHECK(fs::exists(other));  // another target's: left to its own writes
  }
}
