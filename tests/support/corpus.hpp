// A small English-like corpus for the tokenizer tests (enough text for SentencePiece to train
// a few hundred pieces on), and the cache files found beside it.
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace tetra::test {

// The corpus written into tmp, as corpus.txt; returns tmp's path.
inline std::string corpus_dir(const TempDir& tmp) {
  const std::string dir = tmp.path.string();
  std::ofstream f(tmp / "corpus.txt");
  const char* subjects[] = {"the cat", "a dog", "the old fox", "my friend", "the teacher"};
  const char* verbs[] = {"sees", "likes", "follows", "helps", "reads to"};
  const char* objects[] = {"the bird", "a child", "the farmer", "her sister", "the crowd"};
  for (int i = 0; i < 400; ++i)
    f << subjects[i % 5] << " " << verbs[(i / 5) % 5] << " " << objects[(i * 7) % 5]
      << (i % 4 == 3 ? ".\n" : ", and ");
  return dir;
}

// The one file in dir whose name ends in suffix ("" when none; a failed check when several).
inline std::string only_file(const std::string& dir, const std::string& suffix) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) {
      CHECK(found.empty());
      found = e.path().string();
    }
  return found;
}

}  // namespace tetra::test
