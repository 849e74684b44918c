# The HTML report, included from this folder's CMakeLists.txt: structure, escaping and chart
# geometry (test_html.cpp), and, where Debian's chromium is installed, a headless-browser rendering.

add_executable(traceml_html_tests test_html.cpp)
target_link_libraries(traceml_html_tests PRIVATE traceml_core traceml_catch_main)
target_compile_options(traceml_html_tests PRIVATE ${TRACEML_TEST_WARNINGS})
catch_discover_tests(traceml_html_tests TEST_PREFIX "html: ")

# Writes the sample experiment's report (three schedules with GPU facts) to the path it is given.
add_executable(traceml_html_sample html_sample.cpp)
target_link_libraries(traceml_html_sample PRIVATE traceml_core)
target_compile_options(traceml_html_sample PRIVATE ${TRACEML_TEST_WARNINGS})

find_program(TRACEML_CHROMIUM chromium)
if(TRACEML_CHROMIUM)
  add_test(NAME "html: renders in headless chromium"
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/html_browser_test.sh
            ${TRACEML_CHROMIUM} $<TARGET_FILE:traceml_html_sample> ${CMAKE_CURRENT_BINARY_DIR}/html_browser)
  set_tests_properties("html: renders in headless chromium" PROPERTIES LABELS browser TIMEOUT 240)
else()
  message(STATUS "traceml: chromium not found; the HTML report's browser test is off (apt-get install chromium)")
endif()
