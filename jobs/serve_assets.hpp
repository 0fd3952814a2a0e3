// The files of tetra serve's page (jobs/serve_page/: HTML, CSS and plain JavaScript), compiled
// into the binary so that it alone serves them. The definition is generated at build time by
// tools/embed_files.cmake.
#pragma once
#include <string_view>
#include <vector>

namespace tetra::serve {

struct Asset {
  std::string_view name;  // "index.html", "page.js", ...
  std::string_view body;
};

// Every file of the page, in the order CMake lists them.
const std::vector<Asset>& page_assets();

}  // namespace tetra::serve
