#pragma once
// Progress of long computations (large geometry), for a person watching.
//
// A caller that wants to hear about progress installs an observer for its
// own thread with ScopedProgressObserver; the library calls it at the start
// of each step of a long computation on that thread: (what, step, steps),
// e.g. ("geometry: grid2mesh radius query", 4, 5). Without an observer
// (the default, and on every other thread) nothing is reported and nothing
// costs. The observer runs on the computing thread and must not throw.

#include <functional>
#include <string_view>

namespace actmem {

using ProgressObserver = std::function<void(std::string_view what, int step, int steps)>;

// Installs `observer` for the calling thread until destroyed; restores the
// one installed before (scopes nest).
class ScopedProgressObserver {
 public:
  explicit ScopedProgressObserver(ProgressObserver observer);
  ~ScopedProgressObserver();
  ScopedProgressObserver(const ScopedProgressObserver&) = delete;
  ScopedProgressObserver& operator=(const ScopedProgressObserver&) = delete;

 private:
  ProgressObserver previous_;
};

// Tells the calling thread's observer, if any, that step `step` of `steps`
// of `what` starts.
void report_progress(std::string_view what, int step, int steps);

}  // namespace actmem
