# Installs traceml, or builds and runs tests/install/consumer against it, as a user would. Run with
# cmake -P:
#   -DTRACEML_SOURCE_DIR=<traceml source> -DWORK_DIR=<scratch folder> -DMODE=install|package|subdirectory
#   [-DPREFIX=<install prefix>] [-DPART=core|nvtx|cupti|readme] [-DEXPECT_OUTPUT=<regex>]
#   [-DEXPECT_CONFIGURE_ERROR=<text>] [-DCONSUMER_ARGS=<-D...>|<-D...>] [-DGENERATOR=<generator>]
#   [-DCXX_COMPILER=<compiler>]
# install:      configure a fresh, minimal traceml build (no tests, examples, benchmarks, nor optional
#               parts: the package finds those at the consumer's configure time), install it into
#               PREFIX without building anything (the traceml command skipped with a note), check
#               what it placed, then build the command and install again (bin/traceml placed).
# package:      build the consumer with find_package(traceml) from PREFIX.
# subdirectory: build the consumer with add_subdirectory(<traceml source>).
# PART readme builds the README's GPU snippet, taken from between its snippet:gpu markers.
# EXPECT_OUTPUT: the consumer's output must match. EXPECT_CONFIGURE_ERROR: the consumer's configure
# must fail, saying this text (line breaks and runs of spaces count as one space).
cmake_minimum_required(VERSION 3.25)
foreach(v TRACEML_SOURCE_DIR WORK_DIR MODE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT PART)
  set(PART core)
endif()

set(generator_args)
if(GENERATOR)
  set(generator_args -G "${GENERATOR}")
