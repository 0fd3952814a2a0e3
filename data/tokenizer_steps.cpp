#include "data/tokenizer_steps.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "data/utf8.hpp"
#include "util/error.hpp"

namespace tetra::data {
namespace {

// GPT-2's pre-tokenizer pattern, which ByteLevel applies when use_regex is true.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The UTF-8 of code point c (below U+0800: all byte_char needs).
std::string utf8_of(unsigned c) {
  if (c < 0x80) return std::string(1, char(c));
  return {char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
}

// GPT-2's bytes_to_unicode: the printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for
// themselves; the other 68 bytes, in order, for U+0100 onwards.
struct ByteChars {
  std::array<std::string, 256> chars;
  std::unordered_map<std::string, int> bytes;
  ByteChars() {
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      chars[b] = utf8_of(printable ? b : next++);
      bytes[chars[b]] = int(b);
    }
  }
};
const ByteChars& byte_chars() {
  static const ByteChars table;
  return table;
}

// The "type" of a step's spec, refused when it is not one of `known`.
std::string type_of(const json& spec, const std::string& where,
                    std::initializer_list<const char*> known) {
  check(spec.is_object() && spec.contains("type") && spec["type"].is_string(), where,
        " is not an object with a \"type\"");
  const std::string type = spec["type"].get<std::string>();
  for (const char* k : known)
    if (type == k) return type;
  fail(where, " type '", type, "' is not supported");
}

bool flag(const json& spec, const char* name, bool fallback, const std::string& where) {
  if (!spec.contains(name)) return fallback;
  check(spec[name].is_boolean(), where, ".", name, " is ", spec[name].dump(),
        ", not true or false");
  return spec[name].get<bool>();
}

std::string text_field(const json& spec, const char* name, const std::string& where) {
  check(spec.contains(name) && spec[name].is_string(), where, ".", name, " is not a string");
  return spec[name].get<std::string>();
}

// A pattern field, {"String": text} or {"Regex": pattern}.
Regex pattern_field(const json& spec, const std::string& where) {
  const std::string at = where + ".pattern";
  check(spec.contains("pattern") && spec["pattern"].is_object() && spec["pattern"].size() == 1, at,
        " is not {\"String\": ...} or {\"Regex\": ...}");
  const std::string kind = spec["pattern"].begin().key();
  const json& value = spec["pattern"].begin().value();
  check(value.is_string() && (kind == "String" || kind == "Regex"), at,
        " is not {\"String\": ...} or {\"Regex\": ...}");
  const std::string text = value.get<std::string>();
  if (kind == "Regex") return Regex(text, at + ".Regex");
  check(!text.empty(), at, ".String is empty");
  return Regex::literal(text, at + ".String");
}

// The sub-steps of a Sequence, each with its place in `where`.
template <typename F>
void each_step(const json& spec, const char* list, const std::string& where, F add) {
  check(spec.contains(list) && spec[list].is_array(), where, ".", list, " is not a list");
  for (size_t i = 0; i < spec[list].size(); ++i)
    add(spec[list][i], where + "." + list + "[" + std::to_string(i) + "]");
}

}  // namespace

const std::string& byte_char(unsigned char byte) {
  return byte_chars().chars[byte];
}

int char_byte(const std::string& utf8_char) {
  const auto it = byte_chars().bytes.find(utf8_char);
  return it == byte_chars().bytes.end() ? -1 : it->second;
}

// ---------------------------------------------------------------------------------------

Normalizer::Normalizer(const json& spec, const std::string& where) {
  if (!spec.is_null()) add(spec, where);
}

void Normalizer::add(const json& spec, const std::string& where) {
  const std::string type = type_of(spec, where, {"Sequence", "Replace", "Prepend"});
  if (type == "Sequence") {
    each_step(spec, "normalizers", where, [&](const json& s, const std::string& w) { add(s, w); });
  } else if (type == "Replace") {
    steps_.push_back({pattern_field(spec, where), text_field(spec, "content", where)});
  } else {
    steps_.push_back({std::nullopt, text_field(spec, "prepend", where)});
  }
}

std::string Normalizer::apply(std::string text) const {
  for (const Step& step : steps_) {
    if (!step.pattern) {  // Prepend, to a piece that has text
      if (!text.empty()) text = step.content + text;
      continue;
    }
    std::string out;
    size_t last = 0;
    for (const auto& [begin, end] : step.pattern->find_all(text)) {
      out.append(text, last, begin - last);
      out += step.content;
      last = end;
    }
    out.append(text, last, std::string::npos);
    text = std::move(out);
  }
  return text;
}

// ---------------------------------------------------------------------------------------

PreTokenizer::PreTokenizer(const json& spec, const std::string& where) {
  if (!spec.is_null()) add(spec, where);
}

void PreTokenizer::add(const json& spec, const std::string& where) {
  const std::string type = type_of(spec, where, {"Sequence", "Split", "ByteLevel"});
  if (type == "Sequence") {
    each_step(spec, "pretokenizers", where,
              [&](const json& s, const std::string& w) { add(s, w); });
    return;
  }
  Step step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = flag(spec, "add_prefix_space", true, where);
    flag(spec, "trim_offsets", true, where);  // offsets only
    if (flag(spec, "use_regex", true, where)) step.pattern = Regex(kGpt2Pattern, where);
    steps_.push_back(std::move(step));
    return;
  }
  step.pattern = pattern_field(spec, where);
  step.invert = flag(spec, "invert", false, where);
  const std::string behavior = text_field(spec, "behavior", where);
  static const std::pair<const char*, Behavior> kBehaviors[] = {
      {"Removed", Behavior::Removed},
      {"Isolated", Behavior::Isolated},
      {"MergedWithPrevious", Behavior::MergedWithPrevious},
      {"MergedWithNext", Behavior::MergedWithNext},
      {"Contiguous", Behavior::Contiguous}};
  bool known = false;
  for (const auto& [name, b] : kBehaviors)
    if (behavior == name) {
      step.behavior = b;
      known = true;
    }
  check(known, where, ".behavior '", behavior, "' is not supported");
  steps_.push_back(std::move(step));
}

