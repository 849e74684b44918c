// traceml tools: reads one rank's per-step JSONL (the profiler's jsonl_path output, one line per
// step, docs/json-schema.md) into the steps that ranks.hpp merges: each step's wall time and the
// time inside its top-level communication phases. Needs nlohmann-json, so it stays outside the core.
//
//   auto steps = traceml::tools::read_rank_steps("rank1_steps.jsonl", /*rank=*/1);  // throws steps_error
//
// A last line without its newline that does not parse is a step the rank was writing when it
// stopped (killed, or its disk full): it is left out and said in `cut_line`, not an error. Any other
// line that is not a step is an error naming the file's line and the problem, and so is a step
// number that came before (two runs appended to one file). The file is refused as input_file.hpp
// says: not a regular file, over max_steps_bytes, a line over max_step_line_bytes or nested deeper
// than max_json_depth.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <traceml/analysis/ranks.hpp>

#include "input_file.hpp"

namespace traceml::tools {

class steps_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A rank's steps as read, and whether a cut last line was left out.
struct read_steps {
  rank_steps steps;
  bool cut_line = false;
  /// The lines carry their rank (a profiler that knew it, rank_identity.hpp): steps.rank is theirs,
  /// not the one the caller assumed from the file's place.
  bool labelled = false;
  /// What says which run the file belongs to (the same on every line, or the file is refused): the
  /// run's name ("" where the lines have none), the world size its lines say (0: none), and each
  /// step's micro-batches, in the order of steps.steps (the schedule: one run's ranks take the same).
  std::string run;
  int world_size = 0;
  std::vector<int> microbatches;
};

/// What a step line says beside its times: its run, rank and world size (-1, 0: none), micro-batches.
struct step_line_facts {
  std::string run;
  int rank = -1;
  int world_size = 0;
  int microbatches = 0;
};

/// The "rank" a step line carries (-1: none); throws steps_error when it is not a whole number >= 0.
inline int rank_of_line(const nlohmann::json& j) {
  const auto r = j.find("rank");
  if (r == j.end()) return -1;
  if (!r->is_number_unsigned() || r->get<std::uint64_t>() > 1000000)
    throw steps_error("\"rank\" is not a whole number from 0 to 1000000");
  return static_cast<int>(r->get<std::uint64_t>());
}

/// One step line; throws steps_error naming what is wrong. `rank`, when given, gets the line's
/// "rank" (-1: none); `facts`, when given, what else the line says of its run.
inline rank_step parse_step_line(std::string_view text, int* rank = nullptr, step_line_facts* facts = nullptr) {
  if (const std::size_t at = too_deep_at(text); at != std::string_view::npos)
    throw steps_error(too_deep_text() + " (column " + std::to_string(at + 1) + ")");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // a parse error, or a number beyond double's range (out_of_range)
    throw steps_error(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw steps_error("not a step object");
  if (rank) *rank = rank_of_line(j);
  if (facts) {
    facts->rank = rank_of_line(j);
    if (const auto run = j.find("run"); run != j.end()) {
      if (!run->is_string()) throw steps_error("\"run\" is not a string");
      facts->run = run->get<std::string>();
    }
    if (const auto w = j.find("world_size"); w != j.end()) {
      if (!w->is_number_unsigned() || w->get<std::uint64_t>() < 1 || w->get<std::uint64_t>() > 1000000)
        throw steps_error("\"world_size\" is not a whole number from 1 to 1000000");
      facts->world_size = static_cast<int>(w->get<std::uint64_t>());
    }
    if (const auto m = j.find("microbatches"); m != j.end()) {
      if (!m->is_number_unsigned() || m->get<std::uint64_t>() > 1000000000)
        throw steps_error("\"microbatches\" is not a whole number >= 0");
      facts->microbatches = static_cast<int>(m->get<std::uint64_t>());
    }
  }
  const auto step = j.find("step");
  const auto wall = j.find("wall_ms");
  // Bounded: a number beyond double's range (1e400) parses as infinity, and sums of absurd ones
  // overflow; either would make the ranks' differences nan. 1e15 ms is over 30,000 years.
  const auto plausible_ms = [](const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0 && v.get<double>() <= 1e15;
  };
  if (step == j.end() || !step->is_number_unsigned()) throw steps_error("\"step\" missing or not a whole number >= 0");
  if (wall == j.end() || !plausible_ms(*wall))
    throw steps_error("\"wall_ms\" missing or not a number of milliseconds from 0 to 1e15");
  rank_step out{step->get<std::uint64_t>(), wall->get<double>(), 0};
  const auto phases = j.find("phases");
  if (phases == j.end()) return out;
  if (!phases->is_array()) throw steps_error("\"phases\" is not an array");
  for (const auto& p : *phases) {
    if (!p.is_object()) throw steps_error("a phase is not an object");
    const auto kind = p.find("kind");
    const auto top = p.find("top_level");
    if (kind == p.end() || !kind->is_string() || *kind != "communication") continue;
    if (top != p.end() && top->is_boolean() && !top->get<bool>()) continue;  // nested: inside a top-level one
    const auto ms = p.find("wall_ms");
    if (ms == p.end() || !plausible_ms(*ms))
      throw steps_error(
          "a communication phase's \"wall_ms\" is missing or not a number of milliseconds from 0 to 1e15");
    out.communication_ms += ms->get<double>();
  }
  return out;
}

/// A rank's steps, read line by line (a file's text, or a file streamed): every line must be a step;
/// as rank `rank` unless the lines say whose they are: then every line must say the same rank (a file
/// of two ranks, or with lines of a rank and lines without, is an error: it was not written by one
/// rank's profiler). A step number may appear once (a file appended to by two runs has it twice).
class steps_parser {
 public:
  explicit steps_parser(int rank) { out_.steps.rank = rank; }

  /// The next line, without its newline; `last_without_newline`: the file ends in it. False when
  /// that line was cut (then it is the last). Throws steps_error "line N: ...".
  bool line(std::string_view line, bool last_without_newline) {
    ++line_no_;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
    try {
      step_line_facts facts;
      const rank_step st = parse_step_line(line, nullptr, &facts);
      const int line_rank = facts.rank;
      if (out_.steps.steps.empty()) {
        out_.run = facts.run;
        out_.world_size = facts.world_size;
      } else if (facts.run != out_.run) {
        throw steps_error("run \"" + facts.run + "\", where the lines before say run \"" + out_.run + "\"");
      } else if (facts.world_size != out_.world_size) {
        const auto said = [](int w) { return w ? "world size " + std::to_string(w) : std::string("no world size"); };
        throw steps_error(said(facts.world_size) + ", where the lines before say " + said(out_.world_size));
      }
      if (out_.steps.steps.empty() && line_rank >= 0) {
        out_.labelled = true;
        out_.steps.rank = line_rank;
      } else if ((line_rank >= 0) != out_.labelled || (out_.labelled && line_rank != out_.steps.rank)) {
        throw steps_error(line_rank < 0
                              ? "no \"rank\", where the lines before say rank " + std::to_string(out_.steps.rank)
                          : out_.labelled ? "rank " + std::to_string(line_rank) + ", where the lines before say rank " +
                                                std::to_string(out_.steps.rank)
                                          : "rank " + std::to_string(line_rank) + ", where the lines before say none");
      }
      out_.steps.steps.push_back(st);
      out_.microbatches.push_back(facts.microbatches);
      lines_.push_back(line_no_);
    } catch (const steps_error& e) {
      if (last_without_newline) {
        out_.cut_line = true;
        return false;
      }
      throw steps_error("line " + std::to_string(line_no_) + ": " + e.what());
    }
    return true;
  }

  /// The lines read so far.
  std::size_t lines() const noexcept { return line_no_; }

  /// The steps; throws steps_error naming the first line whose step number came before.
  read_steps finish() {
    const auto& steps = out_.steps.steps;
    std::vector<std::size_t> order(steps.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return steps[a].step < steps[b].step; });
    // The repeat on the earliest line, and the first line of its step (within a step, `order` keeps
    // the lines' order).
    std::size_t again = order.size(), first = 0;
    for (std::size_t k = 1, group = 0; k < order.size(); ++k) {
      if (steps[order[k]].step != steps[order[group]].step) {
        group = k;
      } else if (again == order.size() || order[k] < again) {
        again = order[k];
        first = order[group];
      }
    }
    if (again != order.size())
      throw steps_error("line " + std::to_string(lines_[again]) + ": step " + std::to_string(steps[again].step) +
                        " again (first on line " + std::to_string(lines_[first]) + ")");
    return std::move(out_);
  }

 private:
  read_steps out_;
  std::vector<std::size_t> lines_;  // the line of each step
  std::size_t line_no_ = 0;
};

/// Every step of a file's text, as rank `rank` unless its lines say whose they are (steps_parser).
inline read_steps parse_rank_steps(std::string_view text, int rank) {
  steps_parser p(rank);
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t nl = text.find('\n', begin);
    const bool last_without_newline = nl == std::string_view::npos;
    const std::string_view line = text.substr(begin, last_without_newline ? std::string_view::npos : nl - begin);
    begin = last_without_newline ? text.size() : nl + 1;
    if (!p.line(line, last_without_newline)) break;
  }
  return p.finish();
}

