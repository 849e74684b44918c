// The HTML report: a document a parser accepts (every tag we open is closed, every '<' and '&' in
// text is markup or an entity), names escaped, chart geometry that follows the numbers, the legend,
// the comparison table's ratios, byte-for-byte determinism, and the profiler's html_path.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "html_sample.hpp"
#include "mixed_run.hpp"
#include "test_helpers.hpp"

using namespace traceml;

namespace {

// ---- a tiny, strict tokenizer for the subset of HTML the report uses ------------------------------

struct tag {
  std::string name;
  std::map<std::string, std::string> attrs;  // values as written (entities not decoded)
  bool closing = false;
  bool self_closing = false;
  std::size_t begin = 0, end = 0;  // [begin, end) of the tag in the document
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == ':';
}

/// Every '&' starts an entity (&name; or &#digits;). Throws otherwise.
void check_entities(const std::string& s, std::size_t from, std::size_t to, std::size_t doc_pos) {
  for (std::size_t i = from; i < to; ++i) {
    if (s[i] != '&') continue;
    std::size_t j = i + 1;
    if (j < to && s[j] == '#') ++j;
    const std::size_t start = j;
    while (j < to && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= '0' && s[j] <= '9'))) ++j;
    if (j == start || j >= to || s[j] != ';')
      throw std::runtime_error("bare '&' at " + std::to_string(doc_pos + i - from));
  }
}

/// All tags of `doc`, in order. Throws on anything this checker does not accept: a '<' in text that
/// starts no tag, a '>' or bare '&' in text, an unquoted attribute, a '<' or '>' inside a value.
std::vector<tag> tokenize(const std::string& doc) {
  std::vector<tag> tags;
  std::size_t i = 0;
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(what + " at offset " + std::to_string(i) + ": '" + doc.substr(i, 60) + "'");
  };
  while (i < doc.size()) {
    const std::size_t lt = doc.find('<', i);
    const std::size_t text_end = lt == std::string::npos ? doc.size() : lt;
    if (doc.find('>', i) < text_end) fail("'>' in text");
    check_entities(doc, i, text_end, i);
    if (lt == std::string::npos) break;
    i = lt;
    if (doc.compare(i, 9, "<!DOCTYPE") == 0) {
      i = doc.find('>', i) + 1;
      continue;
    }
    if (doc.compare(i, 4, "<!--") == 0) {
      i = doc.find("-->", i) + 3;
      continue;
    }
    tag t;
    t.begin = i;
    ++i;
    if (i < doc.size() && doc[i] == '/') {
      t.closing = true;
      ++i;
    }
    const std::size_t name_start = i;
    while (i < doc.size() && is_name_char(doc[i])) ++i;
    if (i == name_start) fail("'<' that starts no tag");
    t.name = doc.substr(name_start, i - name_start);
    for (;;) {
      while (i < doc.size() && doc[i] == ' ') ++i;
      if (i >= doc.size()) fail("unterminated tag");
      if (doc[i] == '>') {
        ++i;
        break;
      }
      if (doc.compare(i, 2, "/>") == 0) {
        t.self_closing = true;
        i += 2;
        break;
      }
      if (t.closing) fail("attribute in a closing tag");
      const std::size_t a = i;
      while (i < doc.size() && is_name_char(doc[i])) ++i;
      if (i == a) fail("bad attribute");
      const std::string key = doc.substr(a, i - a);
      if (doc.compare(i, 2, "=\"") != 0) fail("unquoted attribute");
      i += 2;
      const std::size_t q = doc.find('"', i);
      if (q == std::string::npos) fail("unterminated value");
      const std::string value = doc.substr(i, q - i);
      if (value.find_first_of("<>") != std::string::npos) fail("'<' or '>' in an attribute value");
      check_entities(doc, i, q, i);
      if (!t.attrs.emplace(key, value).second) fail("duplicate attribute " + key);
      i = q + 1;
    }
    t.end = i;
    tags.push_back(t);
    // Raw text elements: their content is not markup.
    if (!t.closing && (t.name == "style" || t.name == "script")) {
      const std::size_t close = doc.find("</" + t.name + ">", i);
      if (close == std::string::npos) fail("unclosed " + t.name);
      i = close;
    }
  }
  return tags;
}

const std::set<std::string> void_elements = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"};

/// Every element we open is closed, in order; returns the number of elements.
std::size_t check_balanced(const std::vector<tag>& tags) {
  std::vector<std::string> open;
  std::size_t elements = 0;
  for (const auto& t : tags) {
    if (t.closing) {
      if (open.empty()) throw std::runtime_error("</" + t.name + "> closes nothing");
      if (open.back() != t.name) throw std::runtime_error("</" + t.name + "> closes <" + open.back() + ">");
      open.pop_back();
      continue;
    }
    ++elements;
    if (t.self_closing || void_elements.count(t.name)) continue;
    open.push_back(t.name);
  }
  if (!open.empty()) throw std::runtime_error("<" + open.back() + "> never closed");
  return elements;
}

/// The tags inside the element that opens at tags[open_index] (exclusive of its own tags).
std::vector<tag> children(const std::vector<tag>& tags, std::size_t open_index) {
  std::vector<tag> out;
  int depth = 0;
  for (std::size_t i = open_index + 1; i < tags.size(); ++i) {
    const auto& t = tags[i];
    if (t.closing) {
      if (depth == 0) break;
      --depth;
    } else if (!t.self_closing && !void_elements.count(t.name)) {
      ++depth;
    }
    out.push_back(t);
  }
  return out;
}

std::size_t find_id(const std::vector<tag>& tags, const std::string& id) {
  for (std::size_t i = 0; i < tags.size(); ++i) {
    auto it = tags[i].attrs.find("id");
    if (!tags[i].closing && it != tags[i].attrs.end() && it->second == id) return i;
  }
  throw std::runtime_error("no element with id " + id);
}

bool has_id(const std::vector<tag>& tags, const std::string& id) {
  for (const auto& t : tags)
    if (!t.closing && t.attrs.count("id") && t.attrs.at("id") == id) return true;
  return false;
}

/// Text between a tag's end and the next tag.
std::string text_after(const std::string& doc, const tag& t) { return doc.substr(t.end, doc.find('<', t.end) - t.end); }

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- hand-made runs with round numbers, for geometry ------------------------------------------

