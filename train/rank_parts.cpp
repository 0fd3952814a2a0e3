#include "train/rank_parts.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "checkpoint/hf_io.hpp"
#include "checkpoint/resume.hpp"
#include "checkpoint/shared_dir.hpp"
#include "data/documents.hpp"
#include "data/regex.hpp"
#include "data/token_cache.hpp"
#include "model/init.hpp"
#include "parallel/agree.hpp"
#include "parallel/nccl_comm.hpp"
#include "parallel/placement.hpp"
#include "plan/memory.hpp"
#include "train/outputs.hpp"
#include "util/checked.hpp"
#include "util/clock.hpp"
#include "util/output_file.hpp"

namespace tetra {
namespace {

// How long a supervised restart waits for the lock of its checkpoint directory.
constexpr double kRestartLockWaitSeconds = 60;

// Rank 0's string on every rank of comm.
std::string broadcast_string(MPI_Comm comm, std::string s) {
  int n = int(s.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  s.resize(n);
  MPI_Bcast(s.data(), n, MPI_CHAR, 0, comm);
  return s;
}

// --tokenizer (or the init model's own), in memory: for bpe:N, rank 0 trains it on the text
// unless it is cached, and the others take its bytes. The model's vocabulary becomes its pieces.
// Nothing is written here: a model trained now is returned for write_token_caches.
data::TokenizerModel load_tokenizer(RankParts& p, MPI_Comm world, int rank) {
  DataConfig& d = p.config.data;
  data::TokenizerModel m;
  agree(world, [&] {
    check(d.data != "synthetic", "`data.tokenizer` needs text data: give `data.data` FILE");
    check(d.tokenizer.rfind("bpe:", 0) != 0 || !data::is_documents(d.data), "`data.tokenizer` ",
          d.tokenizer,
          " trains on a text file, and `data.data` names JSONL documents: give a tokenizer file "
          "(a tokenizer.json or a SentencePiece .model)");
    if (rank == 0) m = data::tokenizer_model(d.tokenizer, d.data);
  });
  m.path = broadcast_string(world, m.path);
  m.trained = broadcast_string(world, m.trained);
  agree(world, [&] { p.tokenizer = data::load_tokenizer_model(m); });
  const int vocab = p.tokenizer->vocab();
  p.config.model.vocab = vocab;
  p.config.model.vocab_rows = padded_vocab(vocab);
  return m;
}

// What became of a token cache: "reused", "tokenized now", or why it was made again.
std::string cache_status(const data::CachedShard& s) {
  return s.reused            ? "reused"
         : s.rebuilt.empty() ? "tokenized now"
                             : "rebuilt: the cache there " + s.rebuilt;
}

// The data as tokens, made now where they are not cached: text under a tokenizer becomes its
// shard (which --data then names), documents theirs (which open_dataset reads).
void tokenize_data(RankParts& p, bool report) {
  DataConfig& d = p.config.data;
  const data::DocumentOptions options{d.data_field, d.skip_bad_lines};
  for (std::string* source : {&d.data, &d.val_data}) {
    if (source->empty() || *source == "synthetic") continue;
    if (data::is_documents(*source)) {
      for (const std::string& file : data::document_files(*source)) {
        const data::CachedShard s = data::tokenize_documents(file, *p.tokenizer, options);
        if (!report) continue;
        std::string skipped;
        if (s.skipped > 0)
          skipped = ", " + std::to_string(s.skipped) + " bad line" + (s.skipped > 1 ? "s" : "") +
                    " skipped" +
                    (s.first_skipped.empty()
                         ? ""
                         : " (first: " + settings::worded(s.first_skipped, p.config.origin) + ")");
        std::printf("documents: %s -> %s (%s; %lld documents%s)\n", file.c_str(), s.bin.c_str(),
                    cache_status(s).c_str(), static_cast<long long>(s.documents), skipped.c_str());
      }
    } else if (!d.tokenizer.empty()) {
      const data::CachedShard shard = data::tokenize_cached(*source, *p.tokenizer);
      if (report)
        std::printf("tokens: %s -> %s (%s)\n", source->c_str(), shard.bin.c_str(),
                    cache_status(shard).c_str());
      *source = shard.bin;
    }
  }
}

// Whether --data is text for a tokenizer: a text file or documents, not token shards.
bool is_text(const std::string& data) {
  return data::is_documents(data) ||
         (std::filesystem::is_regular_file(data) && !data::is_bin_shard(data));
}

// The tokenizer: bytes, --tokenizer's, or a model directory's own (tetra's or another's
// export): text is tokenized with it unless --tokenizer names one, and token shards are taken
// as its tokens, so that the samples decode through it and the export carries it. Returns the
// model when it comes from a file or bpe:N (its path "" for bytes and for token shards).
data::TokenizerModel choose_tokenizer(RankParts& p, MPI_Comm world, int rank) {
  DataConfig& d = p.config.data;
  p.tokenizer = data::byte_tokenizer();
  const std::string own = data::model_dir_tokenizer(p.config.model.init_from);
  if (d.tokenizer.empty() && !own.empty()) {
    bool text = false;
    agree(world, [&] { text = is_text(d.data); });
    const bool readable = own.ends_with(".json") ? data::have_pcre2() : data::have_sentencepiece();
    if (text)
      d.tokenizer = own;
    else if (readable)
      agree(world, [&] { p.tokenizer = data::load_tokenizer(own); });
  }
  return d.tokenizer.empty() ? data::TokenizerModel{} : load_tokenizer(p, world, rank);
}

// Once the run's settings are checked: a tokenizer trained now, and the data's tokens, where
// they are not cached, are written beside the data. Rank 0 writes them; the others then find
// them all cached.
void write_token_caches(RankParts& p, const data::TokenizerModel& tokenizer, MPI_Comm world,
                        int rank) {
  agree(world, [&] {
    if (rank != 0) return;
    data::save_tokenizer_model(tokenizer);
    if (!tokenizer.path.empty())
      std::printf("tokenizer: %s, %d pieces (%s)\n", tokenizer.path.c_str(), p.tokenizer->vocab(),
                  tokenizer.trained.empty() ? "reused" : "trained now");
    tokenize_data(p, true);
  });
  agree(world, [&] {
    if (rank != 0) tokenize_data(p, false);
  });
}

// Before step 0: the memory of a step, by the plan's model (plan/memory.hpp), for
// every rank this machine runs, against what the machine has left. A step that cannot fit
// is refused with its numbers instead of failing part-way (or being killed). On CPU the
// attention's per-thread score matrices count too; GPU memory is not checked here.
void check_memory_fits(const TrainConfig& c, const plan::Setup& s, int local_ranks, int threads) {
  if (c.device.device == "cuda") return;
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
        " available; shorten `model.seq_len`, lower `batch.micro_batch`, split the work over more "
        "ranks "
        "(`layout.cp`, `layout.tp`, `layout.pp`) or use `optimizer.recompute` full");
}

// The training data, and the validation data: --val-data, or the last --val-split of --data;
// tokens of the data's vocabulary (the flags', which the model's may exceed under --init-from).
void open_data(RankParts& p, int64_t data_vocab) {
  const DataConfig& d = p.config.data;
  const int vocab = int(data_vocab);
  const int S = p.config.model.seq_len;
  const uint64_t seed = p.config.optimizer.seed;
  const data::Portion train{d.val_split > 0 ? data::Portion::Train : data::Portion::All,
                            d.val_split};
  const data::DocumentOptions documents{d.data_field, d.skip_bad_lines};
  const data::Tokenizer* tok = p.tokenizer.get();
  // Without documents every token would be of one document: the mask would change nothing.
  check(!p.config.model.doc_mask || data::is_documents(d.data),
        "`model.doc_mask` masks attention between documents, and `data.data` '", d.data,
        "' has none: give JSONL documents (a .jsonl file, or a directory or glob of them)");
  p.data = data::open_dataset(d.data, vocab, S, seed, train, tok, documents);
  if (!d.val_data.empty())
    p.val = data::open_dataset(d.val_data, vocab, S, seed, {}, tok, documents);
  else if (d.val_split > 0)
    p.val = data::open_dataset(d.data, vocab, S, seed, {data::Portion::Validation, d.val_split},
                               tok, documents);
}

// Rank 0: the checkpoint directory, locked, so that no other job writes it while this run
// reads and writes it. While the run's checks are still going only an existing directory is
// locked (a refusal releases the lock and leaves it as it was); once they have passed
// (`create`) a missing one is made, and checked writable before the first step, not at the
// first save.
void lock_checkpoint_dir(RankParts& p, bool create) {
  const std::string& dir = p.config.checkpoint.ckpt_dir;
  std::error_code ec;
  if (dir.empty() || p.lock || (!create && !std::filesystem::is_directory(dir, ec))) return;
  std::filesystem::create_directories(dir, ec);
  check(!ec, "cannot create checkpoint directory '", dir, "': ", ec.message());
  // A fresh temporary made and removed, as every checkpoint file will be made.
  const std::string problem = creation_problem(dir + "/probe");
  check(problem.empty(), "checkpoint directory '", dir, "' is not writable: ", problem);
  // A supervised restart may start while the failed attempt's ranks are still being torn
  // down: it waits for them a while.
  const bool restart = !FaultPlan::first_attempt();
  p.lock = std::make_unique<ckpt::DirLock>(
      dir, ckpt::LockRequest{ckpt::job_identity(), restart, restart ? kRestartLockWaitSeconds : 0.0,
                             FaultPlan::restart_count()});
}

// The backend (CPU, guarded CPU or CUDA; mixed precision under --dtype bf16) and the process
// grid with its communicators.
void make_backend_and_grid(RankParts& p, MPI_Comm world, int sharing_cores) {
  const DeviceConfig& d = p.config.device;
  const NodeRank node = node_rank(world);
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  p.threads = threads_per_rank(sharing_cores, rank == 0);
  if (const std::string w = binding_warning(rank, node.size); rank == 0 && !w.empty())
    std::fprintf(stderr, "tetra: warning: %s\n", w.c_str());
  // On a GPU: one rank per GPU where there are enough; ranks beyond that share them round robin.
  agree(world, [&] { p.backend = make_backend(d.device, p.threads, node.rank); });
  if (d.dtype == "bf16") {
    agree(world, [&] {
      check(p.backend->has_bf16(), "`device.dtype` bf16: ", p.backend->name(),
            " has no bf16 support (a GPU of compute capability 8.0 or later has); use "
            "`device.dtype` fp32");
    });
    // A backend with bf16 kernels of its own (CUDA) takes bf16 tensors as they are; the CPU's
    // bf16 is its fp32 ops under the mixed-precision wrapper, the reference.
    if (!p.backend->native_bf16()) p.backend = make_mixed_precision_backend(std::move(p.backend));
  }
  const bool shared = shares_device(world, *p.backend);
  agree(world, [&] {
    check(
        d.comm != "nccl" || have_nccl(),
        "`device.comm` nccl: this build has no NCCL (it was not found when tetra was configured); "
        "use `device.comm` mpi");
    check(d.comm != "nccl" || !shared, "`device.comm` nccl: ", p.work.layout.world(),
          " ranks share this machine's GPUs, and NCCL needs a GPU of its own for every rank; "
          "use `device.comm` mpi (or auto, which takes NCCL only for groups whose ranks each have "
          "one)");
  });
  // The embedding group pairs the embedding's stage with the head's, where they differ.
  const bool head_apart = head_rank(placement(p.work.schedule), p.work.layout.pp) != 0;
  p.grid = make_grid(world, p.work.layout, *p.backend, comm_choice(d.comm),
                     p.config.model.tie_embeddings && head_apart);
}

// Tied embeddings: which of this rank's units holds the shared matrix, and how its gradient
// is summed (parallel/zero.hpp, ZeroParams::Tied): both uses on one rank where it runs both
// ends (PP 1, or zb-v's rank 0); over the embedding group between the first stage and the last
// stage's copy beyond.
void tie_embeddings(RankParts& p) {
  if (!p.config.model.tie_embeddings) return;
  const UnitPlacement& place = p.work.place;
  const int own = place.local_unit[0];
  if (own < 0 && place.tied_copy < 0) return;  // a stage between the two ends
  ZeroParams::Tied t;
  t.unit = own >= 0 ? own : place.tied_copy;
  t.uses = own >= 0 && place.head_matrix == own ? 2 : 1;
  t.copy = own < 0;
  t.group = p.grid.embed.get();
  p.params->tie(t);
}

// Continues the checkpoint at `path`: its run's settings checked against this run's, then
// every rank's units and Adam state restored from it, at any saved layout.
void resume(RankParts& p, const std::string& path) {
  const Clock::time_point t0 = Clock::now();
  const ckpt::Reader r(path);
  ckpt::check_resumable(r.state(), p.record, p.config.checkpoint.allow_change,
                        p.config.was_given("optimizer.min_lr"), path);
  ckpt::restore(r, *p.params, p.grid.coord.tp);
  p.resume.path = path;
  p.resume.step = r.state().step;
  if (!p.config.checkpoint.ckpt_dir.empty())
    p.resume.line = ckpt::reference_to(p.config.checkpoint.ckpt_dir, path);
  p.resume.seconds = seconds_since(t0);
}

// This stage's model chunks, the pipeline executor over them, and the positions of the
// rank's tokens (the same every step: RoPE angles per token, queries and keys per sequence).
void make_pipeline(RankParts& p) {
  const TensorParallel tp{*p.grid.tp, p.config.layout.sp};
  const ContextParallel cp{*p.grid.cp};
  Backend& be = *p.backend;
  const RankWork& w = p.work;
  std::vector<std::vector<int>> units;
  for (const ChunkPlan& c : w.chunks) {
    if (c.stage != p.grid.coord.pp) continue;
    std::vector<int>& local = units.emplace_back();
    for (int g : c.units) local.push_back(w.place.local_unit[g]);
    const bool head = c.units.back() == p.config.model.layers + 1;
    p.chunks.push_back(std::make_unique<ModelChunk>(be, tp, cp, p.config.model, *p.params, local,
                                                    p.config.optimizer.recompute,
                                                    head ? w.place.head_matrix : -1));
  }
  p.params->set_chunks(units, splits_backward(w.schedule, w.weight_delay));
  std::vector<PipelineStage*> stages;
  for (auto& c : p.chunks) stages.push_back(c.get());
  const int64_t rows = tp.local_rows(w.local_tokens());
  p.executor = std::make_unique<PipelineExecutor>(be, *p.grid.pp, std::move(stages), w.schedule,
                                                  w.micro_batches, rows * p.config.model.dim,
                                                  compute_dtype(p.config.device), w.weight_delay);

  std::vector<int32_t> tokens;
  for (int i = 0; i < w.micro_batch; ++i)
    tokens.insert(tokens.end(), w.seq_pos.begin(), w.seq_pos.end());
  p.seq_pos = Buffer(be, int64_t(w.seq_pos.size()), DType::I32);
  p.key_pos = Buffer(be, int64_t(w.key_pos.size()), DType::I32);
  p.token_pos = Buffer(be, int64_t(tokens.size()), DType::I32);
  be.upload(p.seq_pos.flat(), w.seq_pos.data());
  be.upload(p.key_pos.flat(), w.key_pos.data());
  be.upload(p.token_pos.flat(), tokens.data());
}

}  // namespace

ckpt::RunState record_of(const TrainConfig& c, const ModelConfig& model, const Layout& layout) {
  ckpt::RunState s;
  s.seed = c.optimizer.seed;
  s.global_batch = c.batch.global_batch;
  s.model = ckpt::model_to_json(model);
  LayoutConfig laid_out = c.layout;
  laid_out.dp = layout.dp;
  s.layout = settings::to_json(kLayoutKeys, laid_out);
  s.config = c;
  s.config.erase("layout");  // as laid out: s.layout
  std::error_code ec;
  const auto path = std::filesystem::weakly_canonical(std::filesystem::absolute(c.data.data), ec);
  if (c.data.data != "synthetic" && !ec) s.config["data"]["data"] = path.string();
  return s;
}

RankParts build_rank(const TrainConfig& c, MPI_Comm world) {
  int world_size = 1, rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &rank);
  RankParts p;
  p.config = c;
  const int sharing_cores = ranks_sharing_my_cores(world);
  // The outputs before anything is written (a token cache, the checkpoint directory).
  agree(world, [&] {
    if (rank == 0) check_train_outputs(c);
  });
  const data::TokenizerModel tokenizer = choose_tokenizer(p, world, rank);
  // The model trained replaces the flags' in the configuration; their vocabulary is the data's.
  const int64_t data_vocab = p.config.model.vocab;

