# Run at build time (cmake -P): writes OUT from the man page template IN, with
# @OPTIONS@ replaced by what PROG --help-man prints (the program's option
# table as roff) and @PROJECT_VERSION@ by VERSION.
#
#   cmake -DPROG=<program> -DIN=<page.in> -DOUT=<page> -DVERSION=<x.y.z> -P IVMManPage.cmake
execute_process(COMMAND "${PROG}" --help-man OUTPUT_VARIABLE options RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR options STREQUAL "")
  message(FATAL_ERROR "${PROG} --help-man failed (${rc})")
endif()
string(REGEX REPLACE "\n$" "" options "${options}")
file(READ "${IN}" text)
string(REPLACE "@OPTIONS@" "${options}" text "${text}")
string(REPLACE "@PROJECT_VERSION@" "${VERSION}" text "${text}")
file(WRITE "${OUT}" "${text}")
