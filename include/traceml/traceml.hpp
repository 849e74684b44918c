// traceml: everything in the core (no dependencies beyond the C++17 standard library).
// GPU sources and the LibTorch adapter are separate headers, each needing its own dependency.
#pragma once
#include "traceml/callback.hpp"
#include "traceml/compare.hpp"
#include "traceml/config.hpp"
#include "traceml/gpu/gpu_source.hpp"
#include "traceml/phase.hpp"
#include "traceml/profiler.hpp"
#include "traceml/run_accumulator.hpp"
#include "traceml/sinks/chrome_trace.hpp"
#include "traceml/sinks/comparison_json.hpp"
#include "traceml/sinks/comparison_table.hpp"
#include "traceml/sinks/html_report.hpp"
#include "traceml/sinks/json_summary.hpp"
#include "traceml/sinks/report_table.hpp"
#include "traceml/stats.hpp"
#include "traceml/summary.hpp"
