#include "actmem/util/progress.h"

#include <utility>

namespace actmem {
namespace {

ProgressObserver& current_observer() {
  thread_local ProgressObserver observer;
  return observer;
}

}  // namespace

ScopedProgressObserver::ScopedProgressObserver(ProgressObserver observer)
    : previous_(std::exchange(current_observer(), std::move(observer))) {}

ScopedProgressObserver::~ScopedProgressObserver() { current_observer() = std::move(previous_); }

void report_progress(std::string_view what, int step, int steps) {
  if (const ProgressObserver& observer = current_observer()) observer(what, step, steps);
}

}  // namespace actmem
