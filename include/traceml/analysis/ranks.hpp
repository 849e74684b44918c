// traceml: several ranks of one data-parallel run, side by side. Each rank profiles itself; given
// the per-step times of every rank (their per-step JSONL, or steps gathered in memory), this says
// how long each rank's steps took, which rank was the slowest on each step, how far the ranks were
// apart (skew), and who waited for whom. A rank whose steps never arrived is named as missing.
//
//   std::vector<traceml::rank_steps> got = ...;          // one entry per rank that reported
//   auto m = traceml::merge_ranks(got, /*world_size=*/4, /*warmup=*/5);
//   std::fputs(traceml::format_rank_table(m).c_str(), stdout);
//
// Why "compute": in synchronous data parallelism every rank leaves the gradient all-reduce together,
// so step times come out nearly equal and hide the straggler. What differs is the time a rank spent
// outside its communication phases (its compute); the rank with the most compute arrives last at the
// all-reduce, and every other rank waits inside communication for the difference. So the slowest
// rank of a step is the one with the longest compute, and a rank's wait on a step is the slowest
// rank's compute minus its own. Without communication phases compute is the whole step.
//
// One sample set: every figure is over the same steps, those that every present rank recorded
// after the warm-up (a step one rank lacks, because it died or its file was cut, is left out of all
// of them, and counted).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "traceml/analysis/stats.hpp"
#include "traceml/analysis/summary.hpp"
#include "traceml/config.hpp"
#include "traceml/detail/format.hpp"

TRACEML_BEGIN_NAMESPACE

/// One step of one rank.
struct rank_step {
  std::uint64_t step = 0;
  double wall_ms = 0;           ///< the whole step
  double communication_ms = 0;  ///< inside communication phases (0 where there are none)
};

/// What one rank recorded.
struct rank_steps {
  int rank = 0;
  std::vector<rank_step> steps;
};

/// One rank over the compared steps.
struct rank_summary {
  int rank = 0;
  bool present = false;      ///< its steps arrived
  std::size_t recorded = 0;  ///< steps it recorded (before warm-up and the common-steps filter)
  summary_stats step_ms, compute_ms, communication_ms;
  summary_stats wait_ms;       ///< per step: the slowest rank's compute minus this rank's
  std::size_t slowest_on = 0;  ///< compared steps on which this rank was the slowest
};

/// One compared step across the ranks.
struct rank_step_view {
  std::uint64_t step = 0;
  int slowest_rank = 0;        ///< the longest compute (the last to arrive at the all-reduce)
  double step_skew_ms = 0;     ///< max - median of the ranks' step times
  double compute_skew_ms = 0;  ///< max - median of the ranks' compute times
};

/// The ranks merged.
struct rank_merge {
  int world_size = 0;
  std::size_t warmup = 0;
  std::vector<int> missing;            ///< ranks below world_size with no steps
  std::vector<rank_summary> ranks;     ///< one per rank, 0..world_size-1 (missing ones: present false)
  std::vector<rank_step_view> steps;   ///< the compared steps, in order
  std::size_t dropped_not_common = 0;  ///< post-warm-up steps left out because a present rank lacks them
  summary_stats step_skew_ms, compute_skew_ms;
  bool has_communication = false;  ///< any rank recorded communication time
  int most_often_slowest = -1;     ///< the straggler: slowest on the most compared steps (-1: none)
};

/// A rank's steps from its profiler's run (the steps the run keeps: all of them up to
/// profiler_options::keep_steps; read back from a summary, those whose list fits in its bound,
/// json_summary.hpp): each step's wall time and its top-level communication phases.
inline rank_steps rank_steps_of(const run_result& run, int rank) {
  rank_steps out{rank, {}};
  for (const auto& st : run.steps) {
    if (st.step < 0) continue;
    rank_step r{static_cast<std::uint64_t>(st.step), st.wall_ms, 0};
    for (const auto& p : st.phases)
      if (p.kind == phase_kind::communication && p.top_level) r.communication_ms += p.wall_ms;
    out.steps.push_back(r);
  }
  return out;
}

namespace detail {
/// max - median of one value per present rank.
inline double spread_above_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.back() - quantile_sorted(v, 0.5);
}