/// `steps` identical steps: the summary's means are exactly these values.
run_result flat_run(const std::string& name, double data, double fwd, double bwd, double opt, double residual,
                    int steps = 6) {
  std::vector<step_result> v;
  for (int i = 0; i < steps; ++i) {
    step_result st;
    st.step = i;
    st.phases.push_back({phase_kind::dataloader, "dataloader", data, 1, true});
    st.phases.push_back({phase_kind::forward, "forward", fwd, 1, true});
    st.phases.push_back({phase_kind::backward, "backward", bwd, 1, true});
    st.phases.push_back({phase_kind::optimizer, "optimizer", opt, 1, true});
    st.residual_ms = residual;
    st.wall_ms = data + fwd + bwd + opt + residual;
    v.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = v;
  r.summary = summarize_run(v, 1);
  return r;
}

/// A run whose measured steps take `walls` ms (one forward phase each, no warm-up): its median and
/// mean are whatever the list makes them.
run_result walls_run(const std::string& name, const std::vector<double>& walls) {
  std::vector<step_result> v;
  for (std::size_t i = 0; i < walls.size(); ++i) {
    step_result st;
    st.step = static_cast<std::int32_t>(i);
    st.phases.push_back({phase_kind::forward, "forward", walls[i], 1, true});
    st.wall_ms = walls[i];
    v.push_back(st);
  }
  run_result r;
  r.name = name;
  r.steps = v;
  r.summary = summarize_run(v, 0);
  return r;
}

/// The values of `attr` on the opening `name` tags with class `cls` among `tags`.
std::vector<std::string> attrs_of(const std::vector<tag>& tags, const std::string& name, const std::string& cls,
                                  const std::string& attr) {
  std::vector<std::string> out;
  for (const auto& t : tags)
    if (!t.closing && t.name == name && t.attrs.count("class") && t.attrs.at("class") == cls && t.attrs.count(attr))
      out.push_back(t.attrs.at(attr));
  return out;
}

}  // namespace

TEST_CASE("html escaping covers markup characters and drops control characters", "[html]") {
  CHECK(detail::html::escape("void f<int>(a&b)") == "void f&lt;int&gt;(a&amp;b)");
  CHECK(detail::html::escape("say \"hi\" 'x'") == "say &quot;hi&quot; &#39;x&#39;");
  CHECK(detail::html::escape(std::string("a\x01"
                                         "b\tc")) == "a b\tc");
  CHECK(detail::html::escape("caf\xC3\xA9") == "caf\xC3\xA9");  // UTF-8 passes through
}

TEST_CASE("html numbers: fixed decimals, no negative zero, an en dash for non-finite", "[html]") {
  using namespace detail::html;
  CHECK(fixed(1.005, 1) == "1.0");
  CHECK(fixed(-0.0001, 2) == "0.00");
  CHECK(fixed(std::numeric_limits<double>::quiet_NaN(), 2) == "&ndash;");
  CHECK(ms(1234.56) == "1234.6");
  CHECK(ms(12.345) == "12.35");  // rounding of the binary value: 12.345 is 12.3449999...
  CHECK(ms(0.1234) == "0.123");
  CHECK(tick_label(2.5) == "2.5");
  CHECK(tick_label(40) == "40");
  CHECK(pct(0.4567) == "45.7%");
  const auto a = nice_axis(100);
  CHECK(a.max == Approx(100));
  CHECK(a.step == Approx(20));
  CHECK(nice_axis(87).max == Approx(100));
  CHECK(nice_axis(0.37).max == Approx(0.4));
  CHECK(nice_axis(0).max == Approx(1));
  CHECK(shorten("\xC3\xA9\xC3\xA9\xC3\xA9", 4) == "\xC3\xA9\xE2\x80\xA6");  // never cuts a character in half
}

