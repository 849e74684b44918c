// The TRACEML_OUT session's LibTorch part (include/traceml/session_torch.hpp): compiled once per build
// tree and linked into every target that links traceml::torch with CUDA (cmake/traceml_components.cmake).
#include <traceml/session_torch.hpp>
