// Hugging Face model directories and the padded vocabulary: --export DIR writes what
// transformers' from_pretrained loads (config.json, model.safetensors), --init-from reads it
// back (also sharded, with model.safetensors.index.json), the export holds the real
// vocabulary's rows, and the padding rows take no part in the softmax.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../support/spawn.hpp"
#include "checkpoint/hf_io.hpp"
#include "checkpoint/hf_model.hpp"
#include "checkpoint/safetensors.hpp"
#include "cli/options.hpp"
#include "train/trainer.hpp"
#include "util/json.hpp"

using namespace tetra;
using tetra::test::count;
using tetra::test::slurp;
using tetra::test::spawn;
using tetra::test::TempDir;

namespace {

const std::vector<std::string> kShape = {"--layers", "2",          "--dim", "32",        "--heads",
                                         "4",        "--kv-heads", "2",     "--ffn-dim", "64"};
const std::vector<std::string> kRun = {"--seq-len", "16", "--global-batch", "4", "--steps", "3",
                                       "--warmup",  "1",  "--peak-tflops",  "1"};

TrainConfig options(std::vector<std::string> args, bool shape = true) {
  if (shape) args.insert(args.end(), kShape.begin(), kShape.end());
  args.insert(args.end(), kRun.begin(), kRun.end());
  return parse_train_options(args);
}

json read_json_file(const std::string& path) {
  json v;
  REQUIRE(parse_json(slurp(path), v) == "");
  return v;
}

}  // namespace

TEST_CASE("hf: the padded vocabulary takes no part in the softmax, and the export drops it") {
  // --vocab 300 pads the model to 384 rows; the step-0 loss of a fresh model is near
  // ln(300), the uniform distribution over the real tokens, not ln(384).
  const TempDir tmp;
  const std::string dir = tmp / "hf_vocab";
  Trainer t(options({"--vocab", "300"}), MPI_COMM_SELF);
  CHECK(t.model().rows() == 384);
  CHECK(t.model().vocab == 300);
  t.export_weights(dir);
  const st::Reader model(dir + "/model.safetensors");
  CHECK(model.info("lm_head.weight").shape == std::vector<int64_t>{300, 32});
  CHECK(model.info("model.embed_tokens.weight").shape == std::vector<int64_t>{300, 32});
  CHECK(read_json_file(dir + "/config.json")["vocab_size"] == 300);

  // Read back, the model is padded again (with zero rows, where the original has random
  // ones) and trains exactly as the original does: the padding never counts.
  Trainer b(options({"--vocab", "300", "--init-from", dir}, false), MPI_COMM_SELF);
  CHECK(b.model().rows() == 384);
  CHECK(b.model().vocab == 300);
  const double loss = t.step().loss;
  MESSAGE("step-0 loss " << loss << ", ln 300 = " << std::log(300.0)
                         << ", ln 384 = " << std::log(384.0));
  CHECK(std::abs(loss - std::log(300.0)) < 0.02);
  CHECK(b.step().loss == loss);
  CHECK(b.step().loss == t.step().loss);
}

TEST_CASE("hf: an init model whose vocabulary TP does not divide is padded, not refused") {
  // 301 rows: TP 2 cannot split them, the padded 384 it can.
  const TempDir tmp;
  const std::string dir = tmp / "hf_odd";
  {
    Trainer t(options({"--vocab", "301"}), MPI_COMM_SELF);
    t.export_weights(dir);
  }
  const std::string train = tetra::test::tetra_bin() +
                            " train --seq-len 16 --global-batch 4 --steps 1 --peak-tflops 1"
                            " --vocab 301 --init-from " +
                            dir;
  const auto one = spawn(train + " --metrics " + dir + "/one.jsonl", 60);
  const auto two =
      spawn(tetra::test::mpirun(2) + train + " --tp 2 --metrics " + dir + "/two.jsonl", 60);
  CAPTURE(two.err);
  REQUIRE(one.status == 0);
  REQUIRE(two.status == 0);
  const double l1 = read_json_file(dir + "/one.jsonl")["loss"].get<double>();
  const double l2 = read_json_file(dir + "/two.jsonl")["loss"].get<double>();
  CHECK(l2 == doctest::Approx(l1).epsilon(1e-5));
  CHECK(std::abs(l1 - std::log(301.0)) < 0.02);
}

