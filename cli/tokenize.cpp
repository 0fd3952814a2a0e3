#include "cli/tokenize.hpp"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <vector>

#include "data/tokenizer.hpp"
#include "util/error.hpp"

namespace tetra {

void tokenize_command(const TokenizeOptions& o) {
  const std::string dir_file = data::model_dir_tokenizer(o.tokenizer);
  const std::unique_ptr<data::Tokenizer> tok =
      data::load_tokenizer(dir_file.empty() ? o.tokenizer : dir_file);
  const std::string in{std::istreambuf_iterator<char>(std::cin), {}};
  std::string out;
  if (o.decode) {
    std::istringstream words(in);
    std::vector<int> ids;
    for (std::string w; words >> w;) {
      size_t used = 0;
      int id = -1;
      try {
        id = std::stoi(w, &used);
      } catch (const std::exception&) {
      }
      check(used == w.size() && id >= 0 && id < tok->vocab(), "tetra tokenize --decode: '", w,
            "' is not a token id of the tokenizer (0 to ", tok->vocab() - 1, ")");
      ids.push_back(id);
    }
    out = tok->decode(ids);
  } else {
    const std::vector<int> ids = o.document ? tok->encode_document(in) : tok->encode(in);
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    out += "\n";
  }
  // By length: decoded text may hold a NUL byte.
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace tetra
