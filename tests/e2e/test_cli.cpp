// Bad input: every case ends with exactly one "tetra: error:" line naming the problem and
// exit status 2, never a crash or a hang. Runs the real `tetra` binary.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "checkpoint/safetensors.hpp"
#include "data/dataset.hpp"
#include "util/json.hpp"

namespace {

using tetra::test::count;
using tetra::test::TempDir;
using tetra::test::with_defaults;

// Runs `[mpirun -np N] tetra train ARGS` with a 60 s limit, one step and a fixed peak unless
// ARGS say otherwise.
tetra::test::Spawned run(const std::string& args, int ranks = 0) {
  return tetra::test::spawn((ranks > 0 ? tetra::test::mpirun(ranks) : std::string()) +
                                tetra::test::tetra_bin() + " train " +
                                tetra::test::with_defaults("--steps 1 --peak-tflops 1", args),
                            60);
}

void expect_error(const std::string& args, const std::string& message, int ranks = 0) {
  CAPTURE(args);
  const tetra::test::Spawned r = run(args, ranks);
  CAPTURE(r.err);
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // not a timeout
  if (ranks == 0) CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find(message) != std::string::npos);
}

// A safetensors file written byte by byte, for dtypes tetra never writes.
void write_raw_safetensors(const std::string& path, const std::string& header, size_t data) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  f << std::string(data, '\0');
}

}  // namespace

TEST_CASE("cli: a good run exits 0") {
  const tetra::test::Spawned r =
      run("--layers 1 --dim 16 --heads 2 --kv-heads 1 --ffn-dim 16 --seq-len 8 "
          "--global-batch 2");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
}

TEST_CASE("cli: flags and model shapes") {
  expect_error("--frobnicate 3", "unknown flag '--frobnicate'");
  expect_error("--dim", "--dim needs a value");
  expect_error("--dim abc", "--dim takes an integer");
  expect_error("--dim 0", "--dim must be positive");
  expect_error("--layers -1", "--layers must be positive");
  expect_error("--heads 0", "--heads must be positive");
  expect_error("--seq-len 0", "--seq-len must be positive");
  expect_error("--global-batch 0", "--global-batch must be positive");
  expect_error("--ffn-dim -4", "--ffn-dim must be positive");
  expect_error("--dim 100 --heads 3 --kv-heads 1", "--dim 100 is not divisible by --heads 3");
  expect_error("--heads 4 --kv-heads 3", "--heads 4 is not divisible by --kv-heads 3");
  expect_error("--dim 36 --heads 4 --kv-heads 2", "head_dim = dim/heads = 9 must be even");
  expect_error("--recompute half", "--recompute takes none or full");
  expect_error("--zero 4", "--zero must be 1, 2 or 3");
  expect_error("--global-batch 6 --micro-batch 4", "is not divisible by DP * micro-batch");
  expect_error("--lr inf", "--lr takes a finite number");
  expect_error("--clip nan", "--clip takes a finite number");
  expect_error("--weight-decay -1", "--weight-decay must not be negative");
  expect_error("--tp 4294967297", "out of range");
  expect_error("--inject-failure 3@1", "--inject-failure names rank 3 of 1");
  expect_error("--inject-failure 0@5", "after the last step (0)");
  expect_error("--resume \"\"", "--resume takes auto, never or a checkpoint directory");
  expect_error("--resume=", "--resume needs a value");
  expect_error("--steps 2 --steps 3", "--steps is given more than once");
}

TEST_CASE("cli: odd sequence lengths and diverging runs still end cleanly") {
  const std::string model = "--layers 1 --dim 16 --heads 2 --kv-heads 1 --ffn-dim 16 ";
  CHECK(run(model + "--seq-len 7 --global-batch 2").status == 0);
  CHECK(run(model + "--seq-len 1 --global-batch 2").status == 0);
  // A learning rate that makes the run diverge at step 1: the run stops there (exit 65, see
  // test_diverge.cpp) and the metrics hold valid records of the steps before it.
  const TempDir tmp;
  const std::string metrics = tmp / "diverge.jsonl";
  const auto r =
      run(model + "--seq-len 8 --global-batch 2 --lr 1e30 --steps 3 --metrics " + metrics);
  CHECK(r.status == 65);
  std::istringstream lines(tetra::test::slurp(metrics));
  int records = 0;
  for (std::string line; std::getline(lines, line); ++records) {
    tetra::json record;
    CHECK(tetra::parse_json(line, record) == "");
  }
  CHECK(records == 1);
}

TEST_CASE("cli: data files") {
  expect_error("--data /nonexistent/corpus.txt", "not found");
  const TempDir tmp;
  const std::string bin = tmp / "bad.bin";
  {
    std::vector<int32_t> header(256, 0);
    header[0] = 12345;
    header[1] = 1;
    header[2] = 10;
    std::ofstream f(bin, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
  }
  expect_error("--data " + bin, "bad magic 12345");
  {
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = 1;
    header[2] = 1000;
    std::vector<uint16_t> tokens(10, 1);
    std::ofstream f(bin, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()), 20);
  }
  expect_error("--data " + bin, "header says 1000 tokens");
  std::vector<uint32_t> tokens(200, 3);
  tokens[17] = 300;
  tetra::data::write_bin_shard(bin, tokens);
  expect_error("--data " + bin + " --seq-len 8",
               "token id 300 at position 17 is not below --vocab 256");
}

