// The plan as one JSON object, section by section in the order a learner checks a cluster:
// the run and the machine, the model and its arithmetic, the batch, the rank grid, memory per
// rank, traffic per group and its time, the bubble, the step time and what a whole run costs.
// Every number the text prints is here (plan_report.cpp reads nothing else).
#include "plan/plan_json.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/chunks.hpp"
#include "parallel/cp.hpp"
#include "parallel/schedule.hpp"
#include "parallel/zero.hpp"
#include "plan/estimate.hpp"
#include "plan/memory.hpp"
#include "plan/preset.hpp"
#include "plan/traffic.hpp"

namespace tetra::plan {
namespace {

const char* op_name(CommOp op) {
  switch (op) {
    case CommOp::AllReduce:
      return "all-reduce";
    case CommOp::ReduceScatter:
      return "reduce-scatter";
    case CommOp::AllGather:
      return "all-gather";
    case CommOp::SendRecv:
      return "send";
    default:
      return "other";
  }
}

json nullable(double x, bool known) {
  return known ? json(x) : json(nullptr);
}

json run_json(const Setup& s, const Request& req) {
  const LayoutConfig& l = s.spec.layout;
  return {
      {"preset", req.preset.empty() ? json(nullptr) : json(req.preset)},
      {"preset_about", req.preset.empty() ? json(nullptr) : json(preset_named(req.preset).about)},
      {"layout",
       {{"tp", s.layout().tp},
        {"cp", s.layout().cp},
        {"pp", s.layout().pp},
        {"dp", s.layout().dp},
        {"sp", l.sp},
        {"vpp", l.vpp},
        {"schedule", schedule_name(s.run.schedule)},
        {"pp_balance", l.pp_balance}}},
      {"layout_text", s.layout().str()},
      {"world", s.world()},
      {"zero", s.spec.optimizer.zero},
      {"recompute", s.spec.optimizer.recompute},
      // Whether the dp_cp collectives are queued (ZeroParams::queues), which the memory walk
      // counts (plan/memory.cpp).
      {"overlap", ZeroParams::queues(s.spec.device.overlap, s.dp_cp())},
      {"dtype", s.prec.name}};
}

json machine_json(const Machine& mc, const Request& req) {
  return {{"gpu", req.gpu},
          {"name", mc.name},
          {"device", req.gpu == "cpu" ? "machine" : "GPU"},
          {"peak_flops", nullable(mc.peak_flops, mc.peak_flops > 0)},
          {"memory_bytes", mc.memory_bytes},
          {"node_link", mc.node_link},
          {"node_link_bytes_per_s", mc.nvlink_Bps},
          {"network_bytes_per_s", mc.network_Bps},
          {"gpus_per_node", mc.gpus_per_node}};
}

json model_json(const ModelConfig& m) {
  const double mat = double(m.matmul_params());
  return {{"text", m.str()},
          {"layers", m.layers},
          {"dim", m.dim},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim()},
          {"ffn_dim", m.ffn_dim},
          {"vocab", m.vocab},
          {"vocab_rows", m.rows()},
          {"seq_len", m.seq_len},
          {"parameters", m.total_params()},
          {"matmul_parameters", m.matmul_params()},
          {"flops_per_token",
           {{"six_n", 6 * mat},
            {"attention", 12.0 * m.layers * m.dim * double(m.seq_len)},
            {"total", model_flops_per_token(m)},
            {"recompute", recompute_flops_per_token(m)}}}};
}

// Bytes per parameter, both ways: the headline's mixed-precision Adam (ZeRO's paper and the
// seeds: bf16 weights and gradients, fp32 master weights, m and v) and tetra's own, in the
// run's precision (tetra keeps fp32 gradients, and at ZeRO-1 the full ones beside their
// shard), on one rank and at ZeRO-1 over the run's dp_cp ranks, from the memory model.
json bytes_per_parameter(const Setup& s) {
  const int N = s.dp_cp();
  const double P = double(s.cfg.total_params());
  const auto tetra_at = [&](int dp) {
    RunSpec one = s.spec;
    one.layout = {1, 1, 1, dp, false, 1, "1f1b"};
    one.optimizer.zero = 1;
    one.batch.global_batch = dp;
    one.batch.micro_batch = 1;
    const Memory mem = persistent_memory(make_setup(one, s.cfg, dp), 0);
    return json{{"ranks", dp},
                {"weights", mem.weights / P},
                {"gradients", mem.grads / P},
                {"adam", mem.adam / P},
                {"total", (mem.weights + mem.grads + mem.adam) / P}};
  };
  json tetra = {{"dtype", s.prec.name}, {"one_rank", tetra_at(1)}, {"zero1", tetra_at(N)}};
  return {{"headline",
           {{"weights", 2},
            {"gradients", 2},
            {"optimizer", 12},
            {"total", 16},
            {"zero1_ranks", N},
            {"zero1_total", 4 + 12.0 / N}}},
          {"tetra", tetra}};
}

json whole_model_json(const Setup& s, const Machine& mc, const Request& req, double card) {
  const double mat = double(s.cfg.matmul_params());
  const double n = card > 0 ? card : mat;
  json j = {{"n", n},
            {"n_source", card > 0 ? "model card" : "matrix products"},
            {"bf16_weight_bytes", 2 * n},
            {"training_state_bytes", 16 * n},
            {"min_devices", std::ceil(16 * n / mc.memory_bytes - 1e-9)},
            {"bytes_per_parameter", bytes_per_parameter(s)},
            {"tokens", nullptr},
            {"flops", nullptr},
            {"achieved_tflops", nullptr},
            {"device_years", nullptr},
            {"days", nullptr}};
  const double D = req.tokens;
  if (D <= 0) return j;
  j["tokens"] = D;
  j["flops"] = 6 * n * D;
  if (req.achieved_tflops > 0) {
    const double one = 6 * n * D / (req.achieved_tflops * 1e12);
    j["achieved_tflops"] = req.achieved_tflops;
    j["device_years"] = one / (365.25 * 86400);
    j["days"] = one / s.world() / 86400;
  }
  return j;
}

json batch_json(const Setup& s) {
  const int64_t S = s.cfg.seq_len, G = s.spec.batch.global_batch;
  return {{"sequences", G},
          {"seq_len", S},
          {"tokens_per_step", G * S},
          {"tokens_per_replica", G / s.layout().dp * S},
          {"micro_batches", s.run.micro_batches},
          {"micro_batch", s.run.micro_batch}};
}

json stages_json(const Setup& s) {
  const int L = s.cfg.layers;
  json stages = json::array();
  for (int p = 0; p < s.layout().pp; ++p) {
    json chunks = json::array();
    std::string label;
    int blocks = 0;
    for (int v = 0; v < s.spec.layout.vpp; ++v) {
      const int k = s.chunk_id(p, v);
      const ChunkPlan& ch = s.run.chunks[size_t(k)];
      int n = 0, first = -1;
      for (int u : ch.units)
        if (u >= 1 && u <= L) first = first < 0 ? u - 1 : first, ++n;
      blocks += n;
      const std::string cl = chunk_label(ch, L);
      label += (label.empty() ? "" : ", ") + cl;
      chunks.push_back({{"virtual_stage", v},
                        {"chunk", k},
                        {"label", cl},
                        {"units", ch.units},
                        {"layers", n},
                        {"first_layer", n ? json(first) : json(nullptr)},
                        {"last_layer", n ? json(first + n - 1) : json(nullptr)},
                        {"embedding", ch.units.front() == 0},
                        {"head", ch.units.back() == L + 1}});
    }
    stages.push_back({{"stage", p}, {"label", label}, {"layers", blocks}, {"chunks", chunks}});
  }
  return stages;
}

json cp_ranks_json(const Setup& s) {
  const int cp = s.layout().cp;
  json out = json::array();
  for (int r = 0; r < cp; ++r) {
    const std::vector<int32_t> pos = cp_positions(s.cfg.seq_len, cp, r);
    json ranges = json::array();
    std::string label;
    for (size_t i = 0; i < pos.size();) {
      size_t j = i;
      while (j + 1 < pos.size() && pos[j + 1] == pos[j] + 1) ++j;
      ranges.push_back({pos[i], pos[j]});
      label += (label.empty() ? "" : ", ") + std::to_string(pos[i]) + "-" + std::to_string(pos[j]);
      i = j + 1;
    }
    out.push_back({{"cp_rank", r}, {"positions", ranges}, {"label", label}});
  }
  return out;
}

}  // namespace