TEST_CASE("hf: Llama 3's RoPE and tied embeddings out and back in, one matrix stored") {
  const TempDir tmp;
  const std::vector<std::string> llama3 = {"--tie-embeddings",
                                           "--rope-type",
                                           "llama3",
                                           "--rope-theta",
                                           "500000",
                                           "--rope-factor",
                                           "8",
                                           "--rope-original-context",
                                           "64",
                                           "--rope-high-freq-factor",
                                           "2"};
  Trainer t(options(llama3), MPI_COMM_SELF);
  const std::string dir = tmp / "llama3";
  t.export_weights(dir);
  const json c = read_json_file(dir + "/config.json");
  CHECK(c["tie_word_embeddings"] == true);
  CHECK(c["rope_theta"].get<double>() == 500000.0);
  CHECK(c["rope_scaling"] == json{{"rope_type", "llama3"},
                                  {"factor", 8.0},
                                  {"low_freq_factor", 1.0},
                                  {"high_freq_factor", 2.0},
                                  {"original_max_position_embeddings", 64}});
  const st::Reader model(dir + "/model.safetensors");
  CHECK(model.names().size() == 1 + 2 * 9 + 1);  // no lm_head.weight
  for (const std::string& name : model.names()) CHECK(name != "lm_head.weight");
  // Both forms read back the same model: the directory (config.json), and one file (its
  // metadata for RoPE, the missing lm_head for the tie).
  const std::string file = tmp / "llama3.safetensors";
  t.export_weights(file);
  const auto weights = t.full_weights();
  const double loss = t.step().loss;
  for (const std::string& path : {dir, file}) {
    CAPTURE(path);
    Trainer b(options({"--init-from", path}, false), MPI_COMM_SELF);
    CHECK(b.model().tie_embeddings);
    CHECK(b.model().rope_type == "llama3");
    CHECK(b.model().rope_factor == 8.0);
    CHECK(b.model().rope_high_freq_factor == 2.0);
    CHECK(b.model().rope_original_context == 64);
    CHECK(b.full_weights() == weights);
    CHECK(b.step().loss == loss);
  }
}

TEST_CASE("hf: --export DIR writes a model directory with LlamaForCausalLM's config") {
  const TempDir tmp;
  const std::string dir = tmp / "hf_dir";
  Trainer t(options({"--rope-theta", "5000"}), MPI_COMM_SELF);
  t.export_weights(dir);
  const json c = read_json_file(dir + "/config.json");
  CHECK(c["architectures"] == json::array({"LlamaForCausalLM"}));
  CHECK(c["model_type"] == "llama");
  CHECK(c["hidden_size"] == 32);
  CHECK(c["intermediate_size"] == 64);
  CHECK(c["num_hidden_layers"] == 2);
  CHECK(c["num_attention_heads"] == 4);
  CHECK(c["num_key_value_heads"] == 2);
  CHECK(c["vocab_size"] == 256);
  CHECK(c["rms_norm_eps"].get<double>() == double(1e-5f));
  CHECK(c["rope_theta"].get<double>() == 5000.0);
  CHECK(c["max_position_embeddings"] == 16);
  CHECK(c["tie_word_embeddings"] == false);
  CHECK(c["torch_dtype"] == "float32");
  CHECK(c["hidden_act"] == "silu");
  const st::Reader model(dir + "/model.safetensors");
  CHECK(model.names().size() == 2 + 2 * 9 + 1);
  CHECK(!std::filesystem::exists(dir + "/tokenizer.model"));  // bytes: no tokenizer file

  // Round trip: the same shapes from config.json, the same weights, the same step-0 loss,
  // with no shape flag given.
  Trainer b(options({"--init-from", dir}, false), MPI_COMM_SELF);
  CHECK(b.model().heads == 4);
  CHECK(b.model().kv_heads == 2);
  CHECK(b.model().rope_theta == 5000.0);
  CHECK(b.full_weights() == t.full_weights());
  CHECK(b.step().loss == t.step().loss);

  // A second export replaces tetra's own directory.
  t.export_weights(dir);
  CHECK(st::Reader(dir + "/model.safetensors").names().size() == 21);
}

