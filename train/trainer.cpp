#include "train/trainer.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "checkpoint/hf_io.hpp"
#include "checkpoint/shared_dir.hpp"
#include "data/token_cache.hpp"
#include "model/init.hpp"
#include "optim/adamw.hpp"
#include "optim/clip.hpp"
#include "optim/lr_schedule.hpp"
#include "parallel/agree.hpp"
#include "parallel/hosts.hpp"
#include "parallel/nccl_comm.hpp"
#include "parallel/placement.hpp"
#include "parallel/trace.hpp"
#include "plan/memory.hpp"
#include "train/peak.hpp"
#include "train/preempt.hpp"
#include "train/report.hpp"
#include "train/trainer_checkpoint.hpp"
#include "util/checked.hpp"
#include "util/clock.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

// The ranks of this machine whose affinity is the same set of cores as this rank's (this
// one included). Collective over world.
int ranks_sharing_my_cores(MPI_Comm world) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) CPU_ZERO(&set);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  std::vector<cpu_set_t> all(n);
  MPI_Allgather(&set, sizeof set, MPI_BYTE, all.data(), sizeof set, MPI_BYTE, node);
  MPI_Comm_free(&node);
  int same = 0;
  for (const cpu_set_t& s : all) same += CPU_EQUAL(&s, &set) ? 1 : 0;
  return std::max(1, same);
}

// Threads per rank: OMP_NUM_THREADS when set, else the cores this rank may run on (its
// affinity) divided among the ranks of the machine that may run on the same cores. mpirun
// binds a rank to one core when it starts at most two, and to a socket or nothing
// otherwise; srun may give several ranks one mask; ranks that all see every core share
// them. More threads than cores only time-slice, so that is said once.
int threads_per_rank(int sharing, bool warn) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int all = std::max(1, int(std::thread::hardware_concurrency()));
  const int mine = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : all;
  int threads = std::max(1, mine / std::max(1, sharing));
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) threads = n;
  }
  if (warn && threads > mine)
    std::fprintf(stderr, "tetra: warning: %d threads per rank, but a rank may run on %d core%s\n",
                 threads, mine, mine > 1 ? "s" : "");
  return threads;
}

// How long a supervised restart waits for the lock of its checkpoint directory.
constexpr double kRestartLockWaitSeconds = 60;

// Every rank holds the same totals, so every rank throws the same DivergedError.
void stop_if_diverged(int64_t step, double loss, double grad_norm) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return;
  // NaN prints as "nan" whatever its sign bit (the stream would say "-nan" for some).
  const auto show = [](double x) {
    std::ostringstream os;
    if (std::isnan(x)) return std::string("nan");
    os << x;
    return os.str();
  };
  throw DivergedError("step " + std::to_string(step) + " diverged: loss " + show(loss) +
                      ", gradient norm " + show(grad_norm) +
                      "; stopped before its update, so no checkpoint holds it");
}

// Before step 0: the memory of a step, by the plan's model (plan/memory.hpp), for
// every rank this machine runs, against what the machine has left. A step that cannot fit
// is refused with its numbers instead of failing part-way (or being killed). On CPU the
// attention's per-thread score matrices count too; GPU memory is not checked here.
void check_memory_fits(const TrainConfig& opt, const ModelConfig& cfg, int world, int local_ranks,
                       int threads) {
  if (opt.device.device == "cuda") return;
  const plan::Setup s = plan::make_setup(opt.run_spec(), cfg, world);
  const plan::PeakMemory peak = plan::peak_memory(s);
  const double scratch = plan::cpu_attention_scratch(s, threads);
  const double rank = peak.memory.peak() + scratch, need = rank * local_ranks;
  const double avail = plan::host_memory_available();
  const auto gb = [](double b) {
    std::ostringstream os;
    os << std::setprecision(3) << b / 1e9 << " GB";
    return os.str();
  };
  check(need <= avail, "a step needs about ", gb(rank), " per rank (weights, gradients and Adam ",
        gb(peak.memory.weights + peak.memory.grads + peak.memory.adam),
        ", activations and buffers ", gb(peak.memory.step_peak), ", attention scores ", gb(scratch),
        " for ", threads, " thread", threads > 1 ? "s" : "", "), ", gb(need), " for the ",
        local_ranks, " rank", local_ranks > 1 ? "s" : "", " on this machine, which has ", gb(avail),
        " available; shorten --seq-len, lower --micro-batch, split the work over more ranks "
        "(--cp, --tp, --pp) or use --recompute full");
}

}  // namespace

