// JSON through nlohmann-json (metrics, traces, manifests, safetensors headers), plus the
// little tetra adds on top of the library: parsing that reports one line instead of
// throwing the library's exceptions, and integers read the way tetra's files store them.
//
// Written numbers round-trip exactly: the library prints a double with the shortest digits
// that parse back to the same bits ("0.1", "3.0") and integers as integers; it writes NaN
// and infinities as null. Object keys are kept sorted, so equal values dump to equal text.
//
// util/ is the bottom layer and cannot throw tetra::Error (util/error.hpp sits above it),
// so parse_json returns its problem and callers throw it with the file's name.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tetra {

using json = nlohmann::json;

// Deep enough for any header or manifest; it bounds the recursion of dump() and of the
// library's comparisons on a hostile file.
inline constexpr int kMaxJsonDepth = 512;

// Parses `text` as one JSON value into `out`. Returns "" on success, else one line
// "invalid JSON: <problem>" (out is then unspecified) for: malformed text (the library's
// message, which gives line and column), a key repeated within one object (a tensor named
// twice would be ambiguous), nesting deeper than kMaxJsonDepth, and a NUL byte (the library
// would stop reading there and ignore the rest).
std::string parse_json(const std::string& text, json& out);

// v as an int64: an integer, or a number with an integral value ("1.0", "1e3"), within
// the int64 range; nullopt for anything else.
std::optional<int64_t> json_int(const json& v);

}  // namespace tetra