TEST_CASE("hf: --init-from reads a sharded model directory (model.safetensors.index.json)") {
  const TempDir tmp;
  const std::string dir = tmp / "hf_sharded", whole = tmp / "hf_whole";
  Trainer t(options({}), MPI_COMM_SELF);
  t.step();
  t.export_weights(whole);
  // Split the export's tensors over two shards, as save_pretrained does for large models.
  const st::Reader src(whole + "/model.safetensors");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(whole + "/config.json", dir + "/config.json");
  st::Writer shard[2];
  json map = json::object();
  int i = 0;
  for (const std::string& name : src.names()) {
    const int s = (i++ % 2);
    const std::vector<float> v = src.read(name);
    shard[s].add(name, src.info(name).shape, v.data());
    map[name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s)
    shard[s].write(dir + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors");
  std::ofstream(dir + "/model.safetensors.index.json")
      << json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  Trainer b(options({"--init-from", dir}, false), MPI_COMM_SELF);
  CHECK(b.full_weights() == t.full_weights());

  // An index that names a missing shard is one error line.
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  const auto r = spawn(tetra::test::tetra_bin() + " train --steps 1 --init-from " + dir, 30);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(count(r.err, "model-00002-of-00002.safetensors") == 1);
}

TEST_CASE("hf: an export directory that is not tetra's is refused before step 0") {
  const TempDir tmp;
  const std::string dir = tmp / "hf_foreign";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/notes.txt") << "mine";
  const auto r =
      spawn(tetra::test::tetra_bin() + " train --steps 1 --peak-tflops 1 --export " + dir, 30);
  CHECK(r.status == 2);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(count(r.err, "is not a model directory tetra exported") == 1);
  CHECK(count(r.out, "step ") == 0);
  CHECK(slurp(dir + "/notes.txt") == "mine");
  CHECK(!std::filesystem::exists(dir + "/config.json"));
  // A foreign config.json (another program's model) is not tetra's either.
  std::ofstream(dir + "/config.json") << R"({"model_type": "llama"})";
  CHECK(export_problem(dir).find("not a model directory tetra exported") != std::string::npos);
  std::filesystem::remove_all(dir);
  // A link, even to an empty directory, is named as one; nothing is written through it.
  std::filesystem::create_directories(dir + "_target");
  std::filesystem::create_directory_symlink(dir + "_target", dir);
  CHECK(export_problem(dir).find("symbolic link") != std::string::npos);
  std::filesystem::remove(dir);
  std::filesystem::remove_all(dir + "_target");
  // An empty directory or a missing one is fine.
  std::filesystem::create_directories(dir);
  CHECK(export_problem(dir) == "");
  std::filesystem::remove_all(dir);
  CHECK(export_problem(dir) == "");
}

TEST_CASE("hf: config.json as transformers 5 writes it; one that disagrees with the tensors") {
  const TempDir tmp;
  const std::string dir = tmp / "hf_config";
  Trainer(options({}), MPI_COMM_SELF).export_weights(dir);
  const json exported = read_json_file(dir + "/config.json");
  // The config as edited by `edit`, read with no flags.
  auto read_with = [&](const std::function<void(json&)>& edit) {
    json c = exported;
    edit(c);
    std::ofstream(dir + "/config.json") << c.dump();
    return config_from_model(HfModel(dir), ModelConfig{}, {});
  };
  // transformers 5 keeps RoPE's base inside rope_parameters, with no rope_theta at the top.
  const ModelConfig v5 = read_with([](json& c) {
    c.erase("rope_theta");
    c["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  });
  CHECK(v5.rope_theta == 500000.0);
  // Llama 3's RoPE, as transformers 4 writes it (rope_scaling) and as 5 does (rope_parameters).
  const json llama3 = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    CAPTURE(key);
    const ModelConfig m = read_with([&](json& c) { c[key] = llama3; });
    CHECK(m.rope_type == "llama3");
    CHECK(m.rope_factor == 32.0);
    CHECK(m.rope_low_freq_factor == 1.0);
    CHECK(m.rope_high_freq_factor == 4.0);
    CHECK(m.rope_original_context == 8192);
  }
  // One of its numbers missing is named; a RoPE variant tetra does not compute is refused.
  CHECK_THROWS_WITH_AS(read_with([&](json& c) {
                         c["rope_scaling"] = llama3;
                         c["rope_scaling"].erase("low_freq_factor");
                       }),
                       doctest::Contains("\"rope_scaling\".low_freq_factor is null"), Error);
  CHECK_THROWS_WITH_AS(read_with([](json& c) {
                         c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
                       }),
                       doctest::Contains("RoPE of type \"linear\""), Error);
  // Tied embeddings: one matrix, and a file that still holds the head's copy is taken as tied.
  CHECK_FALSE(read_with([](json&) {}).tie_embeddings);
  CHECK(read_with([](json& c) { c["tie_word_embeddings"] = true; }).tie_embeddings);
  // --tie-embeddings given for an untied model disagrees with it.
  std::ofstream(dir + "/config.json") << exported.dump();
  ModelConfig tied_flags;
  tied_flags.tie_embeddings = true;
  CHECK_THROWS_WITH_AS(
      config_from_model(HfModel(dir), tied_flags, {"model.tie_embeddings"}),
      doctest::Contains("`model.tie_embeddings` true disagrees with the init model"), Error);
  // Fewer layers than the file holds: refused, not silently cut to the first layer.
  CHECK_THROWS_WITH_AS(read_with([](json& c) { c["num_hidden_layers"] = 1; }),
                       doctest::Contains("holds tensor 'model.layers.1."), Error);
  CHECK(read_with([](json&) {}).layers == 2);
}
