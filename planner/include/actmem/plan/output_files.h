#pragma once
// The files a command writes (-o, --svg, --timeline): each seen whole or
// not at all by readers, and all of a command's files written or none.
//
//   OutputFiles out;
//   out.stage("report.html", html);    // checked and written aside
//   out.stage("timeline.svg", svg);    // InputError here: report.html untouched
//   out.publish();                     // both in place
//
// What a path names decides how it is written, judged on what is there
// (a device or FIFO on the descriptor opened), never on the name:
// - one of this process's open descriptors (/dev/stdout, /dev/stderr,
//   /dev/fd/N, /proc/self/fd/N, through any symbolic links): written
//   through that descriptor, whatever it is open on (a terminal, a pipe, a
//   file `>>` appends to), at its offset and with its flags;
// - a character device or a FIFO: written through; a FIFO that no process
//   opens for reading within 10 s (`reader_wait`) is refused, never
//   waited on forever;
// - a regular file, or nothing: a temporary file in the same folder,
//   written and synced at stage(), renamed onto the path at publish(). A
//   symbolic link's target is replaced and the link stays; a replaced file
//   keeps its permissions, a new one gets them from the umask.
// - a directory, a block device, a socket, a symbolic link to nothing:
//   refused.
// Any failure is an InputError(path, "", …). If a stage() fails, or the
// OutputFiles ends before publish(), no path is touched and no temporary is
// left. The temporary is an unnamed O_TMPFILE inode named only between
// linkat() and rename() (a named one where the file system lacks O_TMPFILE);
// its name holds the writer's pid and fits within NAME_MAX whatever the
// target's, and temporaries of the same target whose writer is dead
// (SIGKILL) are removed at stage().

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace actmem {

class OutputFiles {
 public:
  // `reader_wait`: how long to wait for a process to open a FIFO for reading.
  explicit OutputFiles(std::chrono::milliseconds reader_wait = std::chrono::seconds(10));
  ~OutputFiles();  // removes what was staged and not published
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  // Checks what `path` names and, for a file to replace, writes the
  // temporary. InputError(path, "", …) if it cannot be written.
  void stage(const std::string& path, std::string text);

  // Puts every staged file in place (renames first, then the writes
  // through descriptors, devices and FIFOs, in staging order); once.
  // A failure here, rare once everything is staged, is an InputError too.
  void publish();

  struct Output;  // one staged path (output_files.cpp)

 private:
  std::chrono::milliseconds reader_wait_;
  std::vector<std::unique_ptr<Output>> staged_;
};

// One file, as OutputFiles writes it.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace actmem
