// Writes the sample accumulation experiment as an HTML report, for the browser test
// (html_browser_test.sh) and for looking at the report by eye.
//   traceml_html_sample report.html
#include <cstdio>
#include <string>

#include "html_sample.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <report.html>\n", argv[0]);
    return 2;
  }
  // The explanation is plain text with characters that must be escaped, as a comparison engine may write.
  const std::string explanation =
      "4x1 is the fastest: one micro-batch of 4 launches a quarter of the kernels of 1x4 (<4 small ones> & "
      "\"fused\"), so the GPU idles less between launches.\n\nThe ratios are of median step times.";
  // With hardware counters, so that the browser also renders the activity chart.
  return traceml::write_html_report(argv[1], traceml_test::sample_experiment(true), "Accumulation experiment (sample)",
                                    explanation)
             ? 0
             : 1;
}