TEST_CASE("the report is well-formed: every tag is closed, text holds no raw markup", "[html]") {
  const auto runs = traceml_test::sample_experiment();
  const auto doc = html_report(runs, "Schedules <1x4 & 4x1>");
  std::vector<tag> tags;
  REQUIRE_NOTHROW(tags = tokenize(doc));
  std::size_t elements = 0;
  REQUIRE_NOTHROW(elements = check_balanced(tags));
  CHECK(elements > 500);
  REQUIRE(tags.front().name == "html");
  CHECK(tags.back().name == "html");
  CHECK(tags.back().closing);
  CHECK(doc.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(doc.find("<meta charset=\"utf-8\">") != std::string::npos);
  CHECK(doc.find("<title>Schedules &lt;1x4 &amp; 4x1&gt;</title>") != std::string::npos);
  CHECK(doc.find(TRACEML_VERSION_STRING) != std::string::npos);

  SECTION("self-contained: no scripts, stylesheets, fonts or addresses") {
    for (const char* s : {"<script", "<link", "<img", "<iframe", "http:", "https:", "url(", "@import", "src="})
      CHECK(doc.find(s) == std::string::npos);
  }
  SECTION("each SVG chart is balanced on its own") {
    std::size_t svgs = 0;
    for (std::size_t i = 0; i < tags.size(); ++i) {
      if (tags[i].name != "svg" || tags[i].closing) continue;
      ++svgs;
      const auto inner = children(tags, i);
      CHECK_NOTHROW(check_balanced(inner));
      CHECK(tags[i].attrs.count("viewBox"));
    }
    CHECK(svgs == 3);  // step time, breakdown, GPU
  }
}

TEST_CASE("names are escaped everywhere and never appear raw", "[html]") {
  const auto runs = traceml_test::sample_experiment();
  const auto doc = html_report(runs);
  CHECK(doc.find("void f&lt;int&gt;(a&amp;b)") != std::string::npos);  // the top-kernel tables
  CHECK(doc.find(traceml_test::nasty_kernel) == std::string::npos);
  CHECK(doc.find("f<int>") == std::string::npos);
  CHECK(doc.find("(a&b)") == std::string::npos);
  CHECK(doc.find("clip &lt;norm&gt; &amp; log") != std::string::npos);  // a user phase
  CHECK(doc.find("<norm>") == std::string::npos);
  CHECK(doc.find("a&lt;b &amp; c&gt;d") != std::string::npos);  // a config value
  CHECK(doc.find("a<b") == std::string::npos);
}

TEST_CASE("same runs, same bytes", "[html]") {
  const auto a = html_report(traceml_test::sample_experiment(), "t");
  const auto b = html_report(traceml_test::sample_experiment(), "t");
  CHECK(a == b);
}

TEST_CASE("the breakdown bars are as long as the phase means, on one shared scale", "[html][chart]") {
  // Step means 100 ms and 50 ms: the axis ends at exactly 100 (a round number), so a phase of
  // m ms is m * bar_plot_width / 100 pixels wide in both bars.
  const std::vector<run_result> runs = {flat_run("slow", 5, 30, 45, 10, 10), flat_run("fast", 5, 15, 20, 5, 5)};
  REQUIRE(runs[0].summary.step_ms.mean == Approx(100));
  REQUIRE(runs[1].summary.step_ms.mean == Approx(50));
  const auto doc = html_report(runs);
  const auto tags = tokenize(doc);
  const auto inner = children(tags, find_id(tags, "phase-breakdown"));
  const double scale = detail::html::bar_plot_width / 100.0;
  const std::vector<std::pair<std::string, std::vector<double>>> expected = {{"0", {5, 30, 45, 10, 10}},
                                                                             {"1", {5, 15, 20, 5, 5}}};
  const std::vector<std::string> names = {"dataloader", "forward", "backward", "optimizer", "(residual)"};
  for (const auto& [run, means] : expected) {
    std::vector<const tag*> rects;
    for (const auto& t : inner)
      if (t.name == "rect" && !t.closing && t.attrs.count("data-run") && t.attrs.at("data-run") == run)
        rects.push_back(&t);
    REQUIRE(rects.size() == means.size());
    double x = std::stod(rects[0]->attrs.at("x"));
    for (std::size_t i = 0; i < rects.size(); ++i) {
      INFO("run " << run << ", segment " << names[i]);
      CHECK(rects[i]->attrs.at("data-phase") == names[i]);
      CHECK(std::stod(rects[i]->attrs.at("width")) == Approx(means[i] * scale).margin(0.006));
      CHECK(std::stod(rects[i]->attrs.at("x")) == Approx(x).margin(0.011));  // segments abut
      x += means[i] * scale;
    }
  }
  SECTION("the bars' total is printed, and no step-time marker is needed when the segments add up") {
    CHECK(doc.find(">= 100.0 ms<") != std::string::npos);
    CHECK(doc.find(">= 50.00 ms<") != std::string::npos);
    for (const auto& t : inner) CHECK_FALSE((t.attrs.count("class") && t.attrs.at("class") == "marker"));
  }
  SECTION("values are printed inside segments wide enough for them") {
    // backward of "slow": 45 ms -> 270 px, labelled; dataloader of "fast": 5 ms -> 30 px, too narrow for "5.000".
    CHECK(doc.find("class=\"inbar\">45.00</text>") != std::string::npos);
    CHECK(doc.find("class=\"inbar\">5.000</text>") == std::string::npos);
  }
}

TEST_CASE("the breakdown legend lists each top-level phase and the residual, once", "[html][chart]") {
  const auto runs = traceml_test::sample_experiment();
  const auto doc = html_report(runs);
  const auto tags = tokenize(doc);
  const std::size_t svg = find_id(tags, "phase-breakdown");
  std::size_t ul = svg;
  while (!(tags[ul].name == "ul" && !tags[ul].closing)) ++ul;
  std::vector<std::string> items;
  for (const auto& t : children(tags, ul))
    if (t.name == "span" && !t.closing) items.push_back(text_after(doc, *(&t + 1)));  // text after </span>
  CHECK(items == std::vector<std::string>{"dataloader", "forward", "backward", "optimizer", "(residual)"});
  // The nested user phase is not stacked (its time is inside optimizer's) but has its table row.
  CHECK(count(doc, "clip &lt;norm&gt; &amp; log <span class=\"muted\">(nested)</span>") == 3);
  // Each phase keeps its colour across runs and charts: forward's swatches and segments share one.
  const auto pal = detail::html::phase_palette(runs);
  CHECK(pal.color(phase_kind::forward, "forward") == "#1f77b4");
  CHECK(pal.color(phase_kind::user, "clip <norm> & log") != pal.color(phase_kind::forward, "forward"));
}

TEST_CASE("several runs get a comparison table with the ratio to the fastest", "[html][compare]") {
  const std::vector<run_result> runs = {flat_run("1x4", 5, 30, 45, 10, 10), flat_run("2x2", 5, 20, 25, 10, 10),
                                        flat_run("4x1", 5, 15, 20, 5, 5)};  // 100, 70, 50 ms
  const auto doc = html_report(runs);
  const auto tags = tokenize(doc);
  const auto table = children(tags, find_id(tags, "comparison-table"));
  std::vector<std::string> ratios;
  for (const auto& t : table)
    if (t.name == "td" && !t.closing && t.attrs.count("class") && t.attrs.at("class") == "num ratio")
      ratios.push_back(text_after(doc, t));
  CHECK(ratios == std::vector<std::string>{"2.00&times;", "1.40&times;", "1.00&times; (fastest)"});
  CHECK(doc.find("<th class=\"num\">median / fastest</th>") != std::string::npos);
  CHECK(doc.find("the ratio is of median step times") != std::string::npos);
  std::size_t fastest_rows = 0;
  for (const auto& t : table)
    if (t.name == "tr" && t.attrs.count("class") && t.attrs.at("class") == "fastest") ++fastest_rows;
  CHECK(fastest_rows == 1);

  SECTION("the ratio is of medians, not means") {
    // Medians 24 and 34 ms (ratio 1.42); means 26.1 and 36.7 ms (ratio 1.41).
    const auto a = traceml_test::mixed_run(), b = traceml_test::mixed_run({"slow", 1.5, 1.0, 1.0});
    REQUIRE(a.summary.step_ms.median == Approx(24));
    REQUIRE(b.summary.step_ms.median == Approx(34));
    const auto d = html_report({b, a});
    CHECK(d.find(">1.42&times;<") != std::string::npos);
    CHECK(d.find(">1.41&times;") == std::string::npos);
  }
  SECTION("one run: no comparison") {
    const auto one = tokenize(html_report({runs[0]}));
    CHECK_FALSE(has_id(one, "comparison-table"));
  }
}

TEST_CASE("the step-time chart has a dot per step, hollow for warm-up, and marks the warm-up band", "[html][chart]") {
  const auto runs = traceml_test::sample_experiment();  // 3 runs x 24 steps, 3 warm-up each
  const auto doc = html_report(runs);
  const auto tags = tokenize(doc);
  const auto inner = children(tags, find_id(tags, "step-time-chart"));
  std::size_t dots = 0, hollow = 0, polylines = 0, warmup_bands = 0, medians = 0;
  double top = 1e9;
  for (const auto& t : inner) {
    if (t.closing) continue;
    if (t.name == "circle") {
      ++dots;
      if (t.attrs.at("fill") == "#ffffff") ++hollow;
      top = std::min(top, std::stod(t.attrs.at("cy")));
    }
    if (t.name == "polyline") ++polylines;
    if (t.name == "rect" && t.attrs.at("class") == "warmup") ++warmup_bands;
    if (t.name == "line" && t.attrs.count("class") && t.attrs.at("class") == "median") ++medians;
  }
  CHECK(dots == 72);
  CHECK(hollow == 9);
  CHECK(polylines == 3);
  CHECK(warmup_bands == 1);
  CHECK(medians == 3);
  CHECK(top >= 16);  // slow warm-up steps are kept inside the plot, not drawn above it
  CHECK(doc.find("(warm-up)</title>") != std::string::npos);
}

TEST_CASE("GPU facts give the busy/idle chart and the top-kernel tables, no facts, no GPU section", "[html][gpu]") {
  SECTION("measured: busy and idle segments per phase and run, summing to the phase's GPU window") {
    const auto runs = traceml_test::sample_experiment();
    const auto doc = html_report(runs);
    const auto tags = tokenize(doc);
    const auto inner = children(tags, find_id(tags, "gpu-busy-idle"));
    std::size_t busy = 0, idle = 0;
    for (const auto& t : inner) {
      if (t.name != "rect" || t.closing) continue;
      busy += t.attrs.at("class") == "busy";
      idle += t.attrs.at("class") == "idle";
    }
    CHECK(busy == 12);  // dataloader, forward, backward, optimizer x 3 runs; not the nested phase (no facts)
    CHECK(idle == 12);
    // The second row is forward of 1x4: busy share as the summary computed it, over 5 recorded
    // steps (5, 9, 13, 17, 21) of the 21 measured.
    const auto& fwd = runs[0].summary.phases[1];
    REQUIRE(fwd.name == "forward");
    REQUIRE(fwd.kernels);
    CHECK(doc.find(detail::html::pct(fwd.kernels->busy_share) + " busy, 720 kernels/step (5 of 21 steps)") !=
          std::string::npos);
    CHECK(count(doc, "<h4>Top kernels in forward</h4>") == 3);
    CHECK(count(doc, "<h4>Top kernels in dataloader</h4>") == 0);                                    // copies only
    CHECK(doc.find("<td>clip &lt;norm&gt; &amp; log</td><td class=\"num\">") == std::string::npos);  // no GPU row
    CHECK(count(doc, "void f&lt;int&gt;(a&amp;b)") == 9);  // three phases x three runs
    CHECK(doc.find("peak GPU memory") != std::string::npos);
  }
  SECTION("CPU only: no GPU section") {
    const auto doc = html_report({traceml_test::sample_schedule(1, 4, 10, 2, false)});
    CHECK_FALSE(has_id(tokenize(doc), "gpu-busy-idle"));
    CHECK(doc.find("Top kernels") == std::string::npos);
    CHECK(doc.find("<td>no GPU time source attached (link traceml::cupti") != std::string::npos);
  }
  SECTION("CUDA-event timing (kernels not measured): zeros are not shown as facts") {
    auto run = traceml_test::sample_schedule(1, 4, 10, 2, true);
    for (auto& st : run.steps) st.gpu->kernels_measured = false;
    run.summary = summarize_run(run.steps, 2);
    const auto doc = html_report({run});
    CHECK_FALSE(has_id(tokenize(doc), "gpu-busy-idle"));
    CHECK(doc.find("Top kernels") == std::string::npos);
    // GPU time from the events is still shown, with the steps it rests on.
    CHECK(doc.find("GPU time per step") != std::string::npos);
    CHECK(doc.find("over 8 of 8 steps (CUDA events)") != std::string::npos);
  }
}

namespace {
/// Every percentage printed in `doc` (signed ones, such as a recording cost, are not shares).
std::vector<double> shares_in(const std::string& doc) {
  std::vector<double> out;
  static const std::regex pct_re("([+-]?)([0-9]+(\\.[0-9]+)?)%");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), pct_re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    if (m[1].str() == "+") continue;
    out.push_back((m[1].str() == "-" ? -1 : 1) * std::stod(m[2].str()));
  }
  return out;
}
}  // namespace

