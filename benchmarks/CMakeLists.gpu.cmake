# GPU overhead benchmark: a LibTorch transformer stand-in trained in alternating blocks of steps
# untraced, with CUDA-event phase timing, and with CUPTI kernel attribution; prints median step
# times and the overhead ratios. Needs CUPTI and a CUDA LibTorch; no Google Benchmark.
# Run:  <build>/.../traceml_gpu_overhead [--layers 28 --hidden 2048 --seq 512 --rounds 6 --block 6]
if(TARGET traceml_gpu_overhead)
  return()
endif()
if(TARGET traceml::cupti AND TARGET traceml::torch AND TRACEML_TORCH_HAS_CUDA)
  add_executable(traceml_gpu_overhead ${CMAKE_CURRENT_LIST_DIR}/gpu_overhead.cpp)
  target_include_directories(traceml_gpu_overhead PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(traceml_gpu_overhead PRIVATE traceml::cupti traceml::torch)
  message(STATUS "traceml: GPU overhead benchmark ON")
else()
  message(STATUS "traceml: GPU overhead benchmark skipped (needs CUPTI and a CUDA LibTorch)")
endif()