Trainer::Trainer(const TrainConfig& opt, MPI_Comm world) : opt_(opt), world_(world) {
  int world_size = 1, rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &rank);

  // Everything that can reject the input runs first, on every rank, before any collective;
  // agree() then makes every rank stop together with rank 0's (or the first) message.
  std::vector<UnitLayout> mine;
  std::vector<std::vector<float>> init;
  std::string resume_path;
  const NodeRank node = node_rank(world);
  sharing_cores_ = ranks_sharing_my_cores(world);
  tokenizer_ = data::byte_tokenizer();
  // A model directory that has a tokenizer (tetra's or another's export): text is tokenized
  // with it, unless --tokenizer names one; token shards are taken as its tokens, so that the
  // samples decode through it and the export carries it.
  const std::string own = opt_.data.init_from + "/tokenizer.model";
  const bool has_own = opt_.data.tokenizer.empty() && !opt_.data.init_from.empty() &&
                       std::filesystem::is_regular_file(own);
  if (has_own && std::filesystem::is_regular_file(opt_.data.data) &&
      !data::is_bin_shard(opt_.data.data))
    opt_.data.tokenizer = own;
  else if (has_own && data::have_sentencepiece())
    agree(world, [&] { tokenizer_ = data::load_sentencepiece(own); });
  if (!opt_.data.tokenizer.empty()) {
    // Rank 0 trains and tokenizes what is not cached; the others then find it all cached.
    agree(world, [&] {
      if (rank == 0) use_tokenizer(true);
    });
    agree(world, [&] {
      if (rank != 0) use_tokenizer(false);
    });
  }
  agree(world, [&] {
#ifndef TETRA_HAVE_CUDA
    check(opt.device.device != "cuda",
          "--device cuda: this build has no CUDA backend (nvcc was not found when it was "
          "configured)");
#endif
    std::unique_ptr<HfModel> file;
    cfg_ = opt_.model;
    if (!opt.data.init_from.empty()) {
      file = std::make_unique<HfModel>(opt.data.init_from);
      cfg_ = config_from_model(*file, opt_.model, opt.given);
      check(opt_.model.data_vocab <= cfg_.real_vocab(), "the data's vocabulary ",
            opt_.model.data_vocab, " is larger than the init model's ", cfg_.real_vocab());
      // A SentencePiece tokenizer (the directory's own or --tokenizer's) must be the model's:
      // an export would carry it, and tetra generate refuses the pair.
      if (!tokenizer_->model_file().empty())
        check_tokenizer_matches(opt.data.init_from, cfg_, *tokenizer_);
    }
    cfg_.validate();
    work_ = rank_work(opt.layout, opt.batch, cfg_, world_size, rank);
    // The run's tokens (step * G * S: tokens seen, the data order's s * G + j) in 64 bits.
    check(checked_product({opt.optimizer.steps, opt.batch.global_batch, cfg_.seq_len}).has_value(),
          "--steps ", opt.optimizer.steps, " of --global-batch ", opt.batch.global_batch,
          " x --seq-len ", cfg_.seq_len, " tokens are more tokens than 64 bits count");
    check_memory_fits(opt_, cfg_, world_size, node.size, threads_per_rank(sharing_cores_, false));
    const data::Portion train_part{
        opt.data.val_split > 0 ? data::Portion::Train : data::Portion::All, opt.data.val_split};
    const int vocab = int(opt_.model.data_vocab);
    data_ = data::open_dataset(opt_.data.data, vocab, cfg_.seq_len, opt.optimizer.seed, train_part);
    if (!opt_.data.val_data.empty())
      val_ = data::open_dataset(opt_.data.val_data, vocab, cfg_.seq_len, opt.optimizer.seed);
    else if (opt.data.val_split > 0)
      val_ = data::open_dataset(opt_.data.data, vocab, cfg_.seq_len, opt.optimizer.seed,
                                {data::Portion::Validation, opt.data.val_split});
    if (!opt.checkpoint.inject_failure.empty()) {
      fault_ = FaultPlan::parse(opt.checkpoint.inject_failure);
      check(fault_.rank < world_size, "--inject-failure names rank ", fault_.rank, " of ",
            world_size);
      check(fault_.step < opt.optimizer.steps, "--inject-failure at step ", fault_.step,
            ", after the last step (", opt.optimizer.steps - 1, ")");
    }
    if (rank == 0) {
      // Every output path before step 0: a typo or a device must not cost the run.
      if (!opt.output.export_path.empty()) {
        const std::string problem = export_problem(opt.output.export_path);
        check(problem.empty(), "cannot write --export ",
              export_is_file(opt.output.export_path) ? "file" : "directory", " '",
              opt.output.export_path, "': ", problem);
      }
      for (const auto& [flag, path] :
           {std::pair{"--trace", &opt.output.trace}, {"--metrics", &opt.output.metrics}}) {
        if (path->empty()) continue;
        const std::string problem = output_file_problem(*path);
        check(problem.empty(), "cannot write ", flag, " file '", *path, "': ", problem);
      }
      if (!opt.checkpoint.ckpt_dir.empty()) {
        check_writable_dir(opt.checkpoint.ckpt_dir);
        // A supervised restart may start while the failed attempt's ranks are still being
        // torn down: it waits for them a while.
        const bool restart = !FaultPlan::first_attempt();
        lock_ = std::make_unique<ckpt::DirLock>(
            opt.checkpoint.ckpt_dir, ckpt::LockRequest{ckpt::job_identity(), restart,
                                                       restart ? kRestartLockWaitSeconds : 0.0});
      }
    }
    settings_ = run_settings(opt);
    if (rank == 0) resume_path = find_resume_path(opt);
    // This rank's units (its pipeline stage's, its TP slice), initialized or read.
    std::vector<UnitLayout> all = make_units(cfg_, work_.layout.tp, work_.coord.tp);
    for (size_t g = 0; g < all.size(); ++g) {
      if (work_.place.local_unit[g] < 0) continue;
      init.push_back(file ? read_unit(*file, cfg_, all[g], work_.coord.tp)
                          : init_unit(all[g], opt.optimizer.seed, work_.coord.tp));
      mine.push_back(std::move(all[g]));
    }
  });
  resume_path = broadcast_string(world, resume_path);
  const Hosts hosts = gather_hosts(world);
  if (!opt_.checkpoint.ckpt_dir.empty())
    ckpt::check_shared_dir(world, opt_.checkpoint.ckpt_dir, hosts);
  // TP all-reduces activations four times per block and micro-batch, meant for a machine's
  // fast links: a TP group over several hosts computes the same, slowly.
  if (const std::string group = hosts.spanning_group(work_.layout.tp); rank == 0 && !group.empty())
    std::fprintf(stderr,
                 "tetra: warning: a TP group spans hosts: %s; its all-reduces (four per block "
                 "and micro-batch) cross the network; give every host a multiple of --tp "
                 "ranks, in rank order\n",
                 group.c_str());

  make_backend_and_grid();
  params_ = std::make_unique<ZeroParams>(*be_, *grid_.dp_cp, std::move(mine), opt.optimizer.zero,
                                         opt.layout.sp ? grid_.tp.get() : nullptr, compute_dtype());
  for (size_t u = 0; u < init.size(); ++u) params_->load(int(u), init[u]);
  init.clear();
  if (!resume_path.empty()) {
    const auto t0 = Clock::now();
    agree(world, [&] { resume_from(resume_path); });
    resume_seconds_ = seconds_since(t0);
  }
  make_pipeline();
  const Peak peak =
      find_peak(*be_, *grid_.world, opt.output.peak_tflops, threads_, compute_dtype());
  peak_flops_ = peak.flops;
  peak_source_ = peak.source;
}