json grid_json(const Setup& s, int gpus_per_node) {
  const Layout& l = s.layout();
  const char* names[4] = {"tp", "cp", "pp", "dp"};
  const int sizes[4] = {l.tp, l.cp, l.pp, l.dp};
  json dims = json::array();
  int stride = 1;
  for (int d = 0; d < 4; ++d) {
    dims.push_back({{"name", names[d]},
                    {"size", sizes[d]},
                    {"stride", stride},
                    {"groups", l.world() / sizes[d]},
                    {"inside_node", inside_node(l, d, gpus_per_node)}});
    stride *= sizes[d];
  }
  json ranks = nullptr;
  if (l.world() <= kMaxListedRanks) {
    ranks = json::array();
    for (int r = 0; r < l.world(); ++r) {
      const Coord c = coord_of(l, r);
      // Each group named by its first member, the rank with this one's other coordinates.
      const int tp = r - c.tp, cp = r - c.cp * l.tp, pp = r - c.pp * l.tp * l.cp,
                dp = r - c.dp * l.tp * l.cp * l.pp;
      ranks.push_back(
          {{"rank", r},
           {"tp", c.tp},
           {"cp", c.cp},
           {"pp", c.pp},
           {"dp", c.dp},
           {"groups",
            {{"tp", tp}, {"cp", cp}, {"pp", pp}, {"dp", dp}, {"dp_cp", dp - c.cp * l.tp}}}});
    }
  }
  return {{"world", l.world()},
          {"node_ranks", std::min(gpus_per_node, l.world())},
          {"dims", dims},
          {"stages", stages_json(s)},
          {"cp_ranks", cp_ranks_json(s)},
          {"ranks", ranks}};
}

