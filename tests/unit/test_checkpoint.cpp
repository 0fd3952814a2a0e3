// Sharded checkpoints in one process: a multi-rank layout is simulated with the per-rank
// steps of save() (begin_write, write_shard per rank, finish_write); save() itself runs on
// MPI_COMM_SELF. The same layout over real ranks is tests/mpi/test_checkpoint_io.cpp.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../support/checkpoint_fixture.hpp"
#include "../support/checkpoint_helpers.hpp"
#include "../support/test_util.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint/safetensors.hpp"
#include "model/config.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
using namespace tetra;
using namespace tetra::ckpt;
using namespace tetra::test;

using tetra::test::error_of;
using tetra::test::TempDir;

TEST_CASE("checkpoint: CRC-32C gives the standard check value, in any pieces") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  CHECK(crc_hex(0xE3069283u) == "e3069283");
  std::string data(1001, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 131 + 7);
  Crc32c pieces;  // odd sizes exercise both the 8-byte loop and the byte-wise tail
  for (size_t at = 0, n = 1; at < data.size(); at += n, n = n * 3 % 17 + 1)
    pieces.update(data.data() + at, std::min(n, data.size() - at));
  CHECK(pieces.value() == crc32c(data.data(), data.size()));
}

TEST_CASE("checkpoint: the model config round-trips through JSON, every field") {
  const ModelConfig c = checkpoint_model();
  const json v = parsed_json(model_to_json(c).dump());
  CHECK(v.size() == 17);
  const ModelConfig back = model_from_json(v, "test");
  CHECK(back.vocab == c.vocab);
  CHECK(back.rows() == c.rows());
  CHECK(back.layers == c.layers);
  CHECK(back.dim == c.dim);
  CHECK(back.heads == c.heads);
  CHECK(back.kv_heads == c.kv_heads);
  CHECK(back.ffn_dim == c.ffn_dim);
  CHECK(back.seq_len == c.seq_len);
  CHECK(back.rope_theta == c.rope_theta);
  CHECK(back.norm_eps == c.norm_eps);  // bit for bit, though stored as a double
  // Llama 3's RoPE, tied embeddings and the document mask come back; a manifest written
  // before them has none of them, and reads as the default RoPE, untied, unmasked.
  ModelConfig llama3 = c;
  llama3.rope_type = "llama3";
  llama3.rope_factor = 32;
  llama3.rope_low_freq_factor = 2;
  llama3.rope_high_freq_factor = 8;
  llama3.rope_original_context = 4096;
  llama3.tie_embeddings = true;
  llama3.doc_mask = true;
  const ModelConfig llama3_back = model_from_json(model_to_json(llama3), "test");
  CHECK(llama3_back.rope_type == "llama3");
  CHECK(llama3_back.rope_factor == 32);
  CHECK(llama3_back.rope_low_freq_factor == 2);
  CHECK(llama3_back.rope_high_freq_factor == 8);
  CHECK(llama3_back.rope_original_context == 4096);
  CHECK(llama3_back.tie_embeddings);
  CHECK(llama3_back.doc_mask);
  json older = model_to_json(llama3);
  for (const char* key :
       {"rope_type", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
        "rope_original_context", "tie_embeddings", "doc_mask"})
    older.erase(key);
  const ModelConfig older_back = model_from_json(older, "test");
  CHECK(older_back.rope_type == "default");
  CHECK_FALSE(older_back.tie_embeddings);
  CHECK_FALSE(older_back.doc_mask);
  // A padded vocabulary keeps both counts.
  ModelConfig padded = c;
  padded.vocab_rows = c.rows();
  padded.vocab = 50;
  const ModelConfig padded_back = model_from_json(model_to_json(padded), "test");
  CHECK(padded_back.vocab == 50);
  CHECK(padded_back.rows() == c.rows());

  const json full = model_to_json(c);
  json missing = json::object();
  for (const auto& [key, value] : full.items())
    if (key != "kv_heads") missing[key] = value;
  const std::string err = error_of([&] { model_from_json(missing, "ckpt/x"); });
  CHECK(err.find("ckpt/x") == 0);
  CHECK(err.find("\"kv_heads\"") != std::string::npos);
  json fraction = model_to_json(c);
  fraction["dim"] = 16.5;
  CHECK(error_of([&] { model_from_json(fraction, "m"); }).find("\"dim\"") != std::string::npos);
  json invalid = model_to_json(c);
  invalid["heads"] = 3;
  CHECK(error_of([&] { model_from_json(invalid, "m"); }).find("not divisible") !=
        std::string::npos);
}

