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
#define TRACEML_BEGIN_NAMESPACE namespace traceml { inline namespace v0 {
#define TRACEML_END_NAMESPACE } }

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
