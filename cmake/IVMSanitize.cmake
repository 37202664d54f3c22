# Sanitizers and fuzzers for everything the project builds.
#
#   -DIVM_SANITIZE=address,undefined   ASan + UBSan (UBSan stops at its first report)
#   -DIVM_SANITIZE=thread              TSan (libivm's threaded paths: rpc.c)
#   -DIVM_BUILD_FUZZERS=ON             the libFuzzer targets of tests/fuzz (needs clang:
#                                      CC=clang); every object gets the fuzzer's coverage
#                                      instrumentation and ASan + UBSan
#
# C and C++ sources get the flags; CUDA sources keep theirs (nvcc compiles the
# host side of .cu files uninstrumented), and every link line, whichever driver
# links it (cc, or g++ for the CUDA apps), links the sanitizer runtimes first.

set(IVM_SANITIZE "" CACHE STRING
    "Sanitizers for every target, as -fsanitize= takes them: address,undefined or thread")
option(IVM_BUILD_FUZZERS "Build the libFuzzer targets of tests/fuzz (CC=clang)" OFF)

set(ivm_sanitize "${IVM_SANITIZE}")
set(IVM_SANITIZE_CONSUMER_FLAGS "")
if(IVM_BUILD_FUZZERS)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "IVM_BUILD_FUZZERS needs clang (libFuzzer): configure with CC=clang")
  endif()
  if(ivm_sanitize STREQUAL "")
    set(ivm_sanitize "address,undefined")
  endif()
  # Coverage for the fuzzer in every object; only the fuzz targets link libFuzzer.
  set(ivm_sanitize "fuzzer-no-link,${ivm_sanitize}")
endif()

if(NOT ivm_sanitize STREQUAL "")
  if(ivm_sanitize MATCHES "thread" AND ivm_sanitize MATCHES "address")
    message(FATAL_ERROR "IVM_SANITIZE: thread cannot be combined with address")
  endif()
  set(ivm_san_compile -fsanitize=${ivm_sanitize} -fno-omit-frame-pointer)
  set(ivm_san_link -fsanitize=${ivm_sanitize})
  if(ivm_sanitize MATCHES "undefined")
    # A UBSan report ends the process (as UBSAN_OPTIONS=halt_on_error=1 would), so
    # the test that caused it fails.
    list(APPEND ivm_san_compile -fno-sanitize-recover=undefined)
  endif()
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU" AND ivm_sanitize MATCHES "address")
    # GCC's runtimes linked into each program, not loaded as libasan.so and
    # libubsan.so: each of those carries its own copy of the sanitizers' common
    # code, whose zeroed data (6 MB in libubsan) LeakSanitizer scans at every
    # exit. Linked statically they share one copy: an ASan+UBSan process's
    # leak check at exit takes 49 ms here instead of 82 (a malloc/free/return
    # program, 50 runs), and the sanitizer pass starts thousands of PEs.
    # Shared libraries (libivm, the CUDA stand-in) take the runtime from the
    # program that loads them, which must then be an instrumented one that
    # exports it: GCC exports only what the libraries on its link line use,
    # not what a library it dlopens (libcuda.so.1) needs.
    list(APPEND ivm_san_link -static-libasan)
    if(ivm_sanitize MATCHES "undefined")
      list(APPEND ivm_san_link -static-libubsan)
    endif()
    set(ivm_san_exports ${PROJECT_BINARY_DIR}/sanitizer-exports.list)
    file(WRITE ${ivm_san_exports}
         "{ __asan_*; __ubsan_*; __lsan_*; __sanitizer_*; __interceptor_*; };\n")
    add_link_options(
      "$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:LINKER:--dynamic-list=${ivm_san_exports}>")
    set(IVM_SANITIZE_STATIC_RUNTIME ON)
    # What a program needs to load this build's libivm (a list): the installed
    # targets' interface (libivm/CMakeLists.txt), ivmcc and ivm.pc
    # (cmake/IVMInstall.cmake) carry it.
    set(IVM_SANITIZE_CONSUMER_FLAGS ${ivm_san_link})
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${ivm_san_compile}>")
  # CMake links CUDA executables with the host compiler (g++), so one set of
  # link flags serves every link line.
  add_link_options(${ivm_san_link})
  message(STATUS "IVM: sanitizers ${ivm_sanitize}")
endif()