void Trainer::use_tokenizer(bool report) {
  check(opt_.data.data != "synthetic", "--tokenizer needs text data: give --data FILE");
  bool trained = false;
  const std::string model = data::tokenizer_model(opt_.data.tokenizer, opt_.data.data, &trained);
  tokenizer_ = data::load_sentencepiece(model);
  const int vocab = tokenizer_->vocab();
  if (report)
    std::printf("tokenizer: %s, %d pieces (%s)\n", model.c_str(), vocab,
                trained ? "trained now" : "reused");
  for (std::string* text : {&opt_.data.data, &opt_.data.val_data}) {
    if (text->empty()) continue;
    const data::CachedShard shard = data::tokenize_cached(*text, *tokenizer_);
    if (report)
      std::printf("tokens: %s -> %s (%s)\n", text->c_str(), shard.bin.c_str(),
                  shard.reused            ? "reused"
                  : shard.rebuilt.empty() ? "tokenized now"
                                          : ("rebuilt: the cache there " + shard.rebuilt).c_str());
    *text = shard.bin;
  }
  opt_.model.data_vocab = vocab;
  opt_.model.vocab = padded_vocab(vocab);
}

void Trainer::make_backend_and_grid() {
  const NodeRank node = node_rank(world_);
  int rank = 0;
  MPI_Comm_rank(world_, &rank);
  threads_ = threads_per_rank(sharing_cores_, rank == 0);
  if (const std::string w = binding_warning(rank, node.size); rank == 0 && !w.empty())
    std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
#ifdef TETRA_HAVE_CUDA
  // One rank per GPU where there are enough; ranks beyond that share them round robin.
  if (opt_.device.device == "cuda") agree(world_, [&] { be_ = make_cuda_backend(node.rank); });
#endif
  if (opt_.device.device == "guarded-cpu") be_ = make_guarded_cpu_backend(threads_);
  if (!be_) be_ = make_cpu_backend(threads_);
  if (opt_.device.dtype == "bf16") {
    agree(world_, [&] {
      check(
          be_->has_bf16(), "--dtype bf16: ", be_->name(),
          " has no bf16 support (a GPU of compute capability 8.0 or later has); use --dtype fp32");
    });
    // A backend with bf16 kernels of its own (CUDA) takes bf16 tensors as they are; the CPU's
    // bf16 is its fp32 ops under the mixed-precision wrapper, the reference.
    if (!be_->native_bf16()) be_ = make_mixed_precision_backend(std::move(be_));
  }
  const bool shared = shares_device(world_, *be_);
  agree(world_, [&] {
    check(opt_.device.comm != "nccl" || have_nccl(),
          "--comm nccl: this build has no NCCL (it was not found when tetra was configured); "
          "use --comm mpi");
    check(opt_.device.comm != "nccl" || !shared, "--comm nccl: ", work_.layout.world(),
          " ranks share this machine's GPUs, and NCCL needs a GPU of its own for every rank; "
          "use --comm mpi (or auto, which takes NCCL only for groups whose ranks each have one)");
  });
  grid_ = make_grid(world_, work_.layout, *be_, opt_.device.comm != "mpi");
}

