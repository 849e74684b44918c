# SIGINT and SIGTERM: the stop-signal guard in the test process, and profiler_options::finish_on_signal
# in a trainer that sends itself the signal (signal_trainer.cpp), run by test_stop_signal.cpp.
# POSIX only (posix_spawn, waitpid). Included from this folder's CMakeLists.txt.
if(NOT UNIX)
  return()
endif()
add_executable(traceml_signal_trainer signal_trainer.cpp)
target_link_libraries(traceml_signal_trainer PRIVATE traceml::traceml)
target_compile_options(traceml_signal_trainer PRIVATE ${TRACEML_TEST_WARNINGS})

add_executable(traceml_signal_tests test_stop_signal.cpp)
target_link_libraries(traceml_signal_tests PRIVATE traceml::traceml traceml_catch_main nlohmann_json::nlohmann_json)
target_compile_options(traceml_signal_tests PRIVATE ${TRACEML_TEST_WARNINGS})
target_compile_definitions(traceml_signal_tests PRIVATE TRACEML_TEST_SIGNAL_TRAINER="$<TARGET_FILE:traceml_signal_trainer>")
add_dependencies(traceml_signal_tests traceml_signal_trainer)
catch_discover_tests(traceml_signal_tests TEST_PREFIX "signals: ")
set_target_properties(traceml_signal_trainer traceml_signal_tests PROPERTIES TRACEML_NO_SESSION ON)
