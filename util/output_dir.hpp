// An output directory of a command (tetra sweep --out, tetra lab --out): where tetra writes
// many files of its own choosing, so that a directory of the user's can never be written into
// by mistake. It is either new (created now), empty, or marked as the same command's from an
// earlier run: a marker file (.tetra-output) holds "tetra COMMAND". Every entry the command
// will write there is checked, before the command changes anything, to be missing or of its
// own kind (a regular file, a directory), never a symbolic link: a link planted in the
// directory is refused, not written through. In a marked directory the command replaces the
// files it wrote before (a fresh file renamed over each, util/output_file.hpp), and nothing
// else.
//
// util/ cannot throw tetra::Error: each function returns "" or one line for the caller to
// throw.
#pragma once
#include <string>
#include <vector>

namespace tetra {

inline constexpr const char* kOutputMarker = ".tetra-output";

struct OutputDir {
  std::string dir;                 // as the user named it (a link to a directory is followed)
  std::string command;             // "sweep", "lab": what the marker names
  std::vector<std::string> files;  // paths below dir the command writes, each replaced whole
  std::vector<std::string> dirs;   // paths below dir of directories it writes in (it makes them)
};

// "" when `path` is a directory tetra may write in (a link to one is followed: the user named
// it), or is missing and can be created with its missing parents; else what is wrong, for the
// caller to report after the path ("it is not a directory").
std::string dir_output_problem(const std::string& path);

// "" when the command may write its entries in o.dir, else what is wrong ("--out 'x' is
// neither empty nor tetra sweep's (it has no .tetra-output): name a new or empty directory").
// `flag` names the setting in the message ("--out").
std::string output_dir_problem(const OutputDir& o, const std::string& flag);

// Creates o.dir (and missing parents) and writes the marker; "" or the problem.
// Call it after output_dir_problem, once every other check of the command has passed.
std::string claim_output_dir(const OutputDir& o);

}  // namespace tetra
