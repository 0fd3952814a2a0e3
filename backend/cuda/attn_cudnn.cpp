#include <cstring>  // before the frontend, which uses std::strlen without including it

#include "backend/cuda/attn_cudnn.hpp"

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <atomic>
#include <cmath>
#include <mutex>

#include "util/error.hpp"

namespace tetra::cuda {
namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV };

// [batch, heads, rows, hd] view of a token-major buffer: tokens row_stride elements apart
// (heads * hd when packed), sequences batch_stride apart.
fe::graph::Tensor_attributes token_major(const char* name, int64_t uid, int64_t b, int64_t h,
                                         int64_t rows, int64_t hd, int64_t batch_stride,
                                         int64_t row_stride) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({b, h, rows, hd})
      .set_stride({batch_stride, hd, row_stride, 1});
}
// Stats [batch, heads, sq, 1], packed: cuDNN before 9.26 refuses strided statistics in the
// backward, so a CP chunk's slice of tetra's lse is copied through a packed scratch.
fe::graph::Tensor_attributes& stats_layout(fe::graph::Tensor_attributes& t, const SdpaGeometry& g) {
  return t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({g.batch, g.heads, g.sq, 1})
      .set_stride({g.heads * g.sq, g.sq, 1, 1});
}
template <typename Attrs>
void causal(Attrs& a, const SdpaGeometry& g) {
  // Query i sees key j <= i (top-left), or j <= i + sk - sq (bottom-right: the chunk's last
  // query sees the whole prefix).
  a.set_diagonal_alignment(g.bottom_right ? fe::DiagonalAlignment_t::BOTTOM_RIGHT
                                          : fe::DiagonalAlignment_t::TOP_LEFT)
      .set_diagonal_band_right_bound(0);
}

std::shared_ptr<fe::graph::Graph> new_graph(int sm) {
  auto graph = std::make_shared<fe::graph::Graph>();
  if (sm > 0) graph->set_sm_version(sm);  // before any node: nodes copy the context
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

std::shared_ptr<fe::graph::Graph> forward_graph(const SdpaGeometry& g, int sm) {
  auto graph = new_graph(sm);
  const int64_t B = g.batch, H = g.heads, KV = g.kv_heads, hd = g.head_dim;
  auto q = graph->tensor(token_major("Q", kQ, B, H, g.sq, hd, g.q_batch_stride, g.q_row));
  auto k = graph->tensor(token_major("K", kK, B, KV, g.sk, hd, g.k_batch_stride, g.kv_row));
  auto v = graph->tensor(token_major("V", kV, B, KV, g.sk, hd, g.k_batch_stride, g.kv_row));
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("sdpa_forward")
                  .set_generate_stats(true)
                  .set_attn_scale(1.f / std::sqrt(float(hd)));
  causal(opts, g);
  auto [o, stats] = graph->sdpa(q, k, v, opts);
  o->set_output(true)
      .set_uid(kO)
      .set_dim({B, H, g.sq, hd})
      .set_stride({g.o_batch_stride, hd, H * hd, 1});
  stats_layout(stats->set_output(true), g);
  return graph;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const SdpaGeometry& g, int sm) {
  auto graph = new_graph(sm);
  const int64_t B = g.batch, H = g.heads, KV = g.kv_heads, hd = g.head_dim;
  auto q = graph->tensor(token_major("Q", kQ, B, H, g.sq, hd, g.q_batch_stride, g.q_row));
  auto k = graph->tensor(token_major("K", kK, B, KV, g.sk, hd, g.k_batch_stride, g.kv_row));
  auto v = graph->tensor(token_major("V", kV, B, KV, g.sk, hd, g.k_batch_stride, g.kv_row));
  auto o = graph->tensor(token_major("O", kO, B, H, g.sq, hd, g.o_batch_stride, H * hd));
  auto dO = graph->tensor(token_major("dO", kdO, B, H, g.sq, hd, g.o_batch_stride, H * hd));
  fe::graph::Tensor_attributes st;
  auto stats = graph->tensor(stats_layout(st.set_name("Stats"), g));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("sdpa_backward")
                  .set_attn_scale(1.f / std::sqrt(float(hd)))
                  .set_deterministic_algorithm(true);  // two runs give the same bits
  causal(opts, g);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dO, stats, opts);
  dq->set_output(true)
      .set_uid(kdQ)
      .set_dim({B, H, g.sq, hd})
      .set_stride({g.q_batch_stride, hd, g.q_row, 1});
  dk->set_output(true)
      .set_uid(kdK)
      .set_dim({B, KV, g.sk, hd})
      .set_stride({g.k_batch_stride, hd, g.kv_row, 1});
  dv->set_output(true)
      .set_uid(kdV)
      .set_dim({B, KV, g.sk, hd})
      .set_stride({g.k_batch_stride, hd, g.kv_row, 1});
  return graph;
}

