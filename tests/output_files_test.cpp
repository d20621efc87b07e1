// write_file_atomically() (src/atomic_write.cpp): what it does to what is
// already at the path, how long names may be, and which temporary files
// outlive it (none, not even those of a killed writer).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actmem/plan/plan_document.h"
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

TEST_SUITE("atomic write") {
  TEST_CASE("atomic write: a new file, then a replacement, with no temporary left") {
    const Folder folder;
    const fs::path target = folder.path / "plan.json";
    write_file_atomically(target.string(), "one");
    write_file_atomically(target.string(), "two");
    CHECK(read(target) == "two");
    CHECK((fs::status(target).permissions() & fs::perms::others_read) != fs::perms::none);
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("atomic write: a 250-character name works (the temporary's name stays within NAME_MAX)") {
    const Folder folder;
    const fs::path target = folder.path / (std::string(245, 'p') + ".json");
    write_file_atomically(target.string(), "long");
    CHECK(read(target) == "long");
    CHECK(folder.hidden().empty());
  }

  TEST_CASE("atomic write: a symbolic link stays a link, its target is replaced") {
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

  TEST_CASE("atomic write: devices and FIFOs are written through, never replaced (was: /dev/null replaced by root)") {
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

  TEST_CASE("atomic write: a directory, an empty name or a missing folder is an InputError") {
    const Folder folder;
    CHECK_THROWS_WITH_AS(write_file_atomically(folder.path.string(), "x"), doctest::Contains("is a directory"),
                         InputError);
    CHECK_THROWS_AS(write_file_atomically("", "x"), InputError);
    CHECK_THROWS_AS(write_file_atomically((folder.path / "no" / "such.json").string(), "x"), InputError);
  }

  TEST_CASE("atomic write: temporaries a killed writer left are removed, a live writer's are not") {
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
