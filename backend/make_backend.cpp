#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "util/error.hpp"

namespace tetra {

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, int local_rank) {
  if (device == "cpu") return make_cpu_backend(threads);
  if (device == "guarded-cpu") return make_guarded_cpu_backend(threads);
#ifdef TETRA_HAVE_CUDA
  if (device == "cuda") return make_cuda_backend(local_rank);
#endif
  check(device != "cuda",
        "device cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
  fail("device '", device, "': not a backend (cpu, guarded-cpu or cuda)");
}

}  // namespace tetra
