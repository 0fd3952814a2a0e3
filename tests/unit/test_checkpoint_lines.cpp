// Checkpoints that must not be trusted as they stand, in one process: a manifest that
// disagrees with itself, its shards or its directory's name; copies of a replicated tensor
// that differ; and lines: resuming and pruning follow a checkpoint's parents, never another
// line's checkpoints.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/checkpoint_fixture.hpp"
#include "../support/checkpoint_helpers.hpp"
#include "../support/test_util.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checksum.hpp"
#include "checkpoint/manifest.hpp"
#include "model/config.hpp"

namespace fs = std::filesystem;
using namespace tetra;
using namespace tetra::ckpt;
using namespace tetra::test;

TEST_CASE("checkpoint: verify catches a manifest that disagrees with itself or its shards") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 0);
  const std::string dir = tmp.file("c");
  save_tp2_dp2(dir, state_at(2, cfg), w, 0);
  RunState st3 = state_at(3, cfg);
  st3.parent = reference_to(dir, dir + "/step_00000002");
  const std::string path = save_tp2_dp2(dir, st3, w, 0);
  REQUIRE(verify(path) == "");
  const std::string manifest = path + "/manifest.json";
  const json m = parsed_json(read_bytes(manifest));
  std::string expect;
  bool names_2 = true;  // whether the manifest still names step 2 as its parent

  SUBCASE("an edited field without a new checksum") {
    json edited = m;
    edited["step"] = 4;
    write_bytes(manifest, edited.dump());
    expect = "manifest.json': its checksum " + m.at("manifest_checksum").get<std::string>() +
             " does not match its contents";
  }
  SUBCASE("no checksum") {
    json edited = m;
    edited.erase("manifest_checksum");
    write_bytes(manifest, edited.dump());
    expect = "missing \"manifest_checksum\"";
  }
  // Each edit below comes with a matching checksum: the cross-checks must catch it.
  SUBCASE("the step against the directory's name") {
    json edited = m;
    edited["step"] = 4;
    edited["sampler"]["step"] = 4;
    edited["tokens_seen"] = 4 * 8 * cfg.seq_len;
    write_manifest(manifest, edited);
    expect = "step 4 is not the step of its directory's name (3)";
  }
  SUBCASE("the sampler's step") {
    json edited = m;
    edited["sampler"]["step"] = 2;
    write_manifest(manifest, edited);
    expect = "the sampler is at step 2, the manifest at 3";
  }
  SUBCASE("the tokens seen") {
    json edited = m;
    edited["tokens_seen"] = 1;
    write_manifest(manifest, edited);
    expect = "\"tokens_seen\" is 1, but 3 steps of 8 sequences of 8 tokens are 192";
  }
  SUBCASE("the layout against the world size") {
    json edited = m;
    edited["layout"]["dp"] = 4;
    write_manifest(manifest, edited);
    expect = "the layout has 8 ranks (tp*cp*pp*dp), \"world_size\" 4";
  }
  SUBCASE("the layout's TP against the segments") {
    json edited = m;
    edited["layout"]["tp"] = 1;
    edited["layout"]["dp"] = 4;
    write_manifest(manifest, edited);
    expect = "was cut for TP 2, but the manifest's layout has TP 1";
  }
  SUBCASE("a parent that is not older") {
    json edited = m;
    edited["parent"]["name"] = "step_00000005";
    write_manifest(manifest, edited);
    expect = "the parent 'step_00000005' is not older than step 3";
  }
  SUBCASE("a shard of another step, with the manifest's size and checksum to match") {
    const std::string shard = path + "/rank_00001.safetensors";
    fs::copy_file(dir + "/step_00000002/rank_00001.safetensors", shard,
                  fs::copy_options::overwrite_existing);
    json edited = m;
    const std::string bytes = read_bytes(shard);
    edited["shards"][1]["bytes"] = int64_t(bytes.size());
    edited["shards"][1]["checksum"] = crc_hex(crc32c(bytes.data(), bytes.size()));
    write_manifest(manifest, edited);
    expect = "rank_00001.safetensors': it belongs to step 2, the manifest to step 3";
  }
  SUBCASE("a manifest whose parent the shards do not name") {
    json edited = m;
    edited["parent"] = nullptr;
    write_manifest(manifest, edited);
    expect = "rank_00000.safetensors': its parent is 'step_00000002', the manifest's ''";
    names_2 = false;
  }
  const std::string problem = verify(path);
  CAPTURE(problem);
  CHECK(problem.find(expect) != std::string::npos);
  if (names_2) CHECK(find_latest(dir, nullptr) == dir + "/step_00000002");  // skipped
}

TEST_CASE("checkpoint: copies of a TP-replicated tensor must agree") {
  TempDir tmp;
  const ModelConfig cfg = checkpoint_model();
  const Weights w = make_weights(cfg, 0);
  Weights other = w;
  other.param.at("model.norm.weight")[5] += 1.0f;
  // TP rank 1 stores its copy of the norms with one element changed.
  const RunState st = state_at(1, cfg);
  const std::string staging = begin_write(tmp.file("c"), 1);
  std::vector<ShardRecord> shards;
  for (int rank = 0; rank < 4; ++rank)
    shards.push_back(
        write_shard(staging, rank, 4, st,
                    shard_of(cfg, rank % 2 ? other : w, 2, rank % 2, 2, rank / 2).segments));
  const std::string path = finish_write(tmp.file("c"), st, shards, 0);
  const std::string problem = verify(path);
  CHECK(
      problem.find("tensor 'model.norm.weight' (weights) has copies that differ at flat index 5") !=
      std::string::npos);
  CHECK(problem.find("TP rank 1 in rank_0000") != std::string::npos);
  const Reader r(path);
  CHECK(error_of([&] { r.tensor("model.norm.weight", Reader::Kind::Param); }) == problem);
  CHECK(r.tensor("model.norm.weight", Reader::Kind::AdamM) == w.adam_m.at("model.norm.weight"));
}

