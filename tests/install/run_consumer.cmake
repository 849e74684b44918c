# Builds and runs tests/install/consumer against traceml, as a user would get it. Run with cmake -P:
#   -DTRACEML_SOURCE_DIR=<traceml source> -DWORK_DIR=<scratch folder> -DMODE=package|subdirectory
#   [-DGENERATOR=<generator>] [-DCXX_COMPILER=<compiler>]
# package:      configure a fresh, minimal traceml build (no tests, examples or benchmarks), install it
#               into WORK_DIR/prefix, then build the consumer with find_package(traceml).
# subdirectory: build the consumer with add_subdirectory(<traceml source>).
cmake_minimum_required(VERSION 3.16)
foreach(v TRACEML_SOURCE_DIR WORK_DIR MODE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()

set(generator_args)
if(GENERATOR)
  set(generator_args -G "${GENERATOR}")
endif()
set(compiler_args)
if(CXX_COMPILER)
  set(compiler_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()

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
# Only the core is needed: keep the optional, slow-to-find parts out.
set(minimal -DTRACEML_BUILD_TESTS=OFF -DTRACEML_BUILD_EXAMPLES=OFF -DTRACEML_BUILD_BENCHMARKS=OFF
            -DTRACEML_WITH_TORCH=OFF -DTRACEML_WITH_CUDA=OFF)

if(MODE STREQUAL "package")
  set(prefix "${WORK_DIR}/prefix")
  step("configure traceml" ${CMAKE_COMMAND} -S "${TRACEML_SOURCE_DIR}" -B "${WORK_DIR}/traceml-build"
       ${generator_args} ${compiler_args} ${minimal})
  step("build traceml" ${CMAKE_COMMAND} --build "${WORK_DIR}/traceml-build")
  step("install traceml" ${CMAKE_COMMAND} --install "${WORK_DIR}/traceml-build" --prefix "${prefix}")
  foreach(f include/traceml/traceml.hpp include/traceml/phase.hpp include/traceml/detail/recorder.hpp)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "install did not place ${f}")
    endif()
  endforeach()
  file(GLOB_RECURSE config "${prefix}/*/traceml-config.cmake")
  if(NOT config)
    message(FATAL_ERROR "install did not place traceml-config.cmake")
  endif()
  step("configure consumer (find_package)" ${CMAKE_COMMAND} -S "${consumer_src}" -B "${consumer_build}"
       ${generator_args} ${compiler_args} "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "subdirectory")
  step("configure consumer (add_subdirectory)" ${CMAKE_COMMAND} -S "${consumer_src}" -B "${consumer_build}"
       ${generator_args} ${compiler_args} "-DTRACEML_SOURCE_DIR=${TRACEML_SOURCE_DIR}"
       -DTRACEML_WITH_TORCH=OFF -DTRACEML_WITH_CUDA=OFF)
else()
  message(FATAL_ERROR "MODE must be package or subdirectory, not '${MODE}'")
endif()

step("build consumer" ${CMAKE_COMMAND} --build "${consumer_build}")
step("run consumer" "${consumer_build}/consumer")
message(STATUS "${step_output}")