TEST_CASE("a run mixing recorded and unrecorded steps: each GPU figure from its own sample set", "[html][gpu]") {
  // mixed_run.hpp: 10 measured steps, GPU time (events) on all of them, kernel records on one.
  const auto run = traceml_test::mixed_run();
  const auto doc = html_report({run});
  const auto tags = tokenize(doc);

  SECTION("the summary card: GPU time over every step, busy share and kernels over the recorded one") {
    CHECK(doc.find("<td>22.30 ms, mean over 10 of 10 steps (CUDA events)</td>") != std::string::npos);
    CHECK(doc.find("<td>16.20 ms, mean over 1 recorded step of 10</td>") != std::string::npos);
    // step busy 18.5 of a 31.5 ms window
    CHECK(doc.find("<td>58.7% of the step's GPU window, over 1 recorded step of 10</td>") != std::string::npos);
    CHECK(doc.find("<td>510, over 1 recorded step of 10</td>") != std::string::npos);
    // 35 / 24 - 1
    CHECK(doc.find("<td>+45.8% per recorded step (median of each against the untraced steps before it)</td>") !=
          std::string::npos);
  }
  SECTION("the busy/idle bars split forward's GPU window: 6 + 5 = 11 ms on a 20 ms axis") {
    const auto inner = children(tags, find_id(tags, "gpu-busy-idle"));
    std::vector<const tag*> fwd;
    for (const auto& t : inner)
      if (t.name == "rect" && !t.closing && doc.find("forward: GPU", t.end) == doc.find("<title>", t.end) + 7)
        fwd.push_back(&t);
    REQUIRE(fwd.size() == 2);
    const double scale = detail::html::bar_plot_width / 20.0;  // longest window: backward, 17 ms
    CHECK(fwd[0]->attrs.at("class") == "busy");
    CHECK(std::stod(fwd[0]->attrs.at("width")) == Approx(6 * scale).margin(0.006));
    CHECK(fwd[1]->attrs.at("class") == "idle");
    CHECK(std::stod(fwd[1]->attrs.at("width")) == Approx(5 * scale).margin(0.006));
    CHECK(doc.find(">54.5% busy, 200 kernels/step (1 of 10 steps)<") != std::string::npos);
    CHECK(doc.find("busy + idle = the GPU window. Kernel records are taken on recorded steps only: over 1 recorded "
                   "step of 10.") != std::string::npos);
  }
  SECTION("the GPU table: per-step figures of the recorded step, the wall time of that same step") {
    CHECK(doc.find("<caption>Mean per step over 1 recorded step of 10: ") != std::string::npos);
    const std::string forward_row =
        "<tr><td>forward</td><td class=\"num\">12.00</td><td class=\"num\">11.00</td><td class=\"num\">4.800</td>"
        "<td class=\"num\">6.000</td><td class=\"num\">5.000</td><td class=\"num\">54.5%</td>"
        "<td class=\"num\">200</td><td class=\"num\">100</td></tr>";
    CHECK(doc.find(forward_row) != std::string::npos);
    CHECK(doc.find("<tr><td>eval</td><td class=\"num\">") == std::string::npos);  // never ran on a recorded step
    // Top kernels per step: forward's gemm, 2 x 60 launches of 30 us.
    CHECK(doc.find("<tr><td class=\"kname\">gemm</td><td class=\"num\">120</td><td class=\"num\">3.600</td>"
                   "<td class=\"num\">30.0</td></tr>") != std::string::npos);
    CHECK(count(doc, "<caption>Per step over 1 recorded step of 10; merged over those steps, then the longest 10") ==
          3);
  }
  SECTION("the phase table: wall over the 10 measured steps, GPU time beside it") {
    CHECK(doc.find("<caption>Wall time over the 10 measured steps") != std::string::npos);
    CHECK(doc.find("gpu ms: mean GPU time between the phase's boundaries, over 10 of 10 steps (CUDA events)") !=
          std::string::npos);
    // forward: wall mean 8.6, GPU mean 7.4; eval (2 of 10 steps): wall mean 0.8, GPU mean 0.7
    CHECK(doc.find("forward</td><td class=\"num\">8.000</td><td class=\"num\">8.600</td>") != std::string::npos);
    // (the hardware counters' shares follow in the same row)
    CHECK(doc.find("<td class=\"num\">33.0%</td><td class=\"num\">7.400</td><td class=\"num\">51.6%</td>") !=
          std::string::npos);
    CHECK(doc.find("<td class=\"num\">3.1%</td><td class=\"num\">0.700</td><td class=\"num\">100.0%</td>") !=
          std::string::npos);
  }
  SECTION("no share outside [0, 100] %") {
    const auto shares = shares_in(doc);
    CHECK(shares.size() > 10);
    for (double v : shares) {
      INFO(v);
      CHECK(v >= 0);
      CHECK(v <= 100);
    }
  }
}

