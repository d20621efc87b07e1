# `cmake --install`: the public headers, the static library, the `actmem`
# tool, and a CMake package so that consumers write
#   find_package(actmem 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE actmem::actmem)
# The package also works from the build tree (actmem_DIR=<build>).
# Tested by scripts/test-install.sh (tests/install/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ACTMEM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/actmem CACHE STRING
    "Where the CMake package files of actmem are installed, relative to the prefix")

# actmem is static: its private dependencies (fmt, Boost headers) appear in
# its link interface as $<LINK_ONLY:…>, so the package finds them again
# (actmemConfig.cmake does find_dependency on fmt and Boost). The build's
# warning and sanitizer flags are not among them (planner/CMakeLists.txt).
install(TARGETS actmem
        EXPORT actmemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/planner/include/actmem
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(TARGETS actmem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT actmemTargets NAMESPACE actmem:: DESTINATION ${ACTMEM_INSTALL_CMAKEDIR})
export(EXPORT actmemTargets NAMESPACE actmem:: FILE ${PROJECT_BINARY_DIR}/actmemTargets.cmake)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/actmemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/actmemConfig.cmake
                              INSTALL_DESTINATION ${ACTMEM_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/actmemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/actmemConfig.cmake ${PROJECT_BINARY_DIR}/actmemConfigVersion.cmake
        DESTINATION ${ACTMEM_INSTALL_CMAKEDIR})
