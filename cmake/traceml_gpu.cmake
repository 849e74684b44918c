# GPU parts of traceml: the CUPTI/CUDA-event sources and the LibTorch adapter. Included at the end
# of traceml_optional.cmake, which has already looked for the CUDA toolkit and LibTorch.
#
#   traceml::cupti  traceml + CUDA runtime + CUPTI headers. CUPTI itself is loaded with dlopen at
#                   run time (the path found here is the first candidate), so a binary built with it
#                   still runs, with CUDA-event timing, where CUPTI is missing.
#   traceml::torch  traceml + LibTorch, with TRACEML_TORCH_CUDA=1 when LibTorch has CUDA.

if(TRACEML_HAVE_CUDA AND TRACEML_HAVE_CUPTI AND NOT TARGET traceml_cupti)
  add_library(traceml_cupti INTERFACE)
  add_library(traceml::cupti ALIAS traceml_cupti)
  set(_traceml_cupti_lib "")
  get_target_property(_traceml_cupti_lib CUDA::cupti IMPORTED_LOCATION)
  if(NOT _traceml_cupti_lib)
    set(_traceml_cupti_lib "")
  endif()
  set(_traceml_cupti_inc ${CUDAToolkit_INCLUDE_DIRS})
  if(CUDAToolkit_CUPTI_INCLUDE_DIR)
    list(APPEND _traceml_cupti_inc ${CUDAToolkit_CUPTI_INCLUDE_DIR})
  endif()
  target_include_directories(traceml_cupti SYSTEM INTERFACE ${_traceml_cupti_inc})
  target_link_libraries(traceml_cupti INTERFACE traceml CUDA::cudart ${CMAKE_DL_LIBS})
  target_compile_definitions(traceml_cupti INTERFACE TRACEML_CUPTI_LIBRARY="${_traceml_cupti_lib}")
  message(STATUS "traceml: traceml::cupti ON (CUPTI loaded at run time, first from ${_traceml_cupti_lib})")
endif()

set(TRACEML_TORCH_HAS_CUDA OFF)
if(TRACEML_HAVE_TORCH AND NOT TARGET traceml_torch)
  add_library(traceml_torch INTERFACE)
  add_library(traceml::torch ALIAS traceml_torch)
  target_link_libraries(traceml_torch INTERFACE traceml ${TORCH_LIBRARIES})
  if(TORCH_CUDA_LIBRARIES)
    set(TRACEML_TORCH_HAS_CUDA ON)
    target_compile_definitions(traceml_torch INTERFACE TRACEML_TORCH_CUDA=1)
    if(TRACEML_HAVE_CUDA)
      target_include_directories(traceml_torch SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  else()
    target_compile_definitions(traceml_torch INTERFACE TRACEML_TORCH_CUDA=0)
  endif()
  message(STATUS "traceml: traceml::torch ON (LibTorch CUDA: ${TRACEML_TORCH_HAS_CUDA})")
endif()