TEST_CASE("the sample experiment shows no share outside [0, 100] %", "[html][gpu]") {
  const auto doc = html_report(traceml_test::sample_experiment());
  for (double v : shares_in(doc)) {
    INFO(v);
    CHECK(v >= 0);
    CHECK(v <= 100);
  }
  CHECK(doc.find("over 5 recorded steps of 21") != std::string::npos);
}

TEST_CASE("the per-phase statistics table has every statistic of every phase", "[html]") {
  const auto run = flat_run("r", 5, 30, 45, 10, 10);
  const auto doc = html_report({run});
  const auto tags = tokenize(doc);
  std::size_t table = 0;
  while (!(tags[table].name == "table" && tags[table].attrs.count("class") &&
           tags[table].attrs.at("class") == "data phases"))
    ++table;
  std::vector<std::string> cells;
  for (const auto& t : children(tags, table))
    if ((t.name == "td") && !t.closing) cells.push_back(text_after(doc, t));
  // 4 phases + residual + step, each: name cell + 7 statistics + share.
  REQUIRE(cells.size() == 6 * 9);
  // forward (second row): median mean p10 p90 min max std share.
  const std::vector<std::string> fwd(cells.begin() + 9 + 1, cells.begin() + 18);
  CHECK(fwd == std::vector<std::string>{"30.00", "30.00", "30.00", "30.00", "30.00", "30.00", "0.000", "30.0%"});
  CHECK(cells[5 * 9] == "step");
  CHECK(cells[5 * 9 + 2] == "100.0");
}

TEST_CASE("edge cases render without throwing and stay well-formed", "[html]") {
  run_result empty;
  empty.name = "empty";
  run_result one = flat_run("one step", 1, 2, 3, 4, 0, 1);
  for (const auto& runs : {std::vector<run_result>{}, std::vector<run_result>{empty}, std::vector<run_result>{one},
                           std::vector<run_result>{empty, one}}) {
    std::string doc;
    REQUIRE_NOTHROW(doc = html_report(runs));
    std::vector<tag> tags;
    REQUIRE_NOTHROW(tags = tokenize(doc));
    CHECK_NOTHROW(check_balanced(tags));
    CHECK(doc.find("nan") == std::string::npos);
    CHECK(doc.find("inf") == std::string::npos);
  }
}

TEST_CASE("write_html_report writes the document, and reports an unwritable path once", "[html]") {
  traceml_test::reset_recorder();
  const auto path = traceml_test::temp_path("report.html");
  const auto runs = traceml_test::sample_experiment();
  REQUIRE(write_html_report(path, runs, "x"));
  CHECK(slurp(path) == html_report(runs, "x"));
  std::remove(path.c_str());
  CHECK_FALSE(write_html_report("/nonexistent-dir/report.html", runs));
  const auto msgs = diagnostic_messages();
  REQUIRE(msgs.size() == 1);
  CHECK(msgs[0].find("HTML report") != std::string::npos);
  CHECK(msgs[0].find("/nonexistent-dir/report.html") != std::string::npos);
}

TEST_CASE("the profiler writes html_path at finish()", "[html][profiler]") {
  traceml_test::reset_recorder();
  const auto path = traceml_test::temp_path("profiler_report.html");
  std::remove(path.c_str());
  {
    profiler_options opts;
    opts.run_name = "mlp <tiny>";
    opts.warmup_steps = 1;
    opts.print_table = false;
    opts.html_path = path;
    profiler prof(opts);
    for (int s = 0; s < 4; ++s) {
      TRACEML_STEP();
      {
        TRACEML_PHASE(forward);
        traceml_test::spin_for(std::chrono::microseconds(200));
      }
      {
        TRACEML_PHASE(backward);
        traceml_test::spin_for(std::chrono::microseconds(300));
      }
    }
    prof.finish();
  }
  const auto doc = slurp(path);
  REQUIRE_FALSE(doc.empty());
  CHECK(doc.find("mlp &lt;tiny&gt;") != std::string::npos);
  CHECK(doc.find("data-phase=\"backward\"") != std::string::npos);
  CHECK_NOTHROW(check_balanced(tokenize(doc)));
  std::remove(path.c_str());
}

TEST_CASE("counts print as integers: no \"720.0\" kernels", "[html][numbers]") {
  using detail::count_text;
  CHECK(count_text(720) == "720");
  CHECK(count_text(720.0000000001) == "720");  // a mean of equal counts, up to rounding
  CHECK(count_text(0) == "0");
  CHECK(count_text(2.5) == "2.5");  // a mean that is not whole stays a mean
  CHECK(count_text(1.25, 2) == "1.25");
  // The sample experiment: 1x4's forward launches 180 kernels in each of 4 micro-batches.
  const auto doc = html_report(traceml_test::sample_experiment());
  CHECK(doc.find("720.0") == std::string::npos);
  CHECK(doc.find("<td class=\"num\">720</td>") != std::string::npos);  // the GPU table
  CHECK(doc.find(" busy, 720 kernels/step (") != std::string::npos);   // the busy/idle chart
  static const std::regex count_with_decimals(
      "[0-9]+\\.0( kernels|</td><td class=\"num\">[0-9.]+</td><td class=\"num\">[0-9.]+</td></tr>)");
  CHECK_FALSE(std::regex_search(doc, count_with_decimals));
  // Every kernels/step, kernels/micro-batch and launches/step cell of these runs is whole.
  const auto tags = tokenize(doc);
  for (std::size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].closing || tags[i].name != "table" || !tags[i].attrs.count("class")) continue;
    const std::string cls = tags[i].attrs.at("class");
    if (cls != "data gpu" && cls != "data kernels") continue;
    std::vector<std::string> cells;
    for (const auto& t : children(tags, i))
      if (!t.closing && t.name == "td") cells.push_back(text_after(doc, t));
    const std::size_t columns = cls == "data gpu" ? 9 : 4;
    REQUIRE(cells.size() % columns == 0);
    for (std::size_t c = 0; c < cells.size(); c += columns) {
      const std::vector<std::string> counts = cls == "data gpu" ? std::vector<std::string>{cells[c + 7], cells[c + 8]}
                                                                : std::vector<std::string>{cells[c + 1]};
      for (const auto& n : counts) {
        INFO(cls << " row " << c / columns << ": " << n);
        CHECK(n.find('.') == std::string::npos);
      }
    }
  }
}