std::string message(fe::error_t e) {
  return e.get_message().empty() ? "refused" : e.get_message();
}

}  // namespace

std::vector<SdpaGeometry> sdpa_geometries(const AttnShape& a) {
  const int64_t H = a.heads, KV = a.kv_heads, hd = a.head_dim;
  const AttnStrides st = attn_strides(a);
  const int64_t qb = a.sq * st.q, kb = a.sk * st.kv, ob = a.sq * H * hd;
  if (a.mask == AttnMask::Causal)
    return {{a.batch, H, KV, a.sq, a.sk, hd, qb, kb, false, st.q, st.kv, ob}};
  check(a.mask == AttnMask::CpChunks, "cuDNN attention needs a mask hint");
  const int64_t C = a.sq / 2;
  std::vector<SdpaGeometry> out;
  for (int64_t c : {int64_t(a.cp_rank), int64_t(2 * a.cp - 1 - a.cp_rank)})
    out.push_back({a.batch, H, KV, C, (c + 1) * C, hd, qb, kb, true, st.q, st.kv, ob});
  return out;
}

std::string cudnn_sdpa_validate(const SdpaGeometry& g, bool backward, int sm) {
  auto graph = backward ? backward_graph(g, sm) : forward_graph(g, sm);
  fe::error_t e = graph->validate();
  return e.is_good() ? "" : message(e);
}

std::string cudnn_version() {
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (frontend " + std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) +
         "." + std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION) + ")";
}

static std::atomic<int64_t> graphs_built{0};  // by every device

int64_t cudnn_graphs_built() {
  return graphs_built.load();
}

// Every backend of a device shares one cuDNN handle and one cache of graphs, so that a graph is
// built once per process (a test makes many backends; each build may compile kernels through
// NVRTC). A handle belongs to the device it was made on and runs on the stream last set, so
// each execute sets the calling backend's stream first. One mutex guards both: tetra drives a
// backend from one thread, so it is taken uncontended in training.
struct CudnnSdpa::Shared {
  using Key = decltype(std::tuple_cat(std::tuple(false), SdpaGeometry{}.key()));
  struct Entry {
    std::shared_ptr<fe::graph::Graph> graph;  // null: refused
    std::string why;
    int64_t workspace = 0;
  };
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<Key, Entry> built;

