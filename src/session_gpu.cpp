// The TRACEML_OUT session's GPU part (include/traceml/session_gpu.hpp): compiled once per build tree
// and linked into every target that links traceml::cupti (cmake/traceml_components.cmake).
#include <traceml/session_gpu.hpp>