void Trainer::make_pipeline() {
  const TensorParallel tp{*grid_.tp, opt_.layout.sp};
  const ContextParallel cp{*grid_.cp};
  for (const ChunkPlan& c : work_.chunks) {
    if (c.stage != grid_.coord.pp) continue;
    std::vector<int> local;
    for (int g : c.units) local.push_back(work_.place.local_unit[g]);
    chunks_.push_back(std::make_unique<ModelChunk>(*be_, tp, cp, cfg_, *params_, std::move(local),
                                                   opt_.optimizer.recompute));
  }
  std::vector<PipelineStage*> mine;
  for (auto& c : chunks_) mine.push_back(c.get());
  const int64_t rows = tp.local_rows(work_.local_tokens());
  executor_ =
      std::make_unique<PipelineExecutor>(*be_, *grid_.pp, std::move(mine), work_.schedule,
                                         work_.micro_batches, rows * cfg_.dim, compute_dtype());

  // Positions are the same every step: RoPE angles per token, queries and keys per sequence.
  std::vector<int32_t> tokens;
  for (int i = 0; i < work_.micro_batch; ++i)
    tokens.insert(tokens.end(), work_.seq_pos.begin(), work_.seq_pos.end());
  seq_pos_ = Buffer(*be_, int64_t(work_.seq_pos.size()), DType::I32);
  key_pos_ = Buffer(*be_, int64_t(work_.key_pos.size()), DType::I32);
  token_pos_ = Buffer(*be_, int64_t(tokens.size()), DType::I32);
  be_->upload(seq_pos_.flat(), work_.seq_pos.data());
  be_->upload(key_pos_.flat(), work_.key_pos.data());
  be_->upload(token_pos_.flat(), tokens.data());
}