TEST_CASE("run colours are never phase colours", "[html][colors]") {
  const auto phase_colors = detail::html::phase_palette::all_colors();
  std::set<std::string> taken(phase_colors.begin(), phase_colors.end());
  taken.insert(detail::html::residual_color);
  taken.insert(detail::html::idle_color);
  std::set<std::string> runs;
  for (std::size_t i = 0; i < detail::html::run_color_count; ++i) {
    const std::string c = detail::html::run_color(i);
    INFO("run colour " << i << ": " << c);
    CHECK(taken.count(c) == 0);
    runs.insert(c);
  }
  CHECK(runs.size() == detail::html::run_color_count);  // distinct among themselves too
  // In a report: the runs' lines and swatches against every colour the phases were drawn in.
  const auto doc = html_report(traceml_test::sample_experiment());
  const auto tags = tokenize(doc);
  std::set<std::string> drawn_phase, drawn_run;
  for (const auto& t : tags) {
    if (t.closing) continue;
    if (t.name == "rect" && t.attrs.count("data-phase")) drawn_phase.insert(t.attrs.at("fill"));
    if (t.name == "polyline") drawn_run.insert(t.attrs.at("stroke"));
  }
  REQUIRE(drawn_run.size() == 3);
  REQUIRE(drawn_phase.size() >= 5);
  for (const auto& c : drawn_run) CHECK(drawn_phase.count(c) == 0);
  // "1x4", the first run, is not forward's blue any more.
  CHECK(detail::html::run_color(0) !=
        detail::html::phase_palette(traceml_test::sample_experiment()).color(phase_kind::forward, "forward"));
}

TEST_CASE("the ratio between runs is of medians, where median and mean disagree", "[html][compare]") {
  // a: median 10, mean 18 (one 50 ms step); b: median and mean 12. By medians a is the fastest and
  // b is 1.20x; by means b would be the fastest and a 1.50x.
  const auto a = walls_run("a", {10, 10, 10, 10, 50}), b = walls_run("b", {12, 12, 12, 12, 12});
  REQUIRE(a.summary.step_ms.median == Approx(10));
  REQUIRE(a.summary.step_ms.mean == Approx(18));
  REQUIRE(b.summary.step_ms.median == Approx(12));
  const auto doc = html_report({a, b});
  const auto tags = tokenize(doc);
  std::vector<std::string> ratios;
  for (const auto& t : children(tags, find_id(tags, "comparison-table")))
    if (!t.closing && t.name == "td" && t.attrs.count("class") && t.attrs.at("class") == "num ratio")
      ratios.push_back(text_after(doc, t));
  CHECK(ratios == std::vector<std::string>{"1.00&times; (fastest)", "1.20&times;"});
  CHECK(doc.find("1.50&times;") == std::string::npos);
  CHECK(doc.find("<th class=\"num\">median / fastest</th>") != std::string::npos);
  CHECK(doc.find("the ratio is of median step times") != std::string::npos);
}

TEST_CASE("median labels are nudged apart, close medians keep their own dash patterns", "[html][chart]") {
  using detail::html::spread_labels;
  SECTION("spread_labels: order kept, at least the gap apart, inside the bounds") {
    CHECK(spread_labels({100, 101, 102}, 13, 0, 300) == std::vector<double>{100, 113, 126});
    CHECK(spread_labels({102, 100}, 13, 0, 300) == std::vector<double>{113, 100});
    CHECK(spread_labels({50, 200}, 13, 0, 300) == std::vector<double>{50, 200});    // far apart: untouched
    CHECK(spread_labels({295, 299}, 13, 0, 300) == std::vector<double>{287, 300});  // pushed back from the edge
    CHECK(spread_labels({-20}, 13, 10, 300) == std::vector<double>{10});
  }
  SECTION("three runs 1 ms apart on a 120 ms axis: labels apart, lines told apart by pattern") {
    const std::vector<run_result> runs = {flat_run("1x4", 5, 30, 45, 10, 10), flat_run("2x2", 5, 31, 45, 10, 10),
                                          flat_run("4x1", 5, 32, 45, 10, 10)};  // medians 100, 101, 102 ms
    const auto doc = html_report(runs);
    const auto tags = tokenize(doc);
    const auto chart = children(tags, find_id(tags, "step-time-chart"));
    const auto dashes = attrs_of(chart, "line", "median", "stroke-dasharray");
    REQUIRE(dashes.size() == 3);
    CHECK(std::set<std::string>(dashes.begin(), dashes.end()).size() == 3);
    const auto line_y = attrs_of(chart, "line", "median", "y1");
    const auto label_y = attrs_of(chart, "text", "median-label", "y");
    REQUIRE(label_y.size() == 3);
    std::vector<double> ys;
    for (const auto& v : label_y) ys.push_back(std::stod(v));
    std::sort(ys.begin(), ys.end());
    CHECK(ys[1] - ys[0] >= 13 - 1e-9);
    CHECK(ys[2] - ys[1] >= 13 - 1e-9);
    CHECK(std::fabs(std::stod(line_y[0]) - std::stod(line_y[1])) < 5);  // the lines themselves are that close
    CHECK(attrs_of(chart, "line", "leader", "x1").size() >= 2);         // nudged labels point to their lines
    CHECK(doc.find(">1x4 median 100.0 ms</text>") != std::string::npos);
    CHECK(doc.find(">4x1 median 102.0 ms</text>") != std::string::npos);
    // Each label is in its run's colour (inline style: the stylesheet's text fill would win over an attribute).
    CHECK(doc.find("class=\"median-label\" data-run=\"1\" style=\"fill:" + std::string(detail::html::run_color(1)) +
                   "\"") != std::string::npos);
  }
}

TEST_CASE("the explanation is escaped and shown under the comparison table", "[html][explanation]") {
  const std::vector<run_result> runs = {flat_run("1x4", 5, 30, 45, 10, 10), flat_run("4x1", 5, 15, 20, 5, 5)};
  const std::string text = "4x1 is faster: <fewer> launches & \"bigger\" kernels.\n\nSecond paragraph.";
  const auto doc = html_report(runs, "t", text);
  CHECK_NOTHROW(check_balanced(tokenize(doc)));
  const std::string first =
      "<p class=\"explanation\">4x1 is faster: &lt;fewer&gt; launches &amp; &quot;bigger&quot; kernels.</p>";
  const auto at = doc.find(first);
  REQUIRE(at != std::string::npos);
  CHECK(doc.find("<p class=\"explanation\">Second paragraph.</p>") == doc.find("</p>", at) + 5);
  CHECK(doc.find("<fewer>") == std::string::npos);
  // Under the comparison table, inside its section.
  CHECK(doc.find("</table>", doc.find("id=\"comparison-table\"")) < at);
  CHECK(at < doc.find("</section>", doc.find("<section id=\"comparison\">")));

  SECTION("no explanation: no paragraph") {
    CHECK(html_report(runs).find("class=\"explanation\"") == std::string::npos);
  }
  SECTION("one run: its own section") {
    const auto one = html_report({runs[0]}, "t", "why <this>");
    CHECK(one.find("<section id=\"explanation\">") != std::string::npos);
    CHECK(one.find("<p class=\"explanation\">why &lt;this&gt;</p>") != std::string::npos);
  }
  SECTION("write_html_report passes it on") {
    const auto path = traceml_test::temp_path("explained.html");
    REQUIRE(write_html_report(path, runs, "t", text));
    CHECK(slurp(path) == doc);
    std::remove(path.c_str());
  }
}