  // Everything that can reject the input runs first, on every rank, before any collective;
  // agree() then makes every rank stop together with rank 0's (or the first) message.
  std::vector<UnitSpec> units;
  std::vector<std::vector<float>> init;
  std::string resume_path;
  agree(world, [&] {
#ifndef TETRA_HAVE_CUDA
    check(c.device.device != "cuda",
          "`device.device` cuda: this build has no CUDA backend (nvcc was not found when it was "
          "configured)");
#endif
    const TrainConfig& o = p.config;
    std::unique_ptr<HfModel> file;
    if (!o.model.init_from.empty()) {
      file = std::make_unique<HfModel>(o.model.init_from);
      const ModelConfig model = config_from_model(*file, o.model, o.given);
      check(data_vocab <= model.vocab, "the data's vocabulary ", data_vocab,
            " is larger than the init model's ", model.vocab);
      // A SentencePiece tokenizer (the directory's own or --tokenizer's) must be the model's:
      // an export would carry it, and tetra generate refuses the pair.
      if (!p.tokenizer->model_file().empty())
        check_tokenizer_matches(o.model.init_from, model, *p.tokenizer);
      p.config.model = model;
    }
    const ModelConfig& model = o.model;
    model.validate();
    p.work = rank_work(o.layout, o.batch, model, world_size, rank);
    // The plan of the run: ZB-H1's W delays (the same on every rank, a pure function of the
    // configuration) and the memory check below.
    const plan::Setup planned = plan::make_setup(o.run_spec(), model, world_size);
    p.work.weight_delay = planned.run.weight_delay;
    // The run's tokens (step * G * S: tokens seen, the data order's s * G + j) in 64 bits.
    check(checked_product({o.optimizer.steps, o.batch.global_batch, model.seq_len}).has_value(),
          "`optimizer.steps` ", o.optimizer.steps, " of `batch.global_batch` ",
          o.batch.global_batch, " x `model.seq_len` ", model.seq_len,
          " tokens are more tokens than 64 bits count");
    const NodeRank node = node_rank(world);
    check_memory_fits(o, planned, node.size, threads_per_rank(sharing_cores, false));
    if (!o.checkpoint.inject_failure.empty()) {
      p.fault = FaultPlan::parse(o.checkpoint.inject_failure);
      check(p.fault.rank < world_size, "`checkpoint.inject_failure` names rank ", p.fault.rank,
            " of ", world_size);
      check(p.fault.step < o.optimizer.steps, "`checkpoint.inject_failure` at step ", p.fault.step,
            ", after the last step (", o.optimizer.steps - 1, ")");
    }
    if (rank == 0) lock_checkpoint_dir(p, false);
    // The user's configuration (text data, not its shards), as it runs.
    p.record = record_of(c, model, p.work.layout);
    if (rank == 0) resume_path = ckpt::resume_path(o.checkpoint);
    // This rank's units (its pipeline stage's, its TP slice), initialized or read.
    // Under tied embeddings the last of several stages also holds a copy of the embedding
    // (UnitPlacement::tied_copy), after its own units, made from the same values.
    const std::vector<UnitSpec> all = make_units(model, p.work.layout.tp, p.work.coord.tp);
    std::vector<int> held;
    for (size_t g = 0; g < all.size(); ++g)
      if (p.work.place.local_unit[g] >= 0) held.push_back(int(g));
    if (p.work.place.tied_copy >= 0) held.push_back(0);
    for (int g : held) {
      init.push_back(file ? read_unit(*file, model, all[g], p.work.coord.tp)
                          : init_unit(all[g], o.optimizer.seed, p.work.coord.tp));
      units.push_back(all[g]);
    }
  });
  // The data, as tokens: checked after the settings, whose refusal leaves no token cache.
  write_token_caches(p, tokenizer, world, rank);
  agree(world, [&] { open_data(p, data_vocab); });
  resume_path = broadcast_string(world, resume_path);
  const Hosts hosts = gather_hosts(world);
  // An existing checkpoint directory (rank 0 holds its lock) is checked shared before a resume
  // reads it; a new one once it is made.
  int locked = p.lock != nullptr;
  MPI_Bcast(&locked, 1, MPI_INT, 0, world);
  if (locked) ckpt::check_shared_dir(world, c.checkpoint.ckpt_dir, hosts);
  // TP all-reduces activations four times per block and micro-batch, meant for a machine's
  // fast links: a TP group over several hosts computes the same, slowly.
  if (const std::string group = hosts.spanning_group(p.work.layout.tp); rank == 0 && !group.empty())
    std::fprintf(stderr, "tetra: warning: %s\n",
                 settings::worded("a TP group spans hosts: " + group +
                                      "; its all-reduces (four per block and micro-batch) cross "
                                      "the network; give every host a multiple of `layout.tp` "
                                      "ranks, in rank order",
                                  c.origin)
                     .c_str());

  make_backend_and_grid(p, world, sharing_cores);
  p.params = std::make_unique<ZeroParams>(*p.backend, *p.grid.dp_cp, std::move(units),
                                          c.optimizer.zero, c.layout.sp ? p.grid.tp.get() : nullptr,
                                          compute_dtype(c.device), c.device.overlap);
  tie_embeddings(p);
  for (size_t u = 0; u < init.size(); ++u) p.params->load(int(u), init[u]);
  init.clear();
  if (!resume_path.empty()) agree(world, [&] { resume(p, resume_path); });
  // Every check has passed: the run may change the file system from here on.
  agree(world, [&] {
    if (rank == 0) lock_checkpoint_dir(p, true);
  });
  if (!locked && !c.checkpoint.ckpt_dir.empty())
    ckpt::check_shared_dir(world, c.checkpoint.ckpt_dir, hosts);
  make_pipeline(p);
  p.peak = find_peak(*p.backend, *p.grid.world, c.output.peak_tflops, p.threads,
                     compute_dtype(c.device));
  return p;
}

}  // namespace tetra
