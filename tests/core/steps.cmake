# traceml::steps(range), included from this folder's CMakeLists.txt: standard containers and a
# hand-written input range (test_steps.cpp), and, with LibTorch, a torch::data loader whose dataset
# sleeps a known time per example (test_steps_torch.cpp).

add_executable(traceml_steps_tests test_steps.cpp)
target_link_libraries(traceml_steps_tests PRIVATE traceml_core traceml_catch_main)
target_compile_options(traceml_steps_tests PRIVATE ${TRACEML_TEST_WARNINGS})
catch_discover_tests(traceml_steps_tests TEST_PREFIX "steps: ")

if(TRACEML_HAVE_TORCH)
  add_executable(traceml_steps_torch_tests test_steps_torch.cpp)
  target_link_libraries(traceml_steps_torch_tests PRIVATE traceml_core traceml_catch_main ${TORCH_LIBRARIES})
  target_compile_options(traceml_steps_torch_tests PRIVATE ${TRACEML_TORCH_TEST_WARNINGS})
  catch_discover_tests(traceml_steps_torch_tests TEST_PREFIX "steps: ")
else()
  message(STATUS "traceml: the torch::data test of traceml::steps skipped (needs LibTorch)")
endif()
