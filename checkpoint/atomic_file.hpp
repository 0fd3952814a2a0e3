// util/output_file's whole-file writes for the checkpoint layer, throwing tetra::Error with
// the caller's context: files that are either whole or absent, even after a crash.
#pragma once
#include <string>

namespace tetra::ckpt {

// Persists the entries created, renamed or removed in dir. Throws tetra::Error prefixed by
// `context`.
void sync_dir(const std::string& dir, const std::string& context);

// path holds either its old content or all of `text`, never a part (replace_file: a fresh
// temporary, fsynced and renamed). Throws tetra::Error prefixed by `context` on any failure
// (the temporary is removed).
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& context);

}  // namespace tetra::ckpt
