// Files that are either whole or absent, even after a crash: written to a temporary beside
// the target, fsynced, renamed over it, and the rename persisted.
#pragma once
#include <string>

namespace tetra::ckpt {

// Persists the entries created, renamed or removed in dir. Throws tetra::Error prefixed by
// `context`.
void sync_dir(const std::string& dir, const std::string& context);

// path holds either its old content or all of `text`, never a part. Throws tetra::Error
// prefixed by `context` on any failure (the temporary is removed).
void write_file_atomically(const std::string& path, const std::string& text,
                           const std::string& context);

}  // namespace tetra::ckpt