TEST_CASE("checkpoint: TP 2 x ZeRO DP 2 segments reassemble into the exact tensors") {
  TempDir tmp;
  const std::string dir = tmp.file("ckpt");  // created by the writer
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 0);
  const RunState st = state_at(7, cfg);
  const std::string path = save_tp2_dp2(dir, st, w, 0);

  CHECK(path == tmp.file("ckpt/step_00000007"));
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000007"});
  CHECK(read_bytes(tmp.file("ckpt/latest")) == "step_00000007\n");
  CHECK(entries(path) == std::vector<std::string>{
                             "manifest.json", "rank_00000.safetensors", "rank_00001.safetensors",
                             "rank_00002.safetensors", "rank_00003.safetensors"});
  CHECK(verify(path) == "");

  const json m = parsed_json(read_bytes(path + "/manifest.json"));
  CHECK(m.at("format").get<std::string>() == "tetra-checkpoint");
  CHECK(int_of(m.at("version")) == 3);
  CHECK(m.at("checksum").get<std::string>() == "crc32c");
  CHECK(int_of(m.at("world_size")) == 4);
  CHECK(int_of(m.at("sampler").at("global_batch")) == 8);
  REQUIRE(m.at("shards").size() == 4);
  for (int r = 0; r < 4; ++r) {
    const json& s = m.at("shards").at(size_t(r));
    const std::string file = path + "/" + s.at("file").get<std::string>();
    CHECK(s.at("file").get<std::string>() == "rank_0000" + std::to_string(r) + ".safetensors");
    CHECK(int_of(s.at("bytes")) == int64_t(fs::file_size(file)));
    const std::string bytes = read_bytes(file);
    CHECK(s.at("checksum").get<std::string>() == crc_hex(crc32c(bytes.data(), bytes.size())));
    // The segment list is metadata: a reader never has to take tensor names apart.
    const json segs = parsed_json(st::Reader(file).metadata().at("segments"));
    CHECK(segs.size() * 3 == st::Reader(file).names().size());
    CHECK(int_of(segs.at(0).at("tp_size")) == 2);
    CHECK(int_of(segs.at(0).at("tp_rank")) == r % 2);
  }

  const Reader r(path);
  CHECK(r.path() == path);
  CHECK(r.state().step == 7);
  CHECK(r.state().tokens_seen == st.tokens_seen);
  CHECK(r.state().seed == st.seed);
  CHECK(r.state().sampler_step == 7);
  CHECK(r.state().global_batch == 8);
  CHECK(r.state().model.dump() == st.model.dump());
  CHECK(r.state().layout.dump() == st.layout.dump());
  CHECK(r.coverage_problem() == "");
  check_tensors(r, cfg, w);
  CHECK(error_of([&] {
          r.tensor("model.layers.9.mlp.up_proj.weight", Reader::Kind::Param);
        }).find("no tensor") != std::string::npos);

  const std::string d = r.describe();
  for (const char* part : {"step 7", "rank_00003.safetensors", "global batch 8",
                           "model.layers.1.mlp.down_proj.weight  [16, 32]", "\"tp\":2"}) {
    CAPTURE(part);
    CHECK(d.find(part) != std::string::npos);
  }
  CHECK(d.find("INCOMPLETE") == std::string::npos);
}

TEST_CASE("checkpoint: a rank without segments still writes its shard file") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 0);
  const RunState st = state_at(3, cfg, 1, 3);
  const std::string staging = begin_write(tmp.file("c"), 3);
  std::vector<ShardRecord> shards;
  for (int rank = 0; rank < 2; ++rank)
    shards.push_back(write_shard(staging, rank, 3, st, shard_of(cfg, w, 1, 0, 2, rank).segments));
  shards.push_back(write_shard(staging, 2, 3, st, {}));
  const std::string path = finish_write(tmp.file("c"), st, shards, 0);
  CHECK(verify(path) == "");
  const st::Reader empty(path + "/rank_00002.safetensors");
  CHECK(empty.names().empty());
  CHECK(empty.metadata().at("segments") == "[]");
  check_tensors(Reader(path), cfg, w);
}