namespace {

json memory_entry(const Memory& m) {
  return {{"weights", m.weights},
          {"gradients", m.grads},
          {"adam", m.adam},
          {"other", m.other},
          {"activations", m.activations},
          {"buffers", m.step_peak - m.activations},
          {"peak", m.peak()},
          {"in_flight", m.in_flight}};
}

// Why the fullest stage is: the most micro-batch chunks in flight, the most layers, or the
// embedding or the head it holds beside as many as the others.
std::string fullest_why(const json& stages, int fullest) {
  int most_flight = 0, least_flight = 1 << 30, most_layers = 0, least_layers = 1 << 30;
  for (const json& st : stages) {
    most_flight = std::max(most_flight, st["in_flight"].get<int>());
    least_flight = std::min(least_flight, st["in_flight"].get<int>());
    most_layers = std::max(most_layers, st["layers"].get<int>());
    least_layers = std::min(least_layers, st["layers"].get<int>());
  }
  const json& f = stages[size_t(fullest)];
  std::vector<std::string> why;
  const int flight = f["in_flight"], layers = f["layers"];
  if (flight == most_flight && most_flight > least_flight)
    why.push_back("the most micro-batch chunks in flight (" + std::to_string(flight) + ")");
  if (layers == most_layers && most_layers > least_layers)
    why.push_back("the most layers (" + std::to_string(layers) + ")");
  if (f["embedding"].get<bool>()) why.push_back("the embedding");
  if (f["head"].get<bool>()) why.push_back("the head and its logits");
  if (why.empty())
    return "every stage keeps as many micro-batch chunks in flight and as many layers";
  std::string out = "it holds ";
  for (size_t i = 0; i < why.size(); ++i)
    out += (i == 0 ? "" : i + 1 == why.size() ? " and " : ", ") + why[i];
  return out;
}

json memory_json(const Setup& s, const Machine& mc) {
  json stages = json::array();
  int fullest = 0;
  double most = -1;
  const json layout_stages = stages_json(s);
  for (int p = 0; p < s.layout().pp; ++p) {
    const Memory m = stage_memory(s, p);
    json e = memory_entry(m);
    e["stage"] = p;
    e["layers"] = layout_stages[size_t(p)]["layers"];
    const json& chunks = layout_stages[size_t(p)]["chunks"];
    e["embedding"] = chunks.front()["embedding"];
    e["head"] = chunks.back()["head"];
    stages.push_back(e);
    if (m.peak() > most) most = m.peak(), fullest = p;
  }
  const double cap = mc.memory_bytes;
  json fixes = json::array();
  if (most > cap)
    for (const MemoryFix& f : memory_fixes(s, cap))
      fixes.push_back({{"key", f.key}, {"value", f.value}, {"peak", f.peak}, {"why", f.why}});
  // ZeRO 1, 2 and 3 in both precisions, without and with --recompute full.
  json table = json::array();
  for (const char* dtype : {"fp32", "bf16"})
    for (int zero = 1; zero <= 3; ++zero) {
      Memory r[2];
      for (int rc = 0; rc < 2; ++rc) {
        RunSpec o = s.spec;
        o.device.dtype = dtype;
        o.optimizer.zero = zero;
        o.optimizer.recompute = rc == 1;
        r[rc] = peak_memory(make_setup(o, s.cfg, s.world())).memory;
      }
      table.push_back({{"dtype", dtype},
                       {"zero", zero},
                       {"weights", r[0].weights},
                       {"gradients", r[0].grads},
                       {"adam", r[0].adam},
                       {"activations", r[0].activations},
                       {"activations_recompute", r[1].activations},
                       {"peak", r[0].peak()},
                       {"peak_recompute", r[1].peak()}});
    }
  json out = {{"capacity_bytes", cap},
              {"fullest_stage", fullest},
              {"fullest_why", fullest_why(stages, fullest)},
              {"peak_bytes", most},
              {"fits", most <= cap},
              {"fixes", fixes},
              {"stages", stages},
              {"table", table}};
  // ZB-H1 below the paper's W delays: why (plan::zb_weight_delay).
  if (weight_delay_capped(s.run.schedule, s.layout().pp, s.run.weight_delay)) {
    Setup paper = s;
    paper.run.weight_delay = kPaperWeightDelay;
    out["weight_delay"] = {{"delay", s.run.weight_delay},
                           {"paper_peak", peak_memory(paper).memory.peak()},
                           {"one_f_one_b_peak", one_f_one_b_peak(s)}};
  }
  return out;
}

json traffic_json(const Setup& s, const Machine& mc) {
  const Layout& l = s.layout();
  const std::vector<Collective> calls = step_traffic(s, 0);
  const std::map<std::string, double> by = bytes_by_group(calls);
  const std::map<std::string, int> size = {{"tp", l.tp},
                                           {"cp", l.cp},
                                           {"pp", l.pp},
                                           {"dp_cp", s.dp_cp()},
                                           {"embed", 2},  // tied embeddings beyond PP 1: the first
                                                          // stage and the last
                                           {"world", l.world()}};
  json groups = json::array();
  for (const char* group : {"tp", "cp", "pp", "dp_cp", "embed", "world"}) {
    if (!by.count(group)) continue;  // embed: only where the embeddings are tied across stages
    const Link link = group_link(s, mc, group);
    json list = json::array();
    for (const Collective& k : calls)
      if (k.group == group && k.bytes() > 0)
        list.push_back({{"op", op_name(k.op)},
                        {"calls", k.calls},
                        {"tensor_bytes", k.tensor},
                        {"size", k.size},
                        {"ring_factor", ring_factor(k.op, k.size)},
                        {"bytes", k.bytes()},
                        {"what", k.what}});
    const double bytes = by.at(group);
    groups.push_back({{"group", group},
                      {"size", size.at(group)},
                      {"bytes", bytes},
                      {"link", link.name},
                      {"link_bytes_per_s", link.bytes_per_s},
                      {"seconds", link.bytes_per_s > 0 ? bytes / link.bytes_per_s : 0.0},
                      {"calls", list}});
  }
  // Per layer and micro-batch: a block's forward and backward each enter and leave the TP
  // region twice (an all-reduce each without SP; an all-gather and a reduce-scatter with
  // it), and the recompute runs the forward once more.
  json tp = nullptr;
  if (l.tp > 1) {
    const int recompute = s.spec.optimizer.recompute ? 2 : 0;
    tp = {{"ops", s.spec.layout.sp ? json{"all-gather", "reduce-scatter"} : json{"all-reduce"}},
          {"forward", 2},
          {"backward", 2},
          {"recompute", recompute},
          {"total", 4 + recompute}};
  }
  json rings = json::array();
  for (const auto& [name, n] : {std::pair{"tp", l.tp},
                                {"cp", l.cp},
                                {"pp", l.pp},
                                {"dp", l.dp},
                                {"dp_cp", l.cp > 1 && l.dp > 1 ? s.dp_cp() : 1}})
    if (n > 1) rings.push_back({{"group", name}, {"size", n}, {"factor", 2.0 * (n - 1) / n}});
  // A round 10 GB of gradients reduced over the group that reduces them, dp_cp.
  json example = nullptr;
  if (s.dp_cp() > 1) {
    const double N = s.dp_cp(), sent = 10e9 * 2.0 * (N - 1) / N;
    example = {{"bytes", 10e9},
               {"group", "dp_cp"},
               {"ranks", N},
               {"sent_bytes", sent},
               {"network_seconds", sent / mc.network_Bps},
               {"node_link_seconds", sent / mc.nvlink_Bps}};
  }
  return {{"stage", 0},
          {"groups", groups},
          {"tp_per_layer", tp},
          {"ring_factors", rings},
          {"gradient_example", example}};
}

json bubble_json(const Setup& s) {
  const int P = s.layout().pp, V = s.spec.layout.vpp, m = s.run.micro_batches;
  json at = json::array();
  for (int f : {1, 2, 4, 8}) {
    const BubbleForms b = bubble_forms(s.run.schedule, P, V, m * f, s.run.weight_delay);
    at.push_back({{"micro_batches", m * f}, {"of_step", b.of_step}, {"of_compute", b.of_compute}});
  }
  const BubbleForms b = bubble_forms(s.run.schedule, P, V, m, s.run.weight_delay);
  json out = {{"schedule", schedule_name(s.run.schedule)},
              {"pp", P},
              {"vpp", V},
              {"micro_batches", m},
              {"of_step", b.of_step},
              {"of_compute", b.of_compute},
              {"at", at}};
  if (weight_delay_capped(s.run.schedule, P, s.run.weight_delay))
    out["weight_delay"] = s.run.weight_delay;
  return out;
}

json step_json(const Setup& s, const Machine& mc) {
  const StepEstimate e = estimate_step(s, mc);
  const double tokens = double(s.spec.batch.global_batch) * s.cfg.seq_len;
  json j = {{"known", e.known},
            {"peak_flops", nullable(mc.peak_flops, e.known)},
            {"compute_s", e.compute},
            {"piped_s", e.piped},
            {"tp_s", e.tp},
            {"cp_s", e.cp},
            {"pp_s", e.pp},
            {"dp_s", e.dp},
            {"dp_exposed_s", e.dp_exposed},
            {"step_s", nullable(e.step, e.known)},
            {"tokens_per_s", nullable(tokens / e.step, e.known)},
            {"mfu", nullable(e.mfu, e.known)},
            {"hfu", nullable(e.hfu, e.known)},
            {"assumes", kEstimateAssumes}};
  return j;
}

// Tokens D at the estimated step time, and what one MFU point is worth.
json whole_run_json(const Setup& s, const Machine& mc, const Request& req, double card,
                    const json& step) {
  if (req.tokens <= 0 || !step["known"].get<bool>()) return nullptr;
  const double D = req.tokens, tokens = double(s.spec.batch.global_batch) * s.cfg.seq_len;
  const double steps = std::ceil(D / tokens), n = card > 0 ? card : double(s.cfg.matmul_params());
  const double at = req.mfu > 0 ? req.mfu / 100 : step["mfu"].get<double>();
  const double hours = 6 * n * D / mc.peak_flops / 3600;
  return {{"tokens", D},
          {"steps", steps},
          {"seconds", steps * step["step_s"].get<double>()},
          {"mfu_point",
           {{"from", at},
            {"to", at + 0.01},
            {"source", req.mfu > 0 ? "given" : "estimate"},
            {"gpu_hours", hours * (1 / at - 1 / (at + 0.01))},
            {"gpu_hours_at_100", hours}}}};
}

}  // namespace

