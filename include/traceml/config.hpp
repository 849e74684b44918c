// traceml: build-time configuration shared by every header.
//
//   TRACEML_DISABLE   compile every scope and macro to nothing; types stay so user code still builds.
//   TRACEML_NO_NVTX   do not emit NVTX ranges even when the NVTX3 headers are on the include path.
#pragma once

#define TRACEML_VERSION_MAJOR 0
#define TRACEML_VERSION_MINOR 1
#define TRACEML_VERSION_PATCH 0
#define TRACEML_VERSION_STRING "0.1.0"

// A versioned inline namespace keeps two different traceml versions linked into one program from
// silently sharing (and breaking) each other's inline state.
#define TRACEML_BEGIN_NAMESPACE \
  namespace traceml {           \
  inline namespace v0 {
#define TRACEML_END_NAMESPACE \
  }                           \
  }

#define TRACEML_CONCAT_IMPL(a, b) a##b
#define TRACEML_CONCAT(a, b) TRACEML_CONCAT_IMPL(a, b)

#if defined(TRACEML_DISABLE)
#define TRACEML_ENABLED 0
#else
#define TRACEML_ENABLED 1
#endif

#if TRACEML_ENABLED && !defined(TRACEML_NO_NVTX) && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define TRACEML_HAS_NVTX 1
#endif
#endif
#ifndef TRACEML_HAS_NVTX
#define TRACEML_HAS_NVTX 0
#endif

// Everything whose body depends on the two switches above (scopes, hooks, the profiler) lives in a
// further inline namespace named after the mode. A program whose translation units were built in
// different modes (one with NVTX headers on its include path, one without; one with TRACEML_DISABLE)
// then gets each TU's own definitions instead of an ODR violation where the linker keeps one at
// random; the recorder's state stays shared.
#if !TRACEML_ENABLED
#define TRACEML_MODE_NAMESPACE mode_off
#elif TRACEML_HAS_NVTX
#define TRACEML_MODE_NAMESPACE mode_nvtx
#else
#define TRACEML_MODE_NAMESPACE mode_plain
#endif
#define TRACEML_BEGIN_MODE_NAMESPACE inline namespace TRACEML_MODE_NAMESPACE {
#define TRACEML_END_MODE_NAMESPACE }
