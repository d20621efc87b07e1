# Solver tests; included by tests/CMakeLists.txt.
target_sources(actmem_tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/solver_test.cpp)