Trainer::~Trainer() = default;

MicroBatch Trainer::make_micro_batch(const data::Dataset& source, int64_t step, int j,
                                     Buffer& tokens, Buffer& targets) {
  const int S = cfg_.seq_len, b = work_.micro_batch;
  const int per_dp = opt_.batch.global_batch / grid_.layout.dp;
  std::vector<int32_t> seqs(size_t(b) * (S + 1));
  data::fill_batch(source, step, opt_.batch.global_batch, grid_.coord.dp * per_dp + j * b, b, S,
                   seqs.data());
  const int64_t local = work_.local_tokens();
  std::vector<int32_t> in(static_cast<size_t>(local)), out(in.size());
  cp_slice(seqs.data(), b, S, work_.seq_pos, in.data(), out.data());
  tokens = Buffer(*be_, local, DType::I32);
  targets = Buffer(*be_, local, DType::I32);
  be_->upload(tokens.flat(), in.data());
  be_->upload(targets.flat(), out.data());
  MicroBatch mb;
  mb.tokens = tokens.flat();
  mb.targets = targets.flat();
  mb.pos.batch = b;
  mb.pos.seq = int64_t(work_.seq_pos.size());
  mb.pos.token_pos = token_pos_.flat();
  mb.pos.seq_pos = seq_pos_.flat();
  mb.pos.key_pos = key_pos_.flat();
  return mb;
}

std::vector<CommStats*> Trainer::comm_stats() {
  return {&grid_.tp->stats, &grid_.cp->stats,    &grid_.pp->stats,
          &grid_.dp->stats, &grid_.dp_cp->stats, &grid_.world->stats};
}

// One step, in the phases of the seed: forward and backward over the micro-batches (with
// the data-parallel gradient sync started inside backward), the totals, clipping and the
// sharded optimizer step, the ZeRO-1/2 weight regather, the metrics.
StepResult Trainer::step() {
  for (CommStats* s : comm_stats()) s->clear();
  be_->alloc_stats.reset_peak();
  const auto t0 = Clock::now();
  trace::Span span(trace::Lane::Step, [&](trace::Event& e) {
    e.name = "step " + std::to_string(step_);
    e.arg("step", step_);
  });
  const double tokens = double(opt_.batch.global_batch) * cfg_.seq_len;

  // Forward and backward of every micro-batch in the schedule's order; each unit's
  // gradients are reduce-scattered over dp_cp as soon as its last backward is done
  // (ModelChunk::backward -> ZeroParams::reduce_scatter_grads). The loss is pre-divided by
  // the global token count, so the reduced gradients are the mean's.
  params_->begin_step(work_.micro_batches);
  std::vector<Buffer> data(2 * work_.micro_batches);
  std::vector<MicroBatch> mbs;
  for (int j = 0; j < work_.micro_batches; ++j)
    mbs.push_back(make_micro_batch(*data_, step_, j, data[2 * j], data[2 * j + 1]));
  const PipelineStats pipe = executor_->run(mbs, float(1.0 / tokens));
  fault_.during_step(grid_.rank, step_);

  const StepTotals totals = reduce_totals(pipe, tokens);
  stop_if_diverged(step_, totals.loss, totals.grad_norm);

  // Clipping and the optimizer step on this rank's shards, then the updated shards
  // all-gathered into the full weights (ZeRO-1/2; ZeRO-3 gathers at each use).
  const double lr = LrSchedule{opt_.optimizer.lr, opt_.optimizer.min_lr, opt_.optimizer.warmup,
                               opt_.optimizer.steps}
                        .at(step_);
  {
    trace::Span adam(trace::Lane::Compute, [](trace::Event& e) { e.name = "adam"; });
    const AdamWConfig adamw{lr, 0.9, 0.95, 1e-8, opt_.optimizer.weight_decay};
    adamw_step(*params_, *be_, adamw, clip_scale(totals.grad_norm, opt_.optimizer.clip), step_ + 1);
    params_->all_gather_weights();
    be_->synchronize();
  }

  StepResult r = measure(totals, pipe, seconds_since(t0), tokens);
  r.lr = lr;
  ++step_;
  return r;
}

