# Cross-cutting checks of the core, included from this folder's CMakeLists.txt:
#   NVTX ranges through a test injection library, the compiled-out build, two translation units,
#   scope type traits, concurrent recording, a bare compile of phase.hpp (install tests: ../install/).

# ---- NVTX: NVTX loads our recording "tool" from NVTX_INJECTION64_PATH ---------------------------
if(TRACEML_HAVE_NVTX)
  add_library(traceml_test_nvtx_injection SHARED nvtx_injection.cpp)
  target_link_libraries(traceml_test_nvtx_injection PRIVATE traceml::nvtx)
  target_compile_options(traceml_test_nvtx_injection PRIVATE ${TRACEML_TEST_WARNINGS})

  add_executable(traceml_nvtx_tests test_nvtx.cpp)
  target_link_libraries(traceml_nvtx_tests PRIVATE traceml::nvtx traceml_catch_main)
  target_compile_options(traceml_nvtx_tests PRIVATE ${TRACEML_TEST_WARNINGS})
  add_dependencies(traceml_nvtx_tests traceml_test_nvtx_injection)
  catch_discover_tests(traceml_nvtx_tests TEST_PREFIX "nvtx: "
    PROPERTIES ENVIRONMENT "NVTX_INJECTION64_PATH=$<TARGET_FILE:traceml_test_nvtx_injection>")
  set_target_properties(traceml_test_nvtx_injection traceml_nvtx_tests PROPERTIES TRACEML_NO_SESSION ON)
endif()

# ---- the compiled-out build: same sources as a user's, TRACEML_DISABLE defined -------------------
add_executable(traceml_disabled_tests test_disabled.cpp test_traits.cpp)
target_compile_definitions(traceml_disabled_tests PRIVATE TRACEML_DISABLE)
# With the NVTX headers visible, to check that a disabled build still emits no range.
target_link_libraries(traceml_disabled_tests PRIVATE traceml_catch_main
  $<IF:$<TARGET_EXISTS:traceml::nvtx>,traceml::nvtx,traceml::traceml>)
target_compile_options(traceml_disabled_tests PRIVATE ${TRACEML_TEST_WARNINGS})
catch_discover_tests(traceml_disabled_tests TEST_PREFIX "disabled: ")
set_target_properties(traceml_disabled_tests PROPERTIES TRACEML_NO_SESSION ON)

# ---- one definition rule, traits, threads (enabled build) -----------------------------------------
add_executable(traceml_two_tu_tests test_two_tu_a.cpp test_two_tu_b.cpp)
add_executable(traceml_traits_tests test_traits.cpp)
add_executable(traceml_thread_tests test_threads.cpp test_drain_bound.cpp)
foreach(t traceml_two_tu_tests traceml_traits_tests traceml_thread_tests)
  target_link_libraries(${t} PRIVATE traceml_core traceml_catch_main)
  target_compile_options(${t} PRIVATE ${TRACEML_TEST_WARNINGS})
endforeach()
catch_discover_tests(traceml_two_tu_tests TEST_PREFIX "odr: ")
catch_discover_tests(traceml_traits_tests TEST_PREFIX "traits: ")
catch_discover_tests(traceml_thread_tests TEST_PREFIX "threads: ")

# ---- phase.hpp needs nothing but the standard library: the compiler alone, no target, no flags ----
add_test(NAME bare_compile
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -I${PROJECT_SOURCE_DIR}/include
          -c ${CMAKE_CURRENT_SOURCE_DIR}/bare_phase.cpp -o ${CMAKE_CURRENT_BINARY_DIR}/bare_phase.o)