TEST_CASE("checkpoint: resuming follows the line of `latest`, never another line") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  auto corrupt = [&](int step) {
    const std::string shard = dir + "/" + step_dir_name(step) + "/rank_00000.safetensors";
    std::string bytes = read_bytes(shard);
    bytes[bytes.size() / 2] ^= 1;
    write_bytes(shard, bytes);
  };
  // Line A: 2, 4, 6. Then a rollback to 2 starts line B: 3, 5.
  for (int step : {2, 4, 6}) save_one(dir, step, 0, 0);
  save_one(dir, 3, 1, 0, reference_to(dir, dir + "/step_00000002"));
  save_one(dir, 5, 1, 0);
  CHECK(read_bytes(dir + "/latest") == "step_00000005\n");
  CHECK(find_latest(dir, nullptr) == dir + "/step_00000005");
  const std::string parent = "parent: step_00000003 (manifest " +
                             crc_hex(reference_to(dir, dir + "/step_00000003").manifest_crc) + ")";
  CHECK(Reader(dir + "/step_00000005").describe().find(parent) != std::string::npos);

  std::vector<std::string> warnings;
  corrupt(5);  // the newest of B: back to B's 3, not A's 6 (newer) or 4 (closer)
  CHECK(find_latest(dir, &warnings) == dir + "/step_00000003");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("skipping " + dir + "/step_00000005: ") == 0);

  write_bytes(dir + "/step_00000003/manifest.json", "{");  // its shard still names 2
  warnings.clear();
  CHECK(find_latest(dir, &warnings) == dir + "/step_00000002");
  CHECK(warnings.size() == 2);

  corrupt(2);  // nothing on B verifies: nothing to resume from, whatever A holds
  warnings.clear();
  CHECK(find_latest(dir, &warnings) == "");
  CHECK(warnings.size() == 3);

  // A line that started over has no checkpoint yet.
  set_latest(dir, kNoCheckpoint);
  warnings.clear();
  CHECK(find_latest(dir, &warnings) == "");
  CHECK(warnings.empty());
}

TEST_CASE("checkpoint: a parent whose name another line took ends the line there") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  for (int step : {2, 4, 6}) save_one(dir, step, 0, 0);
  save_one(dir, 4, 1, 0, reference_to(dir, dir + "/step_00000002"));  // B takes A's 4's name
  CHECK(verify(dir + "/step_00000004.abandoned") == "");              // A's 4, moved aside
  set_latest(dir, "step_00000006");  // an explicit resume from A's 6
  const std::string shard = dir + "/step_00000006/rank_00000.safetensors";
  std::string bytes = read_bytes(shard);
  bytes[bytes.size() / 2] ^= 1;
  write_bytes(shard, bytes);
  std::vector<std::string> warnings;
  CHECK(find_latest(dir, &warnings) == "");
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[1].find("skipping " + dir + "/step_00000004: another line's checkpoint") == 0);
}

TEST_CASE("checkpoint: pruning keeps to the line of the new checkpoint") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  for (int step : {2, 4, 6}) save_one(dir, step, 0, 0);
  // A rollback to 2 writes 3 and 5 with keep 2: its own 2 goes, A's 4 and 6 stay.
  save_one(dir, 3, 1, 2, reference_to(dir, dir + "/step_00000002"));
  save_one(dir, 5, 1, 2);
  CHECK(entries(dir) == std::vector<std::string>{"latest", "step_00000003", "step_00000004",
                                                 "step_00000005", "step_00000006"});
}

TEST_CASE("checkpoint: a line may continue from a copy under another name, which is never pruned") {
  TempDir tmp;
  const std::string dir = tmp.file("c");
  save_one(dir, 2, 0, 0);
  // Copies of step 2, one elsewhere and one beside the checkpoints, resumed from in turn.
  for (const std::string& copy : {tmp.file("best"), dir + "/best"}) {
    fs::copy(dir + "/step_00000002", copy);
    CAPTURE(copy);
    // `latest` names the copy until the first checkpoint of the run that resumed from it.
    set_latest(dir, reference_to(dir, copy).name);
    std::vector<std::string> warnings;
    CHECK(find_latest(dir, &warnings) == copy);
    CHECK(warnings.empty());
    const std::string p4 = save_one(dir, 4, 1, 1, reference_to(dir, copy));
    CHECK(verify(p4) == "");
    CHECK(find_latest(dir, nullptr) == p4);
    const std::string p6 = save_one(dir, 6, 1, 1);  // keep 1: 4 goes, the copy stays
    CHECK(verify(p6) == "");
    CHECK(fs::exists(copy + "/manifest.json"));
    CHECK_FALSE(fs::exists(p4));
  }
}