/// Each rank's steps numbered `m.warmup` or later, by step number; marks the ranks of `m` that
/// reported steps as present (with their count) and notes communication time. Throws on a rank
/// outside the world, a rank reported twice or a step twice.
inline std::vector<std::map<std::uint64_t, rank_step>> steps_by_rank(const std::vector<rank_steps>& reported,
                                                                     rank_merge& m) {
  const int world_size = m.world_size;
  const std::size_t warmup = m.warmup;
  std::vector<std::map<std::uint64_t, rank_step>> by_step(static_cast<std::size_t>(world_size));
  for (const auto& rs : reported) {
    if (rs.rank < 0 || rs.rank >= world_size)
      throw std::invalid_argument("merge_ranks: rank " + std::to_string(rs.rank) + " is outside 0.." +
                                  std::to_string(world_size - 1) + " (world size " + std::to_string(world_size) + ")");
    auto& summary = m.ranks[static_cast<std::size_t>(rs.rank)];
    if (summary.present)
      throw std::invalid_argument("merge_ranks: rank " + std::to_string(rs.rank) + " reported twice");
    if (rs.steps.empty()) continue;  // nothing arrived: missing
    summary.present = true;
    summary.recorded = rs.steps.size();
    for (const auto& st : rs.steps) {
      if (st.step < warmup) continue;
      if (!by_step[static_cast<std::size_t>(rs.rank)].emplace(st.step, st).second)
        throw std::invalid_argument("merge_ranks: rank " + std::to_string(rs.rank) + " has step " +
                                    std::to_string(st.step) + " twice");
      if (st.communication_ms > 0) m.has_communication = true;
    }
  }
  return by_step;
}
}  // namespace detail

/// Merges the ranks that reported. world_size >= 1; each rank in 0..world_size-1 at most once;
/// a rank with no steps counts as missing. Steps numbered below `warmup` are left out.
inline rank_merge merge_ranks(const std::vector<rank_steps>& reported, int world_size, std::size_t warmup = 0) {
  if (world_size < 1)
    throw std::invalid_argument("merge_ranks: world size " + std::to_string(world_size) + " (must be at least 1)");
  rank_merge m;
  m.world_size = world_size;
  m.warmup = warmup;
  m.ranks.resize(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) m.ranks[static_cast<std::size_t>(r)].rank = r;

  // Per rank: step -> (wall, communication), after warm-up.
  const auto by_step = detail::steps_by_rank(reported, m);
  std::vector<int> present;
  for (const auto& s : m.ranks) (s.present ? present : m.missing).push_back(s.rank);
  if (present.empty()) return m;

  // The compared steps: on every present rank.
  std::set<std::uint64_t> all_steps;
  for (int r : present)
    for (const auto& [step, st] : by_step[static_cast<std::size_t>(r)]) all_steps.insert(step);
  std::vector<std::vector<double>> step_ms(static_cast<std::size_t>(world_size)), compute(step_ms), comm(step_ms),
      wait(step_ms);
  std::vector<double> step_skews, compute_skews;
  for (std::uint64_t step : all_steps) {
    bool everywhere = true;
    for (int r : present) everywhere = everywhere && by_step[static_cast<std::size_t>(r)].count(step);
    if (!everywhere) {
      m.dropped_not_common += 1;
      continue;
    }
    std::vector<double> walls, computes;
    rank_step_view v;
    v.step = step;
    double slowest_compute = -1;
    for (int r : present) {
      const auto& st = by_step[static_cast<std::size_t>(r)].at(step);
      const double c = std::max(0.0, st.wall_ms - st.communication_ms);
      walls.push_back(st.wall_ms);
      computes.push_back(c);
      if (c > slowest_compute) {  // ties go to the lower rank
        slowest_compute = c;
        v.slowest_rank = r;
      }
    }
    v.step_skew_ms = detail::spread_above_median(walls);
    v.compute_skew_ms = detail::spread_above_median(computes);
    for (std::size_t i = 0; i < present.size(); ++i) {
      const auto r = static_cast<std::size_t>(present[i]);
      step_ms[r].push_back(walls[i]);
      compute[r].push_back(computes[i]);
      comm[r].push_back(walls[i] - computes[i]);
      wait[r].push_back(slowest_compute - computes[i]);
    }
    m.ranks[static_cast<std::size_t>(v.slowest_rank)].slowest_on += 1;
    step_skews.push_back(v.step_skew_ms);
    compute_skews.push_back(v.compute_skew_ms);
    m.steps.push_back(v);
  }
  for (int r : present) {
    auto& s = m.ranks[static_cast<std::size_t>(r)];
    const auto i = static_cast<std::size_t>(r);
    s.step_ms = summarize(step_ms[i]);
    s.compute_ms = summarize(compute[i]);
    s.communication_ms = summarize(comm[i]);
    s.wait_ms = summarize(wait[i]);
    if (s.slowest_on > 0 &&
        (m.most_often_slowest < 0 || s.slowest_on > m.ranks[static_cast<std::size_t>(m.most_often_slowest)].slowest_on))
      m.most_often_slowest = r;
  }
  m.step_skew_ms = summarize(step_skews);
  m.compute_skew_ms = summarize(compute_skews);
  return m;
}

