#include "checkpoint/shared_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "parallel/agree.hpp"
#include "util/output_file.hpp"

namespace tetra::ckpt {

void check_shared_dir(MPI_Comm world, const std::string& dir, const Hosts& hosts) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  // Rank 0's probe is a fresh temporary (O_CREAT | O_EXCL | O_NOFOLLOW under a random name:
  // nothing planted there is written through); every rank is sent its name.
  std::string probe;
  agree(world, [&] {
    if (rank != 0) return;
    const Temporary t = create_temporary((std::filesystem::path(dir) / "probe").string());
    check(t.fd >= 0, "checkpoint directory '", dir, "' is not writable: ", t.problem);
    ::close(t.fd);
    probe = t.path;
  });
  int len = int(probe.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, world);
  probe.resize(size_t(len));
  MPI_Bcast(probe.data(), len, MPI_CHAR, 0, world);
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
          " wrote there; every rank writes its shard into `checkpoint.ckpt_dir`, so it must be one "
          "file "
          "system that all hosts mount at the same path");
  });
}

}  // namespace tetra::ckpt
