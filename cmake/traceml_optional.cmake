# Optional parts of traceml. Each is found or skipped with one clear configure message, and sets
# TRACEML_HAVE_<PART> for the rest of the build.

# NVTX3 is header-only: nothing to link, only an include path. The core turns it on by
# __has_include, so adding the path is all it takes.
set(TRACEML_HAVE_NVTX OFF)
if(TRACEML_WITH_NVTX)
  find_path(TRACEML_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include /usr/local/cuda/include)
  if(TRACEML_NVTX_INCLUDE_DIR)
    set(TRACEML_HAVE_NVTX ON)
    add_library(traceml_nvtx INTERFACE)
    add_library(traceml::nvtx ALIAS traceml_nvtx)
    target_include_directories(traceml_nvtx SYSTEM INTERFACE ${TRACEML_NVTX_INCLUDE_DIR})
    target_link_libraries(traceml_nvtx INTERFACE traceml ${CMAKE_DL_LIBS})
    message(STATUS "traceml: NVTX ranges ON (${TRACEML_NVTX_INCLUDE_DIR})")
  else()
    message(STATUS "traceml: NVTX ranges OFF (nvtx3/nvToolsExt.h not found; set TRACEML_NVTX_INCLUDE_DIR)")
  endif()
endif()

# CUDA toolkit (runtime + CUPTI) for the GPU time sources.
set(TRACEML_HAVE_CUDA OFF)
set(TRACEML_HAVE_CUPTI OFF)
if(TRACEML_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TRACEML_HAVE_CUDA ON)
    if(TARGET CUDA::cupti)
      set(TRACEML_HAVE_CUPTI ON)
    endif()
    message(STATUS "traceml: CUDA ${CUDAToolkit_VERSION} found, CUPTI ${TRACEML_HAVE_CUPTI}")
  else()
    message(STATUS "traceml: CUDA toolkit not found: GPU time sources skipped")
  endif()
endif()

# LibTorch for the adapter, the examples and the LibTorch tests.
set(TRACEML_HAVE_TORCH OFF)
if(TRACEML_WITH_TORCH)
  find_package(Torch QUIET)
  if(Torch_FOUND OR TORCH_FOUND)
    set(TRACEML_HAVE_TORCH ON)
    message(STATUS "traceml: LibTorch found (${TORCH_INSTALL_PREFIX})")
  else()
    message(STATUS "traceml: LibTorch not found: LibTorch examples and tests skipped "
                   "(install libtorch-dev, or point CMAKE_PREFIX_PATH at torch.utils.cmake_prefix_path)")
  endif()
endif()

# GPU sources and the LibTorch adapter (traceml::cupti, traceml::torch).
include(traceml_gpu)