namespace {
/// The same run with every hardware-counter sample taken away, summarized again.
run_result without_counters(run_result run) {
  for (auto& st : run.steps) {
    if (!st.gpu) continue;
    st.gpu->total.counters = {};
    for (auto& p : st.gpu->phases) p.facts.counters = {};
  }
  const std::string status = run.summary.gpu_status;
  run.summary = summarize_run(run.steps, run.summary.warmup_steps);
  run.summary.gpu_status = status;
  return run;
}

/// The activity chart's bars, by "phase/metric" (one run), as the opening <rect> tags.
std::map<std::string, tag> activity_bars(const std::vector<tag>& tags) {
  std::map<std::string, tag> out;
  for (const auto& t : children(tags, find_id(tags, "gpu-activity")))
    if (t.name == "rect" && !t.closing && t.attrs.count("data-metric"))
      out.emplace(t.attrs.at("data-phase") + "/" + t.attrs.at("data-metric"), t);
  return out;
}
}  // namespace

TEST_CASE("hardware counters give the activity chart: four shares per phase on a 0..100% scale", "[html][counters]") {
  // mixed_run.hpp: counters on 9 of the 10 measured steps; forward busy 34.6 of 67 ms sampled,
  // SM 25%, tensor 20%, DRAM 10%; backward SM 60%; eval busy 100%.
  const auto run = traceml_test::mixed_run();
  const auto doc = html_report({run});
  std::vector<tag> tags;
  REQUIRE_NOTHROW(tags = tokenize(doc));
  REQUIRE_NOTHROW(check_balanced(tags));
  const double full = detail::html::bar_plot_width;  // 100%

  SECTION("bars as long as the shares, in the phase's colour, one group per top-level phase and the step") {
    const auto bars = activity_bars(tags);
    CHECK(bars.size() == 6 * 4);  // dataloader, forward, backward, optimizer, eval, step
    const auto width = [&](const std::string& key) {
      INFO(key);
      REQUIRE(bars.count(key));
      return std::stod(bars.at(key).attrs.at("width"));
    };
    CHECK(width("forward/busy") == Approx(34.6 / 67 * full).margin(0.006));
    CHECK(width("forward/sm") == Approx(0.25 * full).margin(0.006));
    CHECK(width("forward/tensor") == Approx(0.2 * full).margin(0.006));
    CHECK(width("forward/dram") == Approx(0.1 * full).margin(0.006));
    CHECK(width("backward/sm") == Approx(0.6 * full).margin(0.006));
    CHECK(width("eval/busy") == Approx(full).margin(0.006));
    CHECK(width("dataloader/busy") == 0);
    CHECK(width("step/busy") == Approx(129.7 / 202.5 * full).margin(0.006));
    // Every bar of a group starts on the axis and none passes its 100% end.
    for (const auto& [key, t] : bars) {
      INFO(key);
      CHECK(std::stod(t.attrs.at("x")) == Approx(std::stod(bars.at("forward/busy").attrs.at("x"))));
      CHECK(std::stod(t.attrs.at("width")) <= full + 1e-9);
    }
    const detail::html::phase_palette pal({run});
    CHECK(bars.at("forward/busy").attrs.at("fill") == pal.color(phase_kind::forward, "forward"));
    CHECK(bars.at("forward/dram").attrs.at("fill") == pal.color(phase_kind::forward, "forward"));
    CHECK(bars.at("eval/sm").attrs.at("fill") == pal.color(phase_kind::user, "eval"));
  }
  SECTION("values after the bars, the sample set in the note and beside each group") {
    const auto inner = children(tags, find_id(tags, "gpu-activity"));
    std::vector<std::string> values;
    for (const auto& t : inner)
      if (!t.closing && t.name == "text" && t.attrs.count("class") && t.attrs.at("class") == "value")
        values.push_back(text_after(doc, t));
    REQUIRE(values.size() == 24);
    // forward is the second group: busy, SM active, tensor, DRAM.
    CHECK(std::vector<std::string>(values.begin() + 4, values.begin() + 8) ==
          std::vector<std::string>{"51.6%", "25.0%", "20.0%", "10.0%"});
    CHECK(values[12] == "40.0%");   // optimizer busy
    CHECK(values[16] == "100.0%");  // eval busy, on the two steps it ran
    std::size_t steps_labels = 0;
    for (const auto& t : inner)
      if (!t.closing && t.name == "text" && text_after(doc, t) == "9 of 10 steps") ++steps_labels;
    CHECK(steps_labels == 6);
    CHECK(doc.find("not only on recorded ones: over 9 sampled steps of 10.</p>") != std::string::npos);
    CHECK(doc.find("<title>forward: SM active 25.0% of the sampled GPU window, over 9 of 10 steps</title>") !=
          std::string::npos);
  }
  const std::string fwd_cells_as_counted =
      "forward</td><td class=\"num\">1</td><td class=\"num\">60.0%</td>"
      "<td class=\"num\">54.5%</td><td class=\"num\">61.8%</td></tr>";
  SECTION("the agreement of the two sources on the recorded step") {
    const std::string fwd =
        "forward</td><td class=\"num\">1</td><td class=\"num\">60.0%</td><td class=\"num\">54.5%</td></tr>";
    CHECK(doc.find(fwd) != std::string::npos);  // counters 0.6 against records 6/11
    CHECK(doc.find("<tfoot><tr><td>step</td><td class=\"num\">1</td><td class=\"num\">61.9%</td>"
                   "<td class=\"num\">58.7%</td></tr>") != std::string::npos);  // 19.5 and 18.5 of 31.5
    const auto table = doc.substr(doc.find("<table class=\"data agreement\">"));
    CHECK(table.substr(0, table.find("</table>")).find("eval") == std::string::npos);  // never on a recorded step
  }
  SECTION("counter shares on under 5 samples per step: said to be coarse in the phase table's caption") {
    CHECK(doc.find("coarse in") == std::string::npos);
    auto few = traceml_test::mixed_run();
    for (auto& p : few.summary.phases)
      if (p.name == "dataloader") p.counters->samples_per_step = 2.6;
    CHECK(html_report({few}).find("; coarse in dataloader (under 5 samples per step: its edges weigh as much as its "
                                  "inside)</caption>") != std::string::npos);
  }
  SECTION("hidden share: a column only when some phase's work ran beside another's") {
    const auto h = html_report({traceml_test::mixed_run_side_by_side()});
    CHECK(h.find("<th class=\"num\">hidden share</th>") != std::string::npos);
    CHECK(h.find("<td class=\"num\">40.0%</td></tr>") != std::string::npos);  // the optimizer: 0.2 of 0.5 ms
    CHECK(h.find("hidden share: of the phase's own GPU time") != std::string::npos);
    CHECK(doc.find("hidden share") == std::string::npos);
  }
  SECTION("records as counted: a column over the same step, and how they were seen") {
    const auto m = html_report({traceml_test::mixed_run_as_counted()});
    CHECK(m.find("<th class=\"num\">records as counted</th>") != std::string::npos);
    CHECK(m.find(fwd_cells_as_counted) != std::string::npos);
    CHECK(m.find("averaged over samples of 100 us (busy next to a short window leaks into it), each operation begun "
                 "1.50 us earlier") != std::string::npos);
    CHECK(doc.find("records as counted") == std::string::npos);  // not modelled: no column
  }
  SECTION("the phase table and the summary card carry the same shares") {
    CHECK(doc.find("<th class=\"num\">GPU busy</th><th class=\"num\">SM active</th><th class=\"num\">tensor</th>"
                   "<th class=\"num\">DRAM</th>") != std::string::npos);
    CHECK(doc.find("<td class=\"num\">7.400</td><td class=\"num\">51.6%</td><td class=\"num\">25.0%</td>"
                   "<td class=\"num\">20.0%</td><td class=\"num\">10.0%</td></tr>") != std::string::npos);
    CHECK(doc.find("shares of the sampled GPU window from hardware counters, over 9 of 10 steps (sampled)") !=
          std::string::npos);
    CHECK(doc.find("<td>64.0% of the step's GPU window, SM active 43.9%, over 9 sampled steps of 10</td>") !=
          std::string::npos);
  }
  SECTION("a counter this GPU does not sample has no bar and no 0%; a share past its whole is drawn at 100%") {
    auto odd = run;
    for (auto& p : odd.summary.phases)
      if (p.name == "forward") {
        p.counters->tensor_share = -1;
        p.counters->busy_share = 1.004;
      }
    const auto d = html_report({odd});
    const auto t = tokenize(d);
    const auto bars = activity_bars(t);
    CHECK_FALSE(bars.count("forward/tensor"));
    CHECK(std::stod(bars.at("forward/busy").attrs.at("width")) == Approx(full));
    CHECK(d.find("class=\"note\">not sampled</text>") != std::string::npos);
    CHECK(d.find("100.4%") == std::string::npos);
    CHECK(d.find("<td class=\"num\">7.400</td><td class=\"num\">100.0%</td><td class=\"num\">25.0%</td>"
                 "<td class=\"num\">&ndash;</td>") != std::string::npos);
  }
  SECTION("several runs: each phase's groups side by side, labelled with their run") {
    const auto other = traceml_test::mixed_run({"busier", 1.0, 1.0, 1.0, 1.25});
    const auto d = html_report({run, other});
    const auto t = tokenize(d);
    std::vector<std::string> order;
    for (const auto& e : children(t, find_id(t, "gpu-activity")))
      if (e.name == "rect" && !e.closing && e.attrs.at("data-metric") == "busy")
        order.push_back(e.attrs.at("data-phase") + "@" + e.attrs.at("data-run"));
    CHECK(order == std::vector<std::string>{"dataloader@0", "dataloader@1", "forward@0", "forward@1", "backward@0",
                                            "backward@1", "optimizer@0", "optimizer@1", "eval@0", "eval@1", "step@0",
                                            "step@1"});
    CHECK(d.find("mixed over 9 sampled steps of 10; busier over 9 sampled steps of 10.</p>") != std::string::npos);
    CHECK(d.find("<title>forward \xC2\xB7 busier: GPU busy ") != std::string::npos);
  }
  SECTION("no share outside [0, 100] %") {
    for (double v : shares_in(doc)) {
      INFO(v);
      CHECK(v >= 0);
      CHECK(v <= 100);
    }
  }
}

