# traceml's optional parts as targets on top of traceml::traceml, defined from the dependencies found
# where this file runs: in traceml's own build (traceml_optional.cmake) and in the installed package
# config. So an installed traceml carries no path of the machine it was built on: a consumer's
# targets point at the consumer's own CUDA toolkit and LibTorch.
#
#   traceml::nvtx   traceml + the NVTX3 headers (header-only; the core turns NVTX ranges on by
#                   __has_include, so the include path is all it takes).
#   traceml::cupti  traceml + CUDA runtime + CUPTI headers. CUPTI and the CUDA runtime themselves are
#                   loaded with dlopen at run time (a loaded one first, then the libraries found here,
#                   TRACEML_CUPTI_LIBRARY and TRACEML_CUDART_LIBRARY), so a binary built with it links
#                   neither: it still runs, with CUDA-event timing, where CUPTI is missing, and on
#                   the CPU where the runtime is.
#   traceml::torch  traceml + LibTorch, with TRACEML_TORCH_CUDA=1 when LibTorch has CUDA.
#
# traceml_add_component(<nvtx|cupti|torch> [GLOBAL])
#   Looks for the part's dependencies quietly and, when they are there, defines traceml::<part>.
#   Sets traceml_<part>_FOUND, and traceml_<part>_NOTE: what the part rests on when found, what is
#   missing and how to point at it when not. GLOBAL makes the part's target and its dependencies'
#   imported targets visible to every directory: a project that includes traceml with
#   add_subdirectory() cannot see imported targets found in traceml's folder otherwise, and
#   LibTorch's targets name each other in generator expressions that are evaluated in its folder.
#   A macro, not a function: like find_package's, the variables it sets (TORCH_LIBRARIES,
#   CUDAToolkit_VERSION, ...) stay visible to the caller.

# traceml_add_session_part(<source> <target> <name>)
#   The TRACEML_OUT session's part in <source> (session.cpp, session_gpu.cpp, session_torch.cpp, in
#   the folder _traceml_session_dir: src/ in traceml's tree, share/traceml in the package), compiled
#   once in this build tree as the object library traceml_session_<name>, and linked into every
#   target that links <target> but has not the TRACEML_NO_SESSION property. Nothing when
#   _traceml_session_dir is not set (the session is off: TRACEML_SESSION=OFF) or the part exists.
function(traceml_add_session_part source target name)
  if(NOT _traceml_session_dir OR TARGET traceml_session_${name})
    return()
  endif()
  add_library(traceml_session_${name} OBJECT "${_traceml_session_dir}/${source}")
  target_link_libraries(traceml_session_${name} PRIVATE ${target})
  # Not a consumer of itself; position-independent, since a shared library may link it too.
  set_target_properties(traceml_session_${name} PROPERTIES TRACEML_NO_SESSION ON POSITION_INDEPENDENT_CODE ON)
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_SOURCES
    "$<BUILD_INTERFACE:$<$<NOT:$<BOOL:$<TARGET_PROPERTY:TRACEML_NO_SESSION>>>:$<TARGET_OBJECTS:traceml_session_${name}>>>")
endfunction()

# The CUDA toolkit is looked for once, by whichever part needs it first.
macro(_traceml_find_cuda)
  if(NOT CUDAToolkit_FOUND)
    find_package(CUDAToolkit QUIET ${_traceml_global})
  endif()
endmacro()

macro(_traceml_add_nvtx)
  find_path(TRACEML_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_ROOT}/include $ENV{CUDAToolkit_ROOT}/include
          $ENV{CUDA_HOME}/include /usr/local/cuda/include)
  if(TRACEML_NVTX_INCLUDE_DIR)
    add_library(traceml::nvtx INTERFACE IMPORTED ${_traceml_global})
    target_include_directories(traceml::nvtx SYSTEM INTERFACE ${TRACEML_NVTX_INCLUDE_DIR})
    target_link_libraries(traceml::nvtx INTERFACE traceml::traceml ${CMAKE_DL_LIBS})
    set(traceml_nvtx_FOUND TRUE)
    set(traceml_nvtx_NOTE "NVTX3 headers in ${TRACEML_NVTX_INCLUDE_DIR}")
  else()
    set(traceml_nvtx_NOTE "needs the NVTX3 headers: nvtx3/nvToolsExt.h not found; set TRACEML_NVTX_INCLUDE_DIR")
  endif()
endmacro()