Machine machine_of(const Request& opt, const std::string& dtype) {
  Machine m = machine_named(opt.gpu);
  // An fp32 run computes at the fp32 rate, as its MFU counts it (train/peak.cpp).
  if (dtype != "bf16" && m.fp32_flops > 0) m.peak_flops = m.fp32_flops;
  if (opt.peak_tflops > 0) m.peak_flops = opt.peak_tflops * 1e12;
  if (opt.memory_gb > 0) m.memory_bytes = opt.memory_gb * 1e9;
  if (opt.nvlink_gbs > 0) m.nvlink_Bps = opt.nvlink_gbs * 1e9;
  if (opt.network_gbs > 0) m.network_Bps = opt.network_gbs * 1e9;
  if (opt.gpus_per_node > 0) m.gpus_per_node = opt.gpus_per_node;
  return m;
}

json plan_json(const RunSpec& spec, const ModelConfig& cfg, const Request& req) {
  const Setup s = make_setup(spec, cfg);
  const Machine mc = machine_of(req, spec.device.dtype);
  const double card = req.preset.empty() ? 0 : preset_named(req.preset).card_params;
  json j = {{"run", run_json(s, req)},      {"machine", machine_json(mc, req)},
            {"model", model_json(s.cfg)},   {"whole_model", whole_model_json(s, mc, req, card)},
            {"batch", batch_json(s)},       {"grid", grid_json(s, mc.gpus_per_node)},
            {"memory", memory_json(s, mc)}, {"traffic", traffic_json(s, mc)},
            {"bubble", bubble_json(s)},     {"step", step_json(s, mc)}};
  j["whole_run"] = whole_run_json(s, mc, req, card, j["step"]);
  return j;
}

}  // namespace tetra::plan