endif()
set(compiler_args)
if(CXX_COMPILER)
  set(compiler_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
# '|' separates the arguments: a list would not survive the trip through add_test and cmake -P.
string(REPLACE "|" ";" consumer_args "${CONSUMER_ARGS}")
list(FILTER consumer_args EXCLUDE REGEX "^$")

# Runs a command; stops the script (failing the test) with its output when it fails.
function(step what)
  message(STATUS "consumer test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(consumer_src "${CMAKE_CURRENT_LIST_DIR}/consumer")
set(consumer_build "${WORK_DIR}/consumer-build")

if(MODE STREQUAL "install")
  if(NOT PREFIX)
    message(FATAL_ERROR "run_consumer.cmake: MODE install needs -DPREFIX=...")
  endif()
  file(REMOVE_RECURSE "${PREFIX}")
  step("configure traceml" ${CMAKE_COMMAND} -S "${TRACEML_SOURCE_DIR}" -B "${WORK_DIR}/traceml-build"
       ${generator_args} ${compiler_args} -DTRACEML_BUILD_TESTS=OFF -DTRACEML_BUILD_EXAMPLES=OFF
       -DTRACEML_BUILD_BENCHMARKS=OFF -DTRACEML_WITH_NVTX=OFF -DTRACEML_WITH_CUDA=OFF -DTRACEML_WITH_TORCH=OFF)
  # Header-only: installed right after configuring, without a build. The traceml command (when this
  # machine has what it needs) is then not built: skipped with a note, and installed once built.
  step("install traceml without building it" ${CMAKE_COMMAND} --install "${WORK_DIR}/traceml-build" --prefix "${PREFIX}")
  set(cli_target "")
  if(EXISTS "${WORK_DIR}/traceml-build/tools")
    set(cli_target traceml_cli)
    string(REGEX REPLACE "[\n ]+" " " said "${step_output}")
    if(NOT said MATCHES "traceml: the traceml command is not built, so not installed \\(to install it too: cmake --build <build folder> --target traceml_cli, then install again\\)")
      message(FATAL_ERROR "install before a build did not say that the traceml command was skipped:\n${step_output}")
    endif()
    if(EXISTS "${PREFIX}/bin/traceml")
      message(FATAL_ERROR "install before a build placed a traceml command")
    endif()
  endif()
  foreach(f include/traceml/traceml.hpp include/traceml/phase.hpp include/traceml/detail/recorder.hpp
            include/traceml/gpu/cupti_source.hpp include/traceml/gpu/source_factory.hpp
            include/traceml/analysis/summary.hpp include/traceml/torch_adapter.hpp)
    if(NOT EXISTS "${PREFIX}/${f}")
      message(FATAL_ERROR "install did not place ${f}")
    endif()
  endforeach()
  file(GLOB_RECURSE config "${PREFIX}/*/traceml-config.cmake")
  if(NOT config)
    message(FATAL_ERROR "install did not place traceml-config.cmake")
  endif()
  # The package must not point back at the machine it was built on (its source or build folder).
  file(GLOB_RECURSE package_files "${PREFIX}/*.cmake")
  foreach(f IN LISTS package_files)
    file(READ "${f}" text)
    foreach(path "${TRACEML_SOURCE_DIR}" "${WORK_DIR}")
      string(FIND "${text}" "${path}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "installed ${f} names the build machine's ${path}")
      endif()
    endforeach()
  endforeach()
  if(cli_target)
    step("build the traceml command" ${CMAKE_COMMAND} --build "${WORK_DIR}/traceml-build" --target traceml_cli)
    step("install traceml with the command" ${CMAKE_COMMAND} --install "${WORK_DIR}/traceml-build" --prefix "${PREFIX}")
    if(NOT EXISTS "${PREFIX}/bin/traceml")
      message(FATAL_ERROR "install after building the traceml command did not place bin/traceml:\n${step_output}")
    endif()
  endif()
  message(STATUS "installed traceml into ${PREFIX}")
  return()
endif()

if(PART STREQUAL "readme")
  # The snippet verbatim: the README changing it incompatibly fails here or in the build below.
  file(READ "${TRACEML_SOURCE_DIR}/README.md" readme)
  string(REGEX MATCH "<!-- snippet:gpu -->[ \t\r\n]*```cpp\n(.*)```[ \t\r\n]*<!-- /snippet -->" block "${readme}")
  if(NOT block)
    message(FATAL_ERROR "README.md has no ```cpp block between <!-- snippet:gpu --> and <!-- /snippet -->")
  endif()
  set(code "${CMAKE_MATCH_1}")
  string(REGEX MATCHALL "#include[^\n]*" SNIPPET_INCLUDES "${code}")
  string(REPLACE ";" "\n" SNIPPET_INCLUDES "${SNIPPET_INCLUDES}")
  string(REGEX REPLACE "#include[^\n]*\n" "" SNIPPET_BODY "${code}")
  configure_file("${consumer_src}/readme_gpu.cpp.in" "${WORK_DIR}/readme_gpu.cpp" @ONLY)
  list(APPEND consumer_args "-DCONSUMER_MAIN=${WORK_DIR}/readme_gpu.cpp")
endif()
list(APPEND consumer_args "-DCONSUMER_PART=${PART}")

if(MODE STREQUAL "package")
  if(NOT EXISTS "${PREFIX}")
    message(FATAL_ERROR "run_consumer.cmake: no traceml installed in PREFIX '${PREFIX}'")
  endif()
  set(configure_what "configure consumer (find_package)")
  list(APPEND consumer_args "-DCMAKE_PREFIX_PATH=${PREFIX}")
elseif(MODE STREQUAL "subdirectory")
  set(configure_what "configure consumer (add_subdirectory)")
  list(APPEND consumer_args "-DTRACEML_SOURCE_DIR=${TRACEML_SOURCE_DIR}")
  # Only what the part needs: keep the slow-to-find others out.
  if(PART MATCHES "^(core|nvtx)$")
    list(APPEND consumer_args -DTRACEML_WITH_TORCH=OFF -DTRACEML_WITH_CUDA=OFF)
  elseif(PART STREQUAL "cupti")
    list(APPEND consumer_args -DTRACEML_WITH_TORCH=OFF)
  endif()
else()
  message(FATAL_ERROR "MODE must be install, package or subdirectory, not '${MODE}'")
endif()

set(configure ${CMAKE_COMMAND} -S "${consumer_src}" -B "${consumer_build}" ${generator_args} ${compiler_args}
    ${consumer_args})
if(DEFINED EXPECT_CONFIGURE_ERROR)
  message(STATUS "consumer test: ${configure_what}, expected to fail")
  execute_process(COMMAND ${configure} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${out}")
  string(FIND "${flat}" "${EXPECT_CONFIGURE_ERROR}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "configure should have failed (rc ${rc}) saying \"${EXPECT_CONFIGURE_ERROR}\":\n${out}")
  endif()
  message(STATUS "configure failed as expected:\n${out}")
  return()
endif()

step("${configure_what}" ${configure})
step("build consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
step("run consumer" "${consumer_build}/consumer")
message(STATUS "${step_output}")
if(EXPECT_OUTPUT AND NOT step_output MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "the consumer's output does not match '${EXPECT_OUTPUT}'")
endif()
# traceml::cupti loads CUPTI and the CUDA runtime at run time: the consumer links neither, so it
# starts on a machine without them (gpu/cuda_runtime.hpp, gpu/cupti_api.hpp).
if(PART STREQUAL "cupti")
  find_program(READELF readelf)
  if(NOT READELF)
    message(FATAL_ERROR "readelf (binutils) is needed to check the consumer's NEEDED libraries")
  endif()
  step("list the consumer's NEEDED libraries" ${READELF} -d "${consumer_build}/consumer")
  if(step_output MATCHES "NEEDED[^\n]*(libcudart|libcupti)")
    message(FATAL_ERROR "a traceml::cupti consumer must not link the CUDA runtime or CUPTI:\n${step_output}")
  endif()
  if(NOT step_output MATCHES "NEEDED")
    message(FATAL_ERROR "readelf -d listed no NEEDED library at all:\n${step_output}")
  endif()
endif()
