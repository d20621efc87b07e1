# Tests of the library API (docs/api.md); included by tests/CMakeLists.txt.
# A separate executable, so that the ThreadSanitizer build (ACTMEM_TSAN,
# scripts/test-api.sh) needs to build only this one.
add_executable(actmem_api_tests
  ${CMAKE_CURRENT_LIST_DIR}/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/api_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thread_safety_test.cpp)
target_link_libraries(actmem_api_tests PRIVATE actmem doctest::doctest actmem_build_flags)
doctest_discover_tests(actmem_api_tests PROPERTIES LABELS unit)

# The C++ examples of docs/api.md, built here too and run as tests (they are
# also built against the installed package by scripts/test-install.sh).
add_subdirectory(${PROJECT_SOURCE_DIR}/docs/examples ${PROJECT_BINARY_DIR}/docs/examples)
add_test(NAME example.choose_device COMMAND choose_device 2 graphcast-small)
set_tests_properties(example.choose_device PROPERTIES LABELS e2e)
