# Install rules: library, worker, CLI, headers, CMake package config and pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS ksearch ksearch_c EXPORT ksearchTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET ksearch-worker)
  install(TARGETS ksearch-worker RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/ksearch)
endif()
if(KS_SUITE_KERNELBENCH)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/lib/tasks/kernelbench/oracle/kernelbench_oracle.py
          DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/ksearch)
endif()
if(TARGET ksearch_cli)
  install(TARGETS ksearch_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ksearch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/ksearch/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ksearch)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/tasks DESTINATION ${CMAKE_INSTALL_DATADIR}/ksearch)

install(EXPORT ksearchTargets NAMESPACE ksearch::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ksearchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ksearchConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ksearchConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ksearchConfig.cmake ${PROJECT_BINARY_DIR}/ksearchConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ksearch)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ksearch.pc.in ${PROJECT_BINARY_DIR}/ksearch.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ksearch.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