/// The merged ranks as a table, with the skew and who waited for whom in words.
inline std::string format_rank_table(const rank_merge& m) {
  const auto num = [](double v, int digits = 1) { return detail::fixed_text(v, digits); };  // locale-proof
  const auto list = [](const std::vector<int>& v) {
    std::string s;
    for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
  };
  const std::size_t present = static_cast<std::size_t>(m.world_size) - m.missing.size();
  std::string out = "ranks: " + std::to_string(present) + " of " + std::to_string(m.world_size) + " reported";
  out += m.missing.empty() ? ""
                           : "; missing: rank" + std::string(m.missing.size() > 1 ? "s " : " ") + list(m.missing) +
                                 " (no steps arrived: it died, hung or wrote nothing)";
  out += "\n";
  if (present == 0) return out + "nothing to compare\n";
  out += std::to_string(m.steps.size()) + " steps compared: those every reporting rank recorded";
  if (m.warmup) out += ", after " + std::to_string(m.warmup) + " warm-up";
  if (m.dropped_not_common) out += " (" + std::to_string(m.dropped_not_common) + " more left out: not on every rank)";
  out += "\n";
  if (m.steps.empty()) return out;

  char line[200];
  std::snprintf(line, sizeof line, "%-6s %9s %11s %11s %11s %11s %12s\n", "rank", "recorded", "step ms", "compute ms",
                "comm ms", "waits ms", "slowest on");
  out += line;
  out += std::string(78, '-') + "\n";
  for (const auto& s : m.ranks) {
    if (!s.present) {
      std::snprintf(line, sizeof line, "%-6d %9s  missing\n", s.rank, "-");
      out += line;
      continue;
    }
    const std::string slowest =
        std::to_string(s.slowest_on) + " (" +
        num(100.0 * static_cast<double>(s.slowest_on) / static_cast<double>(m.steps.size()), 0) + "%)";
    std::snprintf(line, sizeof line, "%-6d %9zu %11s %11s %11s %11s %12s\n", s.rank, s.recorded,
                  num(s.step_ms.median).c_str(), num(s.compute_ms.median).c_str(),
                  num(s.communication_ms.median).c_str(), num(s.wait_ms.median).c_str(), slowest.c_str());
    out += line;
  }
  out += "medians over the " + std::to_string(m.steps.size()) +
         " compared steps; compute: the step outside communication phases;\nwaits: the slowest rank's compute minus "
         "this rank's, per step\n";
  out += "skew (max - median over ranks) of step time: median " + num(m.step_skew_ms.median, 2) + " ms, p90 " +
         num(m.step_skew_ms.p90, 2) + " ms, max " + num(m.step_skew_ms.max, 2) + " ms;\n  of compute: median " +
         num(m.compute_skew_ms.median, 2) + " ms, p90 " + num(m.compute_skew_ms.p90, 2) + " ms, max " +
         num(m.compute_skew_ms.max, 2) + " ms\n";
  if (m.world_size - static_cast<int>(m.missing.size()) < 2) return out;
  if (!m.has_communication)
    out +=
        "no communication phase recorded: the slowest rank is the one with the longest step, and waits are "
        "the difference in step time\n";
  if (m.most_often_slowest >= 0) {
    const auto& s = m.ranks[static_cast<std::size_t>(m.most_often_slowest)];
    std::vector<double> others_wait;
    for (const auto& o : m.ranks)
      if (o.present && o.rank != s.rank) others_wait.push_back(o.wait_ms.median);
    const auto w = summarize(others_wait);
    out += "rank " + std::to_string(s.rank) + " was the slowest on " + std::to_string(s.slowest_on) + " of " +
           std::to_string(m.steps.size()) + " steps; the other ranks waited for the slowest a median " +
           (w.min == w.max ? num(w.min) : num(w.min) + ".." + num(w.max)) + " ms per step\n";
  }
  return out;
}

TRACEML_END_NAMESPACE
