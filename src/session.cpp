// The TRACEML_OUT session (include/traceml/session.hpp): compiled once per build tree, an object
// library linked into every target that links traceml::traceml (cmake/traceml_components.cmake), so
// that a trainer which only includes <traceml/phase.hpp> writes its report with TRACEML_OUT=<dir>.
// Switch it off with -DTRACEML_SESSION=OFF when configuring traceml.
#include <traceml/session.hpp>