TEST_CASE("without hardware counters: no activity chart, no counter columns", "[html][counters]") {
  const auto plain = without_counters(traceml_test::mixed_run());
  REQUIRE_FALSE(plain.summary.step_counters);
  const auto doc = html_report({plain});
  const auto tags = tokenize(doc);
  CHECK_NOTHROW(check_balanced(tags));
  CHECK_FALSE(has_id(tags, "gpu-activity"));
  CHECK_FALSE(has_id(tags, "activity"));
  CHECK(doc.find("data agreement") == std::string::npos);
  CHECK(doc.find("(hardware counters)") == std::string::npos);  // neither the section nor the summary card's row
  CHECK(doc.find("from hardware counters") == std::string::npos);
  CHECK(doc.find("<th class=\"num\">SM active</th>") == std::string::npos);
  CHECK(doc.find("<td class=\"num\">7.400</td></tr>") != std::string::npos);  // forward's row ends at gpu ms
  std::size_t svgs = 0;
  for (const auto& t : tags) svgs += t.name == "svg" && !t.closing;
  CHECK(svgs == 3);  // step time, breakdown, GPU busy/idle
  // Counters without kernel records: the chart, but no agreement table.
  auto unrecorded = traceml_test::mixed_run();
  for (auto& st : unrecorded.steps) st.gpu->kernels_measured = false;
  unrecorded.summary = summarize_run(unrecorded.steps, 2);
  const auto d = html_report({unrecorded});
  CHECK(has_id(tokenize(d), "gpu-activity"));
  CHECK(d.find("data agreement") == std::string::npos);
}

TEST_CASE("the sample experiment with hardware counters: four charts, a counter not sampled said in words",
          "[html][counters]") {
  const auto runs = traceml_test::sample_experiment(true);  // as the browser test renders it
  const auto doc = html_report(runs);
  std::vector<tag> tags;
  REQUIRE_NOTHROW(tags = tokenize(doc));
  REQUIRE_NOTHROW(check_balanced(tags));
  std::size_t svgs = 0;
  for (const auto& t : tags) svgs += t.name == "svg" && !t.closing;
  CHECK(svgs == 4);  // step time, breakdown, GPU busy/idle, activity
  std::size_t tensor_bars = 0, bars = 0;
  for (const auto& t : children(tags, find_id(tags, "gpu-activity"))) {
    if (t.name != "rect" || t.closing) continue;
    ++bars;
    tensor_bars += t.attrs.at("data-metric") == "tensor";
  }
  CHECK(bars == 15 * 4 - 5);  // 4 phases and the step x 3 runs; 4x1 has no tensor counter
  CHECK(tensor_bars == 10);
  CHECK(count(doc, "class=\"note\">not sampled</text>") == 5);
  CHECK(
      doc.find("1x4 over 21 sampled steps of 21; 2x2 over 21 sampled steps of 21; 4x1 over 21 sampled steps of 21.") !=
      std::string::npos);
  for (double v : shares_in(doc)) {
    INFO(v);
    CHECK(v >= 0);
    CHECK(v <= 100);
  }
}
