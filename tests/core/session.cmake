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

  # The same trainer linked with traceml::cupti: the session's GPU part (compiled once, like the
  # session) is linked in and makes the GPU source, so its status says why there is no GPU data here
  # rather than that the program was built without traceml::cupti.
  if(TARGET traceml::cupti)
    add_executable(traceml_phase_only_gpu_trainer phase_only_trainer.cpp)
    target_link_libraries(traceml_phase_only_gpu_trainer PRIVATE traceml::cupti)
    target_compile_options(traceml_phase_only_gpu_trainer PRIVATE ${TRACEML_TEST_WARNINGS})
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/session_gpu_output)
    add_test(NAME "session: a traceml::cupti trainer's session has the GPU part"
      COMMAND sh -c "rm -rf '${_out}' && TRACEML_OUT='${_out}' '$<TARGET_FILE:traceml_phase_only_gpu_trainer>' >'${_out}.log' 2>&1 &&
        grep -q '\"status\": *\"' '${_out}/traceml_phase_only_gpu_trainer_summary.json' &&
        ! grep -q 'built without traceml::cupti' '${_out}/traceml_phase_only_gpu_trainer_summary.json'")
  endif()
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
