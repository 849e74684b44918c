# The TRACEML_OUT session: a program that includes only phase.hpp, run by test_session.cpp with and
# without TRACEML_OUT. Included from this folder's CMakeLists.txt.
if(TRACEML_SESSION)
  add_executable(traceml_phase_only_trainer phase_only_trainer.cpp)
  target_link_libraries(traceml_phase_only_trainer PRIVATE traceml::traceml)
  target_compile_options(traceml_phase_only_trainer PRIVATE ${TRACEML_TEST_WARNINGS})

  add_executable(traceml_session_tests test_session.cpp)
  target_link_libraries(traceml_session_tests PRIVATE traceml::traceml traceml_catch_main nlohmann_json::nlohmann_json)
  target_compile_options(traceml_session_tests PRIVATE ${TRACEML_TEST_WARNINGS})
  target_compile_definitions(traceml_session_tests PRIVATE
    TRACEML_TEST_TRAINER="$<TARGET_FILE:traceml_phase_only_trainer>")
  add_dependencies(traceml_session_tests traceml_phase_only_trainer)
  catch_discover_tests(traceml_session_tests TEST_PREFIX "session: ")
endif()