// The loss, the global gradient norm and the bubble, in one all-reduce over the world:
// gradient shards are disjoint over dp_cp and pipeline stages; the loss counts on the last
// stage's TP rank 0 only.
Trainer::StepTotals Trainer::reduce_totals(const PipelineStats& pipe, double tokens) {
  // This rank's bubble in the form the schedule's formula uses: of the step for gpipe and
  // 1f1b, of the compute for interleaved.
  const double busy = pipe.seconds - pipe.wait_seconds;
  const double bubble = work_.schedule == ScheduleKind::Interleaved
                            ? (busy > 0 ? pipe.wait_seconds / busy : 0.0)
                            : (pipe.seconds > 0 ? pipe.wait_seconds / pipe.seconds : 0.0);
  const bool tp0 = grid_.coord.tp == 0;
  const bool last_stage = grid_.coord.pp == grid_.layout.pp - 1;
  double grad_sq = 0;
  {
    trace::Span norm(trace::Lane::Compute, [](trace::Event& e) { e.name = "grad-norm"; });
    grad_sq = local_grad_sum_squares(*params_, *be_, tp0);
  }
  double sums[3] = {grad_sq, (tp0 && last_stage) ? pipe.loss_sum : 0.0, bubble};
  grid_.world->all_reduce_host(sums, 3);
  return {sums[1] / tokens, std::sqrt(sums[0]), sums[2] / grid_.world->size()};
}

StepResult Trainer::measure(const StepTotals& totals, const PipelineStats& pipe, double seconds,
                            double tokens) {
  StepResult r;
  r.step = step_;
  r.loss = totals.loss;
  r.grad_norm = totals.grad_norm;
  r.bubble = totals.bubble;
  r.bubble_formula =
      bubble_formula(work_.schedule, grid_.layout.pp, opt_.layout.vpp, work_.micro_batches);
  r.step_ms = seconds * 1e3;
  r.tokens_per_s = tokens / seconds;
  const double world = grid_.world->size();
  r.mfu = r.tokens_per_s * model_flops_per_token(cfg_) / (world * peak_flops_);
  r.hfu = opt_.optimizer.recompute
              ? r.tokens_per_s * (model_flops_per_token(cfg_) + recompute_flops_per_token(cfg_)) /
                    (world * peak_flops_)
              : r.mfu;
  double wait_s = 0;  // inside communication calls, pipeline receives (the bubble) included
  for (Comm* c : {grid_.tp.get(), grid_.cp.get(), grid_.pp.get(), grid_.dp_cp.get()}) {
    r.comm[c->name()] = c->stats;
    wait_s += c->stats.seconds;
  }
  r.comm["world"] = grid_.world->stats;
  wait_s += grid_.world->stats.seconds;
  r.comm_share = (wait_s - pipe.wait_seconds) / seconds;  // the bubble is shown on its own

  // One small all-reduce over the world at the step's end, after the counters above were
  // read (so it is not in this step's bytes): every rank's compute and wait, each rank
  // writing its own slot of zeros (an all-gather), and its peak of backend memory (weights,
  // gradients, Adam state, activations), of which the step reports the largest.
  // The last slot counts the ranks that received a pre-emption signal: summed in the same
  // call, so every rank agrees on the step at which the run stops.
  const int world_size = grid_.world->size(), me = grid_.world->rank();
  std::vector<double> slots(3 * size_t(world_size) + 1, 0.0);
  slots[3 * me] = seconds - wait_s;
  slots[3 * me + 1] = wait_s;
  slots[3 * me + 2] = double(be_->alloc_stats.peak);
  slots.back() = PreemptSignals::received() != 0 ? 1 : 0;
  grid_.world->all_reduce_host(slots.data(), int(slots.size()));
  r.preempted = int(slots.back());
  for (int q = 0; q < world_size; ++q) {
    r.compute_ms.push_back(1e3 * slots[3 * q]);
    r.wait_ms.push_back(1e3 * slots[3 * q + 1]);
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, slots[3 * q + 2]);
  }
  r.straggler = find_straggler(r.compute_ms);
  return r;
}

}  // namespace tetra