std::vector<std::string> PreTokenizer::split_by(const Step& step, const std::string& text) {
  // The text as consecutive [begin, end) parts, each a match of the pattern or not (inverted
  // under invert); then joined or dropped by the behavior, as the reference does.
  struct Part {
    size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  for (const auto& [begin, end] : step.pattern->find_all(text)) {
    if (prev != begin) parts.push_back({prev, begin, false});
    parts.push_back({begin, end, true});
    prev = end;
  }
  if (prev != text.size()) parts.push_back({prev, text.size(), false});
  if (step.invert)
    for (Part& p : parts) p.match = !p.match;

  std::vector<Part> kept;  // .match now means: removed
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::Removed:
      kept = parts;
      break;
    case Behavior::Isolated:
      for (const Part& p : parts) kept.push_back({p.begin, p.end, false});
      break;
    case Behavior::Contiguous:
      for (const Part& p : parts) {
        if (p.match == previous_match && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case Behavior::MergedWithPrevious:
      for (const Part& p : parts) {
        if (p.match && !previous_match && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous_match = p.match;
      }
      break;
    case Behavior::MergedWithNext:
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
        if (p->match && !previous_match && !kept.empty())
          kept.back().begin = p->begin;
        else
          kept.push_back({p->begin, p->end, false});
        previous_match = p->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  std::vector<std::string> out;
  for (const Part& p : kept)
    if (!p.match && p.end > p.begin) out.push_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

std::vector<std::string> PreTokenizer::split(const std::string& piece) const {
  std::vector<std::string> pieces = {piece};
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    for (std::string& p : pieces) {
      if (step.byte_level && step.add_prefix_space && p[0] != ' ') p = " " + p;
      if (!step.pattern) {
        next.push_back(std::move(p));
        continue;
      }
      for (std::string& q : split_by(step, p)) next.push_back(std::move(q));
    }
    if (step.byte_level)
      for (std::string& p : next) {
        std::string mapped;
        for (const char c : p) mapped += byte_char(static_cast<unsigned char>(c));
        p = std::move(mapped);
      }
    pieces = std::move(next);
  }
  return pieces;
}

// ---------------------------------------------------------------------------------------

PostProcessor::PostProcessor(const json& spec, const std::string& where) {
  if (!spec.is_null()) add(spec, where);
}

void PostProcessor::add(const json& spec, const std::string& where) {
  const std::string type = type_of(spec, where, {"Sequence", "ByteLevel", "TemplateProcessing"});
  if (type == "Sequence") {
    each_step(spec, "processors", where, [&](const json& s, const std::string& w) { add(s, w); });
    return;
  }
  if (type == "ByteLevel") return;  // it trims offsets, and adds no token
  // {"single": [{"SpecialToken": {"id": NAME, ...}} or {"Sequence": {"id": "A", ...}}, ...],
  //  "special_tokens": {NAME: {"ids": [...], ...}}}; "pair" is for pairs of texts, never here.
  const json& single = spec.contains("single") ? spec["single"] : json();
  const json& specials = spec.contains("special_tokens") ? spec["special_tokens"] : json();
  check(single.is_array(), where, ".single is not a list");
  std::vector<Item> items;
  for (size_t i = 0; i < single.size(); ++i) {
    const json& it = single[i];
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    check(it.is_object() && it.size() == 1, at,
          " is not {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const std::string kind = it.begin().key();
    const json& body = it.begin().value();
    check(body.is_object() && body.contains("id") && body["id"].is_string(), at, ".", kind,
          " has no string \"id\"");
    const std::string id = body["id"].get<std::string>();
    if (kind == "Sequence") {
      check(id == "A", at, ".Sequence names '", id, "', not the one text A");
      items.push_back({true, {}});
      continue;
    }
    check(kind == "SpecialToken", at, " '", kind, "' is not supported");
    check(specials.is_object() && specials.contains(id) && specials[id].contains("ids") &&
              specials[id]["ids"].is_array(),
          at, " names '", id, "', which ", where, ".special_tokens does not give ids");
    Item item;
    for (const json& v : specials[id]["ids"]) {
      const std::optional<int64_t> n = json_int(v);
      check(n && *n >= 0 && *n < (int64_t(1) << 24), where, ".special_tokens['", id,
            "'] has the id ", v.dump(), ", not a token id");
      item.ids.push_back(int(*n));
    }
    items.push_back(std::move(item));
  }
  templates_.push_back(std::move(items));
}

std::vector<int> PostProcessor::apply(const std::vector<int>& ids) const {
  std::vector<int> out = ids;
  for (const std::vector<Item>& t : templates_) {
    std::vector<int> next;
    for (const Item& item : t) {
      const std::vector<int>& part = item.text ? out : item.ids;
      next.insert(next.end(), part.begin(), part.end());
    }
    out = std::move(next);
  }
  return out;
}

int PostProcessor::first_token() const {
  const std::vector<int> with_text = apply({-1});
  return !with_text.empty() && with_text[0] != -1 ? with_text[0] : -1;
}

// ---------------------------------------------------------------------------------------

Decoder::Decoder(const json& spec, const std::string& where) {
  none_ = spec.is_null();
  if (!none_) add(spec, where);
}

void Decoder::add(const json& spec, const std::string& where) {
  const std::string type = type_of(spec, where, {"Sequence", "ByteLevel"});
  if (type == "Sequence")
    each_step(spec, "decoders", where, [&](const json& s, const std::string& w) { add(s, w); });
  else
    ++byte_level_steps_;
}

std::string Decoder::decode(const std::vector<std::string>& tokens) const {
  if (none_) {  // the reference joins the tokens with spaces
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  std::vector<std::string> chain = tokens;
  for (int step = 0; step < byte_level_steps_; ++step) {
    // ByteLevel: a token whose characters all stand for bytes becomes those bytes; any other
    // (an added token such as "<|endoftext|> " with its space) stays as it is. One text out.
    std::string bytes;
    for (const std::string& t : chain) {
      std::string mapped;
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        const size_t n = utf8_length(static_cast<unsigned char>(t[i]));
        const int b = char_byte(t.substr(i, n));
        all = b >= 0;
        mapped += char(b);
        i += n;
      }
      bytes += all ? mapped : t;
    }
    chain = {bytes};
  }
  std::string out;
  for (const std::string& t : chain) out += t;
  return out;
}

}  // namespace tetra::data
