// traceml tools: reads one rank's per-step JSONL (the profiler's jsonl_path output, one line per
// step, docs/json-schema.md) into the steps that ranks.hpp merges: each step's wall time and the
// time inside its top-level communication phases. Needs nlohmann-json, so it stays outside the core.
//
//   auto steps = traceml::tools::read_rank_steps("rank1_steps.jsonl", /*rank=*/1);  // throws steps_error
//
// A last line without its newline that does not parse is a step the rank was writing when it
// stopped (killed, or its disk full): it is left out and said in `cut_line`, not an error. Any other
// line that is not a step is an error naming the file's line and the problem.
#pragma once
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>
#include <traceml/ranks.hpp>

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
/// "rank" (-1: none).
inline rank_step parse_step_line(const std::string& text, int* rank = nullptr) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // a parse error, or a number beyond double's range (out_of_range)
    throw steps_error(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw steps_error("not a step object");
  if (rank) *rank = rank_of_line(j);
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
      throw steps_error("a communication phase's \"wall_ms\" is missing or not a number of milliseconds from 0 to 1e15");
    out.communication_ms += ms->get<double>();
  }
  return out;
}

/// Every step of a file's text, as rank `rank` unless its lines say whose they are: then every line
/// must say the same rank (a file of two ranks, or with lines of a rank and lines without, is an
/// error: it was not written by one rank's profiler).
inline read_steps parse_rank_steps(const std::string& text, int rank) {
  read_steps out;
  out.steps.rank = rank;
  std::size_t begin = 0, line_no = 0;
  while (begin < text.size()) {
    ++line_no;
    const std::size_t nl = text.find('\n', begin);
    const bool last_without_newline = nl == std::string::npos;
    const std::string line = text.substr(begin, last_without_newline ? std::string::npos : nl - begin);
    begin = last_without_newline ? text.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      int line_rank = -1;
      out.steps.steps.push_back(parse_step_line(line, &line_rank));
      if (out.steps.steps.size() == 1 && line_rank >= 0) {
        out.labelled = true;
        out.steps.rank = line_rank;
      } else if ((line_rank >= 0) != out.labelled || (out.labelled && line_rank != out.steps.rank)) {
        out.steps.steps.pop_back();
        throw steps_error(line_rank < 0 ? "no \"rank\", where the lines before say rank " + std::to_string(out.steps.rank)
                          : out.labelled ? "rank " + std::to_string(line_rank) + ", where the lines before say rank " +
                                               std::to_string(out.steps.rank)
                                         : "rank " + std::to_string(line_rank) + ", where the lines before say none");
      }
    } catch (const steps_error& e) {
      if (last_without_newline) {
        out.cut_line = true;
        break;
      }
      throw steps_error("line " + std::to_string(line_no) + ": " + e.what());
    }
  }
  return out;
}

/// Every step of the file, as rank `rank`.
inline read_steps read_rank_steps(const std::string& path, int rank) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw steps_error("is a directory, not a per-step JSONL file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw steps_error("cannot read: " + std::string(std::strerror(errno ? errno : ENOENT)));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_rank_steps(buffer.str(), rank);
}

}  // namespace traceml::tools
