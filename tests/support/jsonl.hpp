// JSONL for the documents tests.
#pragma once
#include <string>

namespace tetra::test {

// One good document (line 1, "ok"), then five bad lines: the text not a string, not an
// object, not JSON, a text holding byte 3 (the byte tokenizer's end of text), no "text".
inline const std::string kBadJsonl =
    "{\"text\": \"ok\"}\n"
    "{\"text\": 5}\n"
    "[1, 2]\n"
    "not json\n"
    "{\"text\": \"a\\u0003b\"}\n"
    "{\"other\": \"x\"}\n";

}  // namespace tetra::test
