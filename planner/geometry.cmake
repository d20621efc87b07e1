# Sources of the geometry module; included by planner/CMakeLists.txt.
target_sources(actmem PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/src/degree_stats.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/graph_counts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/grid_mesh_connectivity.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/icosahedral_mesh.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/lat_lon_grid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/uniform_grid_index.cpp)