macro(_traceml_add_cupti)
  _traceml_find_cuda()
  if(NOT CUDAToolkit_FOUND)
    set(traceml_cupti_NOTE "needs the CUDA toolkit with CUPTI: CUDAToolkit not found; set CUDAToolkit_ROOT")
  elseif(NOT TARGET CUDA::cupti)
    string(CONCAT traceml_cupti_NOTE "needs the CUDA toolkit with CUPTI: CUDA ${CUDAToolkit_VERSION} in "
                  "${CUDAToolkit_BIN_DIR} has no CUPTI; set CUDAToolkit_ROOT")
  else()
    # The consumer's CUPTI, as the first library cupti_api.hpp tries to dlopen.
    get_target_property(_traceml_cupti_lib CUDA::cupti IMPORTED_LOCATION)
    if(NOT _traceml_cupti_lib)
      set(_traceml_cupti_lib "")
    endif()
    add_library(traceml::cupti INTERFACE IMPORTED ${_traceml_global})
    # CUDA::cupti is not linked (CUPTI is dlopened), so its include folder is added by hand.
    target_include_directories(traceml::cupti SYSTEM INTERFACE
      ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_CUPTI_INCLUDE_DIR})
    # The CUDA runtime is dlopened too (gpu/cuda_runtime.hpp): a consumer has no NEEDED libcudart
    # and starts without it; the build's runtime is the one tried after a runtime already loaded.
    get_target_property(_traceml_cudart_lib CUDA::cudart IMPORTED_LOCATION)
    if(NOT _traceml_cudart_lib)
      set(_traceml_cudart_lib "")
    endif()
    target_link_libraries(traceml::cupti INTERFACE traceml::traceml ${CMAKE_DL_LIBS})
    target_compile_definitions(traceml::cupti INTERFACE TRACEML_CUPTI_LIBRARY="${_traceml_cupti_lib}"
                                                        TRACEML_CUDART_LIBRARY="${_traceml_cudart_lib}")
    traceml_add_session_part(session_gpu.cpp traceml::cupti gpu)
    set(traceml_cupti_FOUND TRUE)
    set(traceml_cupti_NOTE "CUDA ${CUDAToolkit_VERSION}; CUPTI and the CUDA runtime loaded at run time, first from ${_traceml_cupti_lib} and ${_traceml_cudart_lib}")
  endif()
endmacro()

macro(_traceml_add_torch)
  if(NOT Torch_FOUND)
    find_package(Torch QUIET ${_traceml_global})
  endif()
  if(NOT Torch_FOUND)
    string(CONCAT traceml_torch_NOTE "needs LibTorch: Torch not found; set CMAKE_PREFIX_PATH to "
                  "torch.utils.cmake_prefix_path, or install libtorch-dev")
  else()
    add_library(traceml::torch INTERFACE IMPORTED ${_traceml_global})
    target_link_libraries(traceml::torch INTERFACE traceml::traceml ${TORCH_LIBRARIES})
    set(TRACEML_TORCH_HAS_CUDA OFF)
    if(TORCH_CUDA_LIBRARIES)
      set(TRACEML_TORCH_HAS_CUDA ON)
      target_compile_definitions(traceml::torch INTERFACE TRACEML_TORCH_CUDA=1)
      # LibTorch's c10/cuda headers include the CUDA runtime's, which its package does not carry.
      _traceml_find_cuda()
      if(CUDAToolkit_FOUND)
        target_include_directories(traceml::torch SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
      endif()
      traceml_add_session_part(session_torch.cpp traceml::torch torch)
    else()
      target_compile_definitions(traceml::torch INTERFACE TRACEML_TORCH_CUDA=0)
    endif()
    set(traceml_torch_FOUND TRUE)
    set(traceml_torch_NOTE "LibTorch in ${TORCH_INSTALL_PREFIX}, CUDA ${TRACEML_TORCH_HAS_CUDA}")
  endif()
endmacro()

macro(traceml_add_component _traceml_part)
  set(_traceml_global ${ARGN})
  set(traceml_${_traceml_part}_FOUND FALSE)
  set(traceml_${_traceml_part}_NOTE "")
  if(TARGET traceml::${_traceml_part})
    # Defined already: find_package(traceml) a second time, or in a folder below the first.
    set(traceml_${_traceml_part}_FOUND TRUE)
  elseif("${_traceml_part}" MATCHES "^(nvtx|cupti|torch)$")
    cmake_language(CALL _traceml_add_${_traceml_part})
  else()
    set(traceml_${_traceml_part}_NOTE "is not one of traceml's components (nvtx, cupti, torch)")
  endif()
endmacro()