/// Every step of the file, as rank `rank`: read line by line, so memory holds one line and the steps
/// (input_file.hpp: a regular file, at most max_steps_bytes, lines of at most max_step_line_bytes).
inline read_steps read_rank_steps(const std::string& path, int rank) {
  try {
    input_file in(path, max_steps_bytes, "a per-step JSONL file");
    steps_parser p(rank);
    std::string pending;  // a line begun in an earlier block
    char buf[1 << 16];
    while (const std::size_t n = in.read(buf, sizeof buf)) {
      std::string_view block(buf, n);
      for (std::size_t nl; (nl = block.find('\n')) != std::string_view::npos; block.remove_prefix(nl + 1)) {
        if (pending.empty()) {
          p.line(block.substr(0, nl), false);
        } else {
          pending.append(block.substr(0, nl));
          p.line(pending, false);
          pending.clear();
        }
      }
      pending.append(block);
      if (pending.size() > max_step_line_bytes)
        throw steps_error("line " + std::to_string(p.lines() + 1) + ": longer than " + mib_text(max_step_line_bytes) +
                          " (a step's line is a few KB)");
    }
    if (!pending.empty()) p.line(pending, true);
    return p.finish();
  } catch (const file_error& e) {
    throw steps_error(e.what());
  }
}

}  // namespace traceml::tools
