// Stream time by category for the benchmark (tools/bench/gpu.sh).
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

namespace tetra::cuda {

// TETRA_CUDA_TIMING=1: stream time by category from CUDA events (GEMMs, attention, the rest),
// summed at each synchronize() (the trainer's one per step) and printed when the backend goes,
// for tools/bench/gpu.sh. Off by default: the events cost a little.
class CategoryTimes {
 public:
  enum Category { kGemm, kAttention, kCategories };
  explicit CategoryTimes(cudaStream_t s) : stream_(s) {
    const char* env = std::getenv("TETRA_CUDA_TIMING");
    on_ = env && *env && std::string(env) != "0";
  }
  ~CategoryTimes() {
    if (!on_ || syncs_ == 0) return;
    std::fprintf(stderr,
                 "tetra: cuda time by category over %d synchronizations: gemm %.1f ms, attention "
                 "%.1f ms, other %.1f ms (stream total %.1f ms)\n",
                 syncs_, ms_[kGemm], ms_[kAttention], total_ - ms_[kGemm] - ms_[kAttention],
                 total_);
  }
  // An event pair around one call of a category.
  class Span {
   public:
    Span(CategoryTimes& t, Category c) : t_(t), c_(c) {
      if (t_.on_) start_ = t_.record();
    }
    ~Span() {
      if (t_.on_) t_.spans_.push_back({c_, start_, t_.record()});
    }

   private:
    CategoryTimes& t_;
    Category c_;
    cudaEvent_t start_ = nullptr;
  };
  // After the stream is idle: adds up the spans since the last call, and the stream time.
  void collect() {
    if (!on_) return;
    const cudaEvent_t now = record();
    cudaEventSynchronize(now);
    for (const auto& [c, a, b] : spans_) {
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      ms_[c] += ms;
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
    spans_.clear();
    if (last_) {
      float ms = 0;
      cudaEventElapsedTime(&ms, last_, now);
      total_ += ms;
      cudaEventDestroy(last_);
      ++syncs_;
    }
    last_ = now;
  }

 private:
  cudaEvent_t record() {
    cudaEvent_t e = nullptr;
    cudaEventCreate(&e);
    cudaEventRecord(e, stream_);
    return e;
  }
  cudaStream_t stream_;
  bool on_ = false;
  std::vector<std::tuple<Category, cudaEvent_t, cudaEvent_t>> spans_;
  cudaEvent_t last_ = nullptr;
  double ms_[kCategories] = {}, total_ = 0;
  int syncs_ = 0;
};

}  // namespace tetra::cuda