TEST_CASE("checkpoint: verify names the file that is corrupt, truncated, missing or malformed") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const std::string path = save_tp2_dp2(tmp.file("c"), state_at(1, cfg), make_weights(cfg, 0), 0);
  const std::string manifest = path + "/manifest.json";
  std::string expect_file, expect_problem;

  SUBCASE("a flipped byte") {
    const std::string file = path + "/rank_00001.safetensors";
    std::string bytes = read_bytes(file);
    bytes[bytes.size() - 5] ^= 0x10;
    write_bytes(file, bytes);
    expect_file = file;
    expect_problem = "does not match the manifest";
  }
  SUBCASE("a truncated shard") {
    const std::string file = path + "/rank_00002.safetensors";
    fs::resize_file(file, fs::file_size(file) - 12);
    expect_file = file;
    expect_problem = "truncated";
  }
  SUBCASE("a missing shard") {
    const std::string file = path + "/rank_00003.safetensors";
    fs::remove(file);
    expect_file = file;
    expect_problem = "No such file";
    CHECK(error_of([&] { Reader r(path); }).find(file) != std::string::npos);
  }
  SUBCASE("a manifest that is not JSON") {
    write_bytes(manifest, "{\"format\": \"tetra-checkpoint\", ");
    expect_file = manifest;
    expect_problem = "invalid JSON";
  }
  SUBCASE("a manifest without its shard list") {
    json m = parsed_json(read_bytes(manifest));
    json without = json::object();
    for (const auto& [key, value] : m.items())
      if (key != "shards") without[key] = value;
    write_manifest(manifest, without);
    expect_file = manifest;
    expect_problem = "\"shards\"";
  }
  SUBCASE("no manifest") {
    fs::remove(manifest);
    expect_file = manifest;
    expect_problem = "not found";
  }
  SUBCASE("a shard that matches its checksum but is not safetensors") {
    const std::string file = path + "/rank_00000.safetensors";
    const std::string junk = "this is not a safetensors file";
    write_bytes(file, junk);
    json m = parsed_json(read_bytes(manifest));
    json shards = json::array();
    for (size_t i = 0; i < m.at("shards").size(); ++i) {
      json s = m.at("shards").at(i);
      if (i == 0) {
        s["bytes"] = int64_t(junk.size());
        s["checksum"] = crc_hex(crc32c(junk.data(), junk.size()));
      }
      shards.push_back(s);
    }
    m["shards"] = shards;
    write_manifest(manifest, m);
    expect_file = file;
    expect_problem = "header length";
  }

  const std::string problem = verify(path);
  CAPTURE(problem);
  CHECK(problem.find(expect_file) != std::string::npos);
  CHECK(problem.find(expect_problem) != std::string::npos);
  CHECK(problem.find('\n') == std::string::npos);
}

TEST_CASE("checkpoint: a segment missing from a shard file leaves its tensor incomplete") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  const std::string path =
      save_tp2_dp2(tmp.file("c"), state_at(1, cfg), make_weights(cfg, 0), 0, q);
  const std::string problem = verify(path);
  CHECK(problem.find("'" + q + "' is incomplete") != std::string::npos);
  CHECK(problem.find("TP rank 1 of 2") != std::string::npos);
  const Reader r(path);
  CHECK(error_of([&] { r.tensor(q, Reader::Kind::AdamV); }).find("incomplete") !=
        std::string::npos);
  CHECK(r.tensor("model.layers.1.self_attn.k_proj.weight", Reader::Kind::Param).size() == 8 * 16);
  CHECK(r.describe().find("INCOMPLETE") != std::string::npos);
}

TEST_CASE("checkpoint: find_latest takes the newest that verifies and ignores .tmp") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  std::vector<std::string> warnings;
  CHECK(find_latest(dir, &warnings) == "");  // no directory yet: a fresh start
  CHECK(warnings.empty());
  CHECK(verify(dir + "/step_00000001") ==
        "checkpoint directory '" + dir + "/step_00000001': not found");

  for (int step = 1; step <= 3; ++step) save_one(dir, step, step, 0);
  const std::string shard3 = dir + "/step_00000003/rank_00000.safetensors";
  std::string bytes = read_bytes(shard3);
  bytes[bytes.size() / 2] ^= 1;
  write_bytes(shard3, bytes);
  // A crashed writer's leftovers and other names are not checkpoints.
  fs::create_directories(dir + "/step_00000009.tmp");
  write_bytes(dir + "/step_00000009.tmp/rank_00000.safetensors", "partial");
  fs::create_directories(dir + "/step_0000001x");

  CHECK(find_latest(dir, &warnings) == dir + "/step_00000002");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("skipping " + dir + "/step_00000003: ") == 0);
  CHECK(warnings[0].find("rank_00000.safetensors") != std::string::npos);

  fs::remove(dir + "/step_00000002/manifest.json");
  fs::remove(dir + "/step_00000001/rank_00000.safetensors");
  warnings.clear();
  CHECK(find_latest(dir, &warnings) == "");
  CHECK(warnings.size() == 3);
}

TEST_CASE("checkpoint: a `latest` that names no checkpoint here is reported, not obeyed") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  for (int step = 1; step <= 2; ++step) save_one(dir, step, step, 0);
  for (const std::string bad : {"step_00000007", "garbage"}) {
    write_bytes(dir + "/latest", bad + "\n");
    std::vector<std::string> warnings;
    CHECK(find_latest(dir, &warnings) == dir + "/step_00000002");
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("names '" + bad + "', which is not a checkpoint") != std::string::npos);
  }
}

