# Optional parts of traceml in its own build (traceml_components.cmake defines them, the installed
# package config does the same at the consumer's configure time). Each is found or skipped with one
# clear configure message, and sets TRACEML_HAVE_<PART> for the rest of the build.
include(traceml_components)

# GLOBAL: under add_subdirectory(), the parent project links traceml::torch without finding LibTorch
# itself, so LibTorch's imported targets must be visible in its folder too.
# CUDA first: NVTX and LibTorch with CUDA look for headers in the toolkit it found.
foreach(_part IN ITEMS cupti nvtx torch)
  string(TOUPPER ${_part} _PART)
  set(TRACEML_HAVE_${_PART} OFF)
  set(_option TRACEML_WITH_${_PART})
  if(_part STREQUAL "cupti")
    set(_option TRACEML_WITH_CUDA)
  endif()
  if(NOT ${_option})
    message(STATUS "traceml: traceml::${_part} OFF (${_option} is OFF)")
    continue()
  endif()
  traceml_add_component(${_part} GLOBAL)
  if(traceml_${_part}_FOUND)
    set(TRACEML_HAVE_${_PART} ON)
    message(STATUS "traceml: traceml::${_part} ON (${traceml_${_part}_NOTE})")
  else()
    message(STATUS "traceml: traceml::${_part} OFF: ${traceml_${_part}_NOTE}")
  endif()
endforeach()
if(NOT TRACEML_HAVE_TORCH)
  set(TRACEML_TORCH_HAS_CUDA OFF)
  message(STATUS "traceml: LibTorch examples and tests skipped")
endif()
