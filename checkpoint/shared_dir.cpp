#include "checkpoint/shared_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "parallel/agree.hpp"

namespace tetra::ckpt {

void check_shared_dir(MPI_Comm world, const std::string& dir, const Hosts& hosts) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  char name[64] = {};
  if (rank == 0) {
    std::snprintf(name, sizeof name, ".tetra_probe_%d_%016llx", int(::getpid()),
                  (unsigned long long)std::random_device{}() << 32 ^ std::random_device{}());
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, world);
  const std::string probe = (std::filesystem::path(dir) / name).string();
  agree(world, [&] {
    if (rank != 0) return;
    std::FILE* f = std::fopen(probe.c_str(), "w");
    check(f != nullptr, "checkpoint directory '", dir, "' is not writable: ", std::strerror(errno));
    std::fclose(f);
  });
  int seen = 0;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(kProbeSeconds * 1000));
  for (;;) {
    struct stat st;
    seen = ::stat(probe.c_str(), &st) == 0 ? 1 : 0;
    if (seen || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<int> all(size);
  MPI_Allgather(&seen, 1, MPI_INT, all.data(), 1, MPI_INT, world);
  if (rank == 0) std::remove(probe.c_str());
  std::vector<int> blind;
  for (int r = 0; r < size; ++r)
    if (!all[r]) blind.push_back(r);
  agree(world, [&] {
    check(blind.empty(), "checkpoint directory '", dir,
          "' is not shared by every rank: ", hosts.describe(blind), " do",
          blind.size() == 1 ? "es" : "", " not see the file that rank 0 on ", hosts.name[0],
          " wrote there; every rank writes its shard into --ckpt-dir, so it must be one file "
          "system that all hosts mount at the same path");
  });
}

}  // namespace tetra::ckpt