TEST_CASE("cli: init files") {
  const TempDir tmp;
  const std::string path = tmp / "init.safetensors";
  const std::string shape = "--seq-len 8 --global-batch 2";
  expect_error("--init-from /nonexistent/w.safetensors " + shape, "not found");

  // A complete tiny model, then variants with one thing wrong.
  auto write_model = [&](const std::string& skip, const std::string& reshape,
                         bool say_heads = true) {
    tetra::st::Writer w;
    const int64_t d = 16, f = 16, v = 256;
    auto add = [&](const std::string& name, std::vector<int64_t> s) {
      if (name == skip) return;
      if (name == reshape) s[0] += 1;
      int64_t n = 1;
      for (int64_t x : s) n *= x;
      std::vector<float> data(n, 0.01f);
      w.add(name, s, data.data());
    };
    add("model.embed_tokens.weight", {v, d});
    const std::string p = "model.layers.0.";
    add(p + "input_layernorm.weight", {d});
    add(p + "self_attn.q_proj.weight", {d, d});
    add(p + "self_attn.k_proj.weight", {8, d});
    add(p + "self_attn.v_proj.weight", {8, d});
    add(p + "self_attn.o_proj.weight", {d, d});
    add(p + "post_attention_layernorm.weight", {d});
    add(p + "mlp.gate_proj.weight", {f, d});
    add(p + "mlp.up_proj.weight", {f, d});
    add(p + "mlp.down_proj.weight", {d, f});
    add("model.norm.weight", {d});
    add("lm_head.weight", {v, d});
    if (say_heads) {
      w.set_metadata("heads", "2");
      w.set_metadata("rope_theta", "10000");
    }
    w.write(path);
  };
  write_model("", "");
  CHECK(run("--init-from " + path + " " + shape).status == 0);
  expect_error("--init-from " + path + " --dim 32 " + shape,
               "--dim 32 disagrees with the init model");
  expect_error("--init-from " + path + " --rope-theta 5 " + shape, "--rope-theta 5 disagrees");
  // A file that does not say its head count (as transformers writes them) needs --heads.
  write_model("", "", false);
  expect_error("--init-from " + path + " " + shape, "pass --heads");
  CHECK(run("--init-from " + path + " --heads 2 " + shape).status == 0);
  write_model("model.layers.0.mlp.up_proj.weight", "");
  expect_error("--init-from " + path + " " + shape,
               "missing tensor 'model.layers.0.mlp.up_proj.weight'");
  write_model("", "model.layers.0.self_attn.o_proj.weight");
  expect_error(
      "--init-from " + path + " " + shape,
      "tensor 'model.layers.0.self_attn.o_proj.weight' has shape [17, 16], expected [16, 16]");
  write_raw_safetensors(path,
                        R"({"model.embed_tokens.weight":{"dtype":"I64","shape":[256,16],)"
                        R"("data_offsets":[0,32768]}})",
                        32768);
  expect_error("--init-from " + path + " " + shape, "I64");
}

TEST_CASE("cli: layouts under mpirun stop every rank with one message") {
  const std::string model = "--layers 2 --dim 32 --heads 4 --kv-heads 2 --ffn-dim 32 --seq-len 8 ";
  expect_error(with_defaults(model, "--tp 3"), "does not divide the 4 ranks", 4);
  expect_error(with_defaults(model, "--tp 2 --dp 3"), "must equal the number of ranks (4)", 4);
  expect_error(with_defaults(model, "--dp 4 --global-batch 6"),
               "--global-batch 6 is not divisible by DP 4", 4);
  expect_error(with_defaults(model, "--dp 2 --global-batch 4 --micro-batch 4"),
               "is not divisible by DP * micro-batch = 2 * 4", 2);
  expect_error(with_defaults(model, "--zero 0"), "--zero must be 1, 2 or 3", 2);
  expect_error(with_defaults(model, "--tp 4 --heads 6 --dim 48 --kv-heads 2"),
               "--heads 6 is not divisible by TP 4", 4);
  expect_error(with_defaults(model, "--tp 4 --heads 4 --kv-heads 2"),
               "--kv-heads 2 is not divisible by TP 4", 4);
  expect_error(with_defaults(model, "--tp 4 --heads 4 --kv-heads 4 --ffn-dim 30"),
               "--ffn-dim 30 is not divisible by TP 4", 4);
  expect_error(with_defaults(model, "--tp 2 --sp --global-batch 1 --seq-len 7"),
               "which does not divide them", 2);
  expect_error(with_defaults(model, "--pp 2 --global-batch 2 --micro-batch 2"),
               "fewer than PP = 2 stages", 2);
  expect_error(
      with_defaults(model, "--pp 2 --schedule interleaved --global-batch 5 --micro-batch 1"),
      "interleaved", 2);
  expect_error(with_defaults(model, "--pp 2 --vpp 2 --global-batch 4"),
               "4 chunks is more than the 2 layers", 2);
  expect_error(with_defaults(model, "--pp 2 --vpp 2 --schedule 1f1b --layers 4 --global-batch 4"),
               "interleaved", 2);
  expect_error(with_defaults(model, "--cp 2 --seq-len 6"),
               "--seq-len 6 is not divisible by 2*CP = 4", 2);
}