  // The entry of g, built on first use. Under mu.
  const Entry& entry(const SdpaGeometry& g, bool backward) {
    const Key key = std::tuple_cat(std::tuple(backward), g.key());
    auto it = built.find(key);
    if (it != built.end()) return it->second;
    Entry e;
    auto graph = backward ? backward_graph(g, 0) : forward_graph(g, 0);
    fe::error_t r = graph->validate();
    if (r.is_good()) r = graph->build_operation_graph(handle);
    if (r.is_good()) r = graph->create_execution_plans({fe::HeurMode_t::A});
    if (r.is_good()) r = graph->check_support(handle);
    if (r.is_good()) r = graph->build_plans(handle);
    if (r.is_good()) r = graph->get_workspace_size(e.workspace);
    if (r.is_good())
      e.graph = graph;
    else
      e.why = message(r);
    graphs_built.fetch_add(1);
    return built.emplace(key, std::move(e)).first->second;
  }
  // The entry of g, which must have been accepted. Under mu.
  const Entry& accepted(const SdpaGeometry& g, bool backward, const char* what) {
    const Entry& e = entry(g, backward);
    check(e.graph != nullptr, "cuDNN SDPA ", what, ": ", e.why);
    return e;
  }
  void execute(const Entry& e, cudaStream_t s, std::unordered_map<int64_t, void*>& pack,
               void* workspace, const char* what) {
    check(cudnnSetStream(handle, s) == CUDNN_STATUS_SUCCESS, "cudnnSetStream failed");
    const fe::error_t r = e.graph->execute(handle, pack, workspace);
    check(r.is_good(), "cuDNN SDPA ", what, ": ", message(r));
  }
};

// The device's shared state, its handle made on first use. Made once and never destroyed: at
// exit a static's destructor could run cudnnDestroy after the CUDA runtime has shut down.
CudnnSdpa::Shared& CudnnSdpa::shared_of(int device) {
  static std::mutex mu;
  static std::map<int, Shared*>* all = new std::map<int, Shared*>;
  std::lock_guard lock(mu);
  Shared*& sh = (*all)[device];
  if (sh == nullptr) sh = new Shared;
  std::lock_guard lock_device(sh->mu);
  if (sh->handle == nullptr) {  // a failed cudnnCreate is tried again by the next backend
    const cudnnStatus_t st = cudnnCreate(&sh->handle);
    if (st != CUDNN_STATUS_SUCCESS) sh->handle = nullptr;
    check(st == CUDNN_STATUS_SUCCESS, "cudnnCreate: ", cudnnGetErrorString(st));
  }
  return *sh;
}

CudnnSdpa::CudnnSdpa(cudaStream_t s) : stream_(s) {
  int device = 0;
  check(cudaGetDevice(&device) == cudaSuccess, "cudaGetDevice failed");
  shared_ = &shared_of(device);  // the backend made its device current
}

bool CudnnSdpa::prepare(const SdpaGeometry& g, bool backward, std::string* why) {
  std::lock_guard lock(shared_->mu);
  const Shared::Entry& e = shared_->entry(g, backward);
  if (why) *why = e.why;
  return e.graph != nullptr;
}

int64_t CudnnSdpa::workspace_bytes(const SdpaGeometry& g, bool backward) {
  std::lock_guard lock(shared_->mu);
  return shared_->accepted(g, backward, backward ? "backward" : "forward").workspace;
}

void CudnnSdpa::forward(const SdpaGeometry& g, const void* q, const void* k, const void* v, void* o,
                        float* stats, void* workspace) {
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                          {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)},
                                          {kO, o},
                                          {kStats, stats}};
  std::lock_guard lock(shared_->mu);
  shared_->execute(shared_->accepted(g, false, "forward"), stream_, pack, workspace, "forward");
}

void CudnnSdpa::backward(const SdpaGeometry& g, const void* q, const void* k, const void* v,
                         const void* o, const void* dout, const float* stats, void* dq, void* dk,
                         void* dv, void* workspace) {
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                          {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)},
                                          {kO, const_cast<void*>(o)},
                                          {kdO, const_cast<void*>(dout)},
                                          {kStats, const_cast<float*>(stats)},
                                          {kdQ, dq},
                                          {kdK, dk},
                                          {kdV, dv}};
  std::lock_guard lock(shared_->mu);
  shared_->execute(shared_->accepted(g, true, "backward"), stream_, pack, workspace, "backward");
}

}  // namespace tetra::cuda
