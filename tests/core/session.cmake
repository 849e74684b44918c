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

# The phase-only MLP example (examples/minimal/phase_only.cpp), run with TRACEML_OUT: every output
# written, the session named in the summary. Without a GPU its session reports that and times on the CPU.
if(TRACEML_SESSION AND TARGET traceml_phase_only_example)
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/phase_only_output)
  add_test(NAME "examples: phase.hpp-only MLP writes its report with TRACEML_OUT"
    COMMAND sh -c "rm -rf '${_out}' && TRACEML_OUT='${_out}' '$<TARGET_FILE:traceml_phase_only_example>' >'${_out}.log' 2>&1 &&
      for f in summary.json steps.jsonl trace.json report.html; do test -s '${_out}/traceml_phase_only_example_'$f || exit 1; done &&
      grep -q '\"started_by\": *\"TRACEML_OUT\"' '${_out}/traceml_phase_only_example_summary.json' &&
      test $(wc -l < '${_out}/traceml_phase_only_example_steps.jsonl') -eq 60 &&
      grep -q 'collecting into' '${_out}.log'")
endif()
