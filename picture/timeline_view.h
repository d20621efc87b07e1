#pragma once
// The memory timeline of one training step as a picture: bytes in use op by
// op through forward, recomputation and backward, stacked by kind, under a
// strip of stage bands coloured by pass, with the budget line and the peak
// marked with its op and stage. Every number shown is the Report's.

#include <cstddef>
#include <string>
#include <vector>

#include "actmem/simulate/report.h"

namespace actmem::picture {

// Ops [first, last) of the timeline drawn as one column of pixels; `shown`
// is the op among them with the most memory in use (the first such), so
// the picture's top edge is the timeline's upper envelope and the peak is
// always drawn exactly.
struct TimelineColumn {
  std::size_t first = 0, last = 0, shown = 0;
};

// At most `max_columns` columns covering every point, in order; one per
// point when there are few enough.
std::vector<TimelineColumn> timeline_columns(const std::vector<TimelinePoint>& points, std::size_t max_columns);

// Consecutive points of one pass, rollout step and stage: [first, last).
struct StageBand {
  std::size_t first = 0, last = 0;
  StepLocation at;  // of the band's first point (its op and block unused)
};
std::vector<StageBand> stage_bands(const std::vector<TimelinePoint>& points);

// The rows as drawn: the report's timeline, except that the row of the op
// at which the peak happens (Report::peak_at) holds the peak's breakdown.
// A timeline row is the memory after its op; the peak can be a transient
// inside it (a gradient sum), which the simulator counts but does not
// record as a row. So the picture's highest point is the peak exactly.
std::vector<TimelinePoint> drawn_points(const Report& report);

// The index of the first point with the most memory in use.
std::size_t peak_index(const std::vector<TimelinePoint>& points);

// "enc", "embed", "p3", "dec", "loss": what a narrow band can show.
std::string short_stage_name(const std::string& stage);

// The picture as an <svg> element (standalone: a file of its own, with the
// XML declaration). The report must hold a timeline (SimulationOptions::
// record_timeline); `subtitle` says whose step it is.
std::string timeline_svg(const Report& report, const std::string& subtitle, bool standalone = false);

}  // namespace actmem::picture
