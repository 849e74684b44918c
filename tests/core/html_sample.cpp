// Writes the sample accumulation experiment as an HTML report, for the browser test
// (html_browser_test.sh) and for looking at the report by eye.
//   traceml_html_sample report.html
#include <cstdio>

#include "html_sample.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <report.html>\n", argv[0]);
    return 2;
  }
  return traceml::write_html_report(argv[1], traceml_test::sample_experiment(), "Accumulation experiment (sample)") ? 0 : 1;
}