TEST_CASE("checkpoint: keep deletes all but the newest, never the one just written") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  for (int step = 1; step <= 4; ++step) save_one(dir, step, 0, 2);
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000003", "step_00000004"});
  CHECK(read_bytes(dir + "/latest") == "step_00000004\n");

  // A new line from step 0 (a run that started over): the other line is not pruned.
  save_one(dir, 2, 0, 2, CheckpointRef{});
  CHECK(entries(dir) ==
        std::vector<std::string>{"latest", "step_00000002", "step_00000003", "step_00000004"});
  CHECK(read_bytes(dir + "/latest") == "step_00000002\n");

  for (int step = 5; step <= 6; ++step) save_one(dir, step, 0, 0);  // keep 0: keep all
  CHECK(entries(dir).size() == 6);
  save_one(dir, 7, 0, 1);  // its line is 2, 5, 6, 7
  CHECK(entries(dir) ==
        std::vector<std::string>{"latest", "step_00000003", "step_00000004", "step_00000007"});
}

TEST_CASE("checkpoint: saving an existing step again replaces it only when identical") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  const ModelConfig cfg = checkpoint_model();
  save_tp2_dp2(dir, state_at(5, cfg), make_weights(cfg, 1), 0);
  save_tp2_dp2(dir, state_at(5, cfg), make_weights(cfg, 1), 0);  // the same one, redone
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000005"});
  RunState again = state_at(5, cfg);
  again.seed += 1;
  const Weights w2 = make_weights(cfg, 2);
  const std::string path = save_tp2_dp2(dir, again, w2, 0);
  // Another checkpoint of the step (another run's) is moved aside whole, not deleted.
  CHECK(entries(dir) ==
        std::vector<std::string>{"latest", "step_00000005", "step_00000005.abandoned"});
  CHECK(verify(dir + "/step_00000005.abandoned") == "");
  check_tensors(Reader(dir + "/step_00000005.abandoned"), cfg, make_weights(cfg, 1));
  CHECK(verify(path) == "");
  const Reader r(path);
  CHECK(r.state().seed == again.seed);
  check_tensors(r, cfg, w2);
  // So is one that does not verify: it may be salvageable.
  write_bytes(path + "/manifest.json", "{");
  save_tp2_dp2(dir, state_at(5, cfg), make_weights(cfg, 3), 0);
  CHECK(read_bytes(dir + "/step_00000005.abandoned.2/manifest.json") == "{");
  CHECK(verify(dir + "/step_00000005") == "");
  fs::remove_all(dir + "/step_00000005.abandoned");
  fs::remove_all(dir + "/step_00000005.abandoned.2");

  // A stale .tmp of the step about to be written goes first, with whatever it held.
  fs::create_directories(dir + "/step_00000006.tmp");
  write_bytes(dir + "/step_00000006.tmp/rank_00007.safetensors", "junk");
  save_one(dir, 6, 0, 0);
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000005", "step_00000006"});
  CHECK(entries(dir + "/step_00000006") ==
        std::vector<std::string>{"manifest.json", "rank_00000.safetensors"});
}

TEST_CASE("checkpoint: a failed save says why and leaves earlier checkpoints alone") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const RunState st = state_at(1, cfg);

  std::string err = error_of([&] { save(MPI_COMM_SELF, "/proc/tetra_ckpt", st, {}, 0); });
  CHECK(err.find("cannot write checkpoint directory '/proc/tetra_ckpt'") == 0);

  write_bytes(tmp.file("file"), "x");  // a parent that is a file blocks even root
  err = error_of([&] { save(MPI_COMM_SELF, tmp.file("file/ckpt"), st, {}, 0); });
  CHECK(err.find("cannot write checkpoint directory '" + tmp.file("file/ckpt") + "'") == 0);
  CHECK(err.find("Not a directory") != std::string::npos);

  const std::string dir = tmp.file("c");
  save_one(dir, 1, 0, 1);
  const float x = 1.0f;
  const std::vector<Segment> bad = {{"model.layers.7.mlp.up_proj.weight", 0, 1, 0, 1, &x, &x, &x}};
  err = error_of([&] { save(MPI_COMM_SELF, dir, state_at(2, cfg), bad, 1); });
  CHECK(err.find("'model.layers.7.mlp.up_proj.weight' of rank 0") != std::string::npos);
  const std::vector<Segment> outside = {{"model.norm.weight", 0, 1, 10, 17, &x, &x, &x}};
  err = error_of([&] { save(MPI_COMM_SELF, dir, state_at(2, cfg), outside, 1); });
  CHECK(err.find("outside its 16 TP-local elements") != std::string::npos);
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000001"});
  CHECK(read_bytes(dir + "/latest") == "step_00000001\n");
  CHECK(verify(dir + "/step_00000001") == "");
}
