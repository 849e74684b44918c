// Compiled into every CMake target that links traceml::traceml (an interface source), so that a
// trainer which only includes <traceml/phase.hpp> writes its report with TRACEML_OUT=<dir>
// (session.hpp says how). Switch it off with -DTRACEML_SESSION=OFF when configuring traceml.
#include <traceml/session.hpp>
