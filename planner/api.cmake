# The library API for schedulers (docs/api.md): the umbrella header
# actmem/actmem.h, fits(), plan <-> JSON documents; and the ThreadSanitizer
# option its thread-safety test runs under. Included by planner/CMakeLists.txt.
target_sources(actmem PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/fit.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/plan_json.cpp)
include(${PROJECT_SOURCE_DIR}/cmake/sanitizers.cmake)
