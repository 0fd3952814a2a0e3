// Where tetra may write an output file (--export, --trace, --metrics): a regular file, or a
// missing one in a writable directory. Outputs are written to a temporary and renamed over
// the target (or appended, for metrics), so anything else would be replaced or fed: a device
// (as root, renaming over /dev/null replaces it for the whole machine), a FIFO, a symbolic
// link (replaced, not written through), a directory. Checked before step 0, so that a typo
// costs nothing.
#pragma once
#include <string>

namespace tetra {

// "" when `path` may be written, else what is wrong with it ("it is a directory"), for the
// caller to report after the path.
std::string output_file_problem(const std::string& path);
// "" when `path`'s directory exists and tetra may create entries in it, else what is wrong.
std::string parent_dir_problem(const std::string& path);

}  // namespace tetra
