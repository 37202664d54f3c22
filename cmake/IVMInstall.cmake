# Packaging: the header, the exported targets, IVMConfig.cmake with its version
# file, and ivm.pc. Included at the end of the top-level CMakeLists.txt, after
# every target exists. The targets (ivm, ivm_static, ivmd, ivmrun, ivm-gpud)
# install themselves with EXPORT IVMTargets; this file defines no target.

include(CMakePackageConfigHelpers)

set(IVM_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/IVM"
    CACHE STRING "Where IVMConfig.cmake and IVMTargets.cmake are installed")
set(IVM_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where ivm.pc is installed")
mark_as_advanced(IVM_INSTALL_CMAKEDIR IVM_INSTALL_PKGCONFIGDIR)

install(FILES "${PROJECT_SOURCE_DIR}/include/ivm.h"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")

# install(EXPORT) fails when no target joined the export set, so export only
# once one of the installed targets exists.
set(IVM_EXPORTED_TARGETS "")
foreach(target IN ITEMS ivm ivm_static ivmd ivmrun ivm-gpud)
  if(TARGET ${target})
    list(APPEND IVM_EXPORTED_TARGETS ${target})
  endif()
endforeach()

if(IVM_EXPORTED_TARGETS)
  install(EXPORT IVMTargets
          NAMESPACE ivm::
          DESTINATION "${IVM_INSTALL_CMAKEDIR}"
          FILE IVMTargets.cmake)

  configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/IVMConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/IVMConfig.cmake"
    INSTALL_DESTINATION "${IVM_INSTALL_CMAKEDIR}"
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
  write_basic_package_version_file(
    "${PROJECT_BINARY_DIR}/IVMConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}"
    COMPATIBILITY SameMajorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/IVMConfig.cmake"
                "${PROJECT_BINARY_DIR}/IVMConfigVersion.cmake"
          DESTINATION "${IVM_INSTALL_CMAKEDIR}")
  message(STATUS "IVM: exporting ${IVM_EXPORTED_TARGETS} as ivm::")
else()
  message(STATUS "IVM: no installable target defined yet; skipping the CMake package")
endif()

# ivm.pc is written at install time so that its prefix is the one actually
# installed to (cmake --install --prefix DIR), not the configured one.
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(IVM_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(IVM_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(IVM_PC_FILE "${PROJECT_BINARY_DIR}/pkgconfig/ivm.pc")
# A sanitizer build's libivm loads only into a program instrumented as it is
# (cmake/IVMSanitize.cmake): its ivm.pc and ivmcc add the flags, after a space.
set(IVM_CONSUMER_SANITIZE "")
if(IVM_SANITIZE_CONSUMER_FLAGS)
  list(JOIN IVM_SANITIZE_CONSUMER_FLAGS " " IVM_CONSUMER_SANITIZE)
  string(PREPEND IVM_CONSUMER_SANITIZE " ")
endif()
install(CODE "
  set(IVM_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(IVM_PC_LIBDIR [==[${IVM_PC_LIBDIR}]==])
  set(IVM_PC_INCLUDEDIR [==[${IVM_PC_INCLUDEDIR}]==])
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(IVM_CONSUMER_SANITIZE \"${IVM_CONSUMER_SANITIZE}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/ivm.pc.in\" \"${IVM_PC_FILE}\" @ONLY)
")
install(FILES "${IVM_PC_FILE}" DESTINATION "${IVM_INSTALL_PKGCONFIGDIR}")

# ivmcc and ivmc++: compiler wrappers that find the prefix from where they are
# installed (relocatable), as Open MPI's mpicc.
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  set(IVM_WRAPPER_${kind} "${CMAKE_INSTALL_${kind}}")
endforeach()
set(IVM_WRAPPER_CC "${CMAKE_C_COMPILER}")
set(IVM_WRAPPER_CXX "c++")
configure_file("${PROJECT_SOURCE_DIR}/cmake/ivmcc.in" "${PROJECT_BINARY_DIR}/wrappers/ivmcc"
               @ONLY)
install(PROGRAMS "${PROJECT_BINARY_DIR}/wrappers/ivmcc" DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(PROGRAMS "${PROJECT_BINARY_DIR}/wrappers/ivmcc" DESTINATION "${CMAKE_INSTALL_BINDIR}"
        RENAME ivmc++)
