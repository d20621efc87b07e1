# Sources of the solver (docs/solver.md); included by planner/CMakeLists.txt.
target_sources(actmem PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/inner_region_program.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/region_program.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/search_context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/solver.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/solver_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/solver_replay.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/solver_search.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/stage_translates.cpp)
