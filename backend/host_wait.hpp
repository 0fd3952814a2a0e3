// Work that another layer queues on a backend's CUDA stream without waiting for it (NCCL's
// calls, parallel/nccl_comm.cpp) is waited for where the host next waits for that stream: the
// CUDA backend calls before_host_wait(stream) ahead of each of its blocking waits (a download,
// synchronize, the sums of squares), and the hook waits for the queued calls itself first,
// polling their errors and showing the watchdog which call the stream is in. One hook per
// process (set by the first NCCL communicator); none set, before_host_wait does nothing.
#pragma once

namespace tetra {

using HostWaitHook = void (*)(void* stream);  // stream: a cudaStream_t
void set_host_wait_hook(HostWaitHook hook);
void before_host_wait(void* stream);

}  // namespace tetra
