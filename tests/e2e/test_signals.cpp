// Signals everywhere (issue 38, class 9): every command that a person can stop ends with one
// line and exit status 130, its jobs stopped and its temporaries removed. tetra lab waiting
// for an answer (SIGINT, SIGTERM), tetra sweep and tetra lab running a job (SIGHUP: a closed
// terminal), one-rank tetra train (SIGINT: a checkpoint as for SIGTERM, then 130), tetra
// launch over mpirun (Ctrl-C: 130, not mpirun's 1), and the commands with nothing to save
// (util/stop_signal.hpp): tetra generate generating, tetra tokenize reading its input, tetra
// plot and tetra plan writing their picture (no temporary and no picture left), tetra ckpt
// verifying. Runs the real binary.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/corpus.hpp"
#include "../support/spawn.hpp"
#include "../support/test_util.hpp"
#include "../support/tiny_model.hpp"
#include "data/token_cache.hpp"
#include "data/tokenizer.hpp"

using namespace tetra::test;
namespace fs = std::filesystem;

namespace {

// Whether `dir` holds an entry whose name starts with `prefix`.
bool holds(const std::string& dir, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

// sh: start `command` in the background (its pid in $t), wait until the shell test `ready`
// holds, send `signal` (printing "missed" where the command had already ended), and print
// "exit N" with its status. A command that outlives the signal by 20 s is killed, so that one
// that ignores it fails the test instead of hanging it.
std::string signalled_when(const std::string& command, const std::string& ready,
                           const std::string& signal) {
  return command + " & t=$!; for i in $(seq 600); do " + ready +
         " && break; sleep 0.05; done; kill -" + signal +
         " $t 2>/dev/null || echo missed; for i in $(seq 400); do kill -0 $t 2>/dev/null ||"
         " break; sleep 0.05; done; kill -9 $t 2>/dev/null; wait $t; echo exit $?";
}

// The same once `file` holds `text`.
std::string signalled(const std::string& command, const std::string& file, const std::string& text,
                      const std::string& signal) {
  return signalled_when(command, "grep -q \"" + text + "\" " + file + " 2>/dev/null", signal);
}

// A shell test: process $t catches SIGINT, SIGTERM and SIGHUP (bits 2, 15 and 1 of its
// /proc status's SigCgt): its handlers are installed.
const std::string kCatches =
    "[ $(( 0x$(grep SigCgt /proc/$t/status | cut -f2) & 16387 )) -eq 16387 ]";

// A shell test: `dir` holds a temporary (".NAME.RANDOM.tmp", util/output_file.hpp).
std::string writing_temporary(const std::string& dir) {
  return "ls -a " + dir + " | grep -q \"^[.].*[.]tmp$\"";
}

// What a command that tetra ends on a signal says: one line, exit status 130.
void check_stopped(const Spawned& r, const std::string& name) {
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.out.find("exit 130") != std::string::npos);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("tetra: error: interrupted by " + name) != std::string::npos);
}

}  // namespace

TEST_CASE("signals: tetra lab waiting for an answer stops with one line and leaves no temporary") {
  for (const char* signal : {"INT", "TERM", "HUP"}) {
    CAPTURE(signal);
    TempDir d;
    const std::string out = d / "out", tmp = d / "tmp";
    fs::create_directory(tmp);
    // stdin a FIFO that stays open and says nothing: the lab waits at "your answer: ".
    const std::string fifo = d / "stdin";
    const Spawned r =
        spawn("mkfifo " + fifo + "; sleep 60 > " + fifo + " & s=$!; " +
                  signalled("TMPDIR=" + tmp + " " + tetra_bin() + " lab dp < " + fifo + " > " + out,
                            out, "your answer", signal) +
                  "; kill $s",
              60);
    CAPTURE(r.out);
    CAPTURE(r.err);
    CHECK(r.out.find("exit 130") != std::string::npos);
    CHECK(count(r.err, "tetra: error:") == 1);
    CHECK(r.err.find("tetra: error: interrupted by ") != std::string::npos);
    CHECK(r.err.find(" while waiting for an answer") != std::string::npos);
    CHECK_FALSE(holds(tmp, "tetra_lab_"));
  }
}

TEST_CASE(
    "signals: SIGTERM and SIGHUP stop tetra sweep's and tetra lab's running job, exit status 130") {
  TempDir dir;
  const std::string launcher = dir / "hang.sh", pid = dir / "pid", tmp = dir / "tmp";
  fs::create_directory(tmp);
  std::ofstream(launcher) << "#!/bin/sh\necho $$ > " << pid << "\nexec sleep 60\n";
  const std::string commands[] = {
      "sweep --ranks 2 " + tiny_model_flags() + " --out " + dir / "sweep",
      "lab dp --answer 1",
  };
  const std::pair<std::string, std::string> signals[] = {{"TERM", "Terminated"}, {"HUP", "Hangup"}};
  for (const auto& [signal, name] : signals)
    for (const std::string& command : commands) {
      CAPTURE(signal);
      CAPTURE(command);
      fs::remove(pid);
      const std::string script = "TMPDIR=" + tmp + " " + tetra_bin() + " " + command +
                                 " --launcher \"sh " + launcher + " {n}\" & t=$!; while [ ! -s " +
                                 pid + " ]; do sleep 0.1; done; kill -" + signal + " $t; wait $t;" +
                                 " echo exit $?; sleep 0.5; kill -0 $(cat " + pid +
                                 ") 2>/dev/null && echo alive";
      const Spawned r = spawn(script, 60);
      CAPTURE(r.out);
      CAPTURE(r.err);
      CHECK(r.out.find("exit 130") != std::string::npos);
      CHECK(r.out.find("alive") == std::string::npos);  // the job was stopped with us
      CHECK(count(r.err, "tetra: error:") == 1);
      CHECK(r.err.find("interrupted by " + name + " (the running job was stopped)") !=
            std::string::npos);
      CHECK_FALSE(holds(tmp, "tetra_lab_"));
    }
}

TEST_CASE("signals: one-rank tetra train checkpoints on SIGINT as on SIGTERM, then exits 130") {
  TempDir d;
  const std::string ck = d / "ck", out = d / "out";
  // 50 ms a step (an injected straggler) so that the signal lands mid-run.
  const std::string train = tetra_bin() + " train" + tiny_model_flags({.steps = 400}) +
                            " --ckpt-dir " + ck + " --inject-failure 0@1:slow=50 > " + out;
  const Spawned r = spawn(signalled(train, out, "^step *3/", "INT"), 120);
  const std::string text = slurp(out);
  CAPTURE(text);
  CAPTURE(r.err);
  CHECK(r.out.find("exit 130") != std::string::npos);
  CHECK(count(r.err, "tetra: error:") == 0);
  CHECK(count(text, "interrupted (SIGINT): a signal reached 1 of 1 ranks; stopped after step ") ==
        1);
  CHECK(text.find(", checkpointed; exit status 130: resume with --resume auto") !=
        std::string::npos);
  const Spawned v = spawn(tetra_bin() + " ckpt verify " + ck);
  CAPTURE(v.err);
  CHECK(v.status == 0);
  CHECK(slurp(ck + "/latest").rfind("step_", 0) == 0);
  CHECK_FALSE(fs::exists(ck + "/lock"));
}

TEST_CASE("signals: tetra launch over mpirun exits 130 after Ctrl-C, with one line") {
  TempDir d;
  const std::string out = d / "out";
  const std::string launch = tetra_bin() + " launch --restarts 3 -- " + mpirun(2) + tetra_bin() +
                             " train" + tiny_model_flags({.steps = 400}) + " --tp 2 --ckpt-dir " +
                             (d / "ck") + " --inject-failure 0@1:slow=50 > " + out;
  const Spawned r = spawn(signalled(launch, out, "^step *3/", "INT"), 120);
  CAPTURE(slurp(out));
  CAPTURE(r.err);
  CHECK(r.out.find("exit 130") != std::string::npos);
  CHECK(count(r.err, "tetra: error:") == 1);
  CHECK(r.err.find("tetra: error: interrupted by Interrupt (the running command was stopped)") !=
        std::string::npos);
}

TEST_CASE("signals: tetra generate, generating, stops with one line and exit status 130") {
  TempDir d;
  const std::string m = d / "m";
  REQUIRE(
      spawn(tetra_bin() + " train" + tiny_model_flags({.steps = 1}) + " --export " + m).status ==
      0);
  // A million tokens: minutes of work.
  const std::string generate =
      tetra_bin() + " generate --init-from " + m + " --prompt the --tokens 1000000";
  const Spawned r = spawn(signalled_when(generate, kCatches + " && sleep 0.3", "INT"), 60);
  check_stopped(r, "Interrupt");
  CHECK(r.out == "exit 130\n");  // no text: none half-written
}

TEST_CASE("signals: tetra tokenize, reading its input, stops with one line and exit status 130") {
  if (!tetra::data::have_sentencepiece()) {
    MESSAGE("skipped: this build has no SentencePiece");
    return;
  }
  TempDir d;
  const tetra::data::TokenizerModel model =
      tetra::data::tokenizer_model("bpe:300", corpus_dir(d) + "/corpus.txt");
  tetra::data::save_tokenizer_model(model);
  // stdin a FIFO that stays open and says nothing: tokenize waits for the end of its text.
  const std::string fifo = d / "stdin";
  const std::string tokenize = tetra_bin() + " tokenize --tokenizer " + model.path + " < " + fifo;
  const Spawned r = spawn("mkfifo " + fifo + "; sleep 60 > " + fifo + " & s=$!; " +
                              signalled_when(tokenize, kCatches, "TERM") + "; kill $s",
                          60);
  check_stopped(r, "Terminated");
  CHECK(r.out == "exit 130\n");
}

TEST_CASE(
    "signals: tetra plot and tetra plan, writing a picture, leave no temporary and no part of a "
    "picture") {
  // 200,000 boxes (the most either draws): a 35 MB picture, written through a temporary.
  const std::pair<std::string, std::string> commands[] = {
      {"plot --schedule 1f1b --pp 10 --micro-batches 10000 --out", "INT"},
      {"plan --pp 10 --layers 10 --global-batch 10000 --micro-batch 1 --draw", "TERM"},
  };
  for (const auto& [command, signal] : commands) {
    CAPTURE(command);
    TempDir d;
    const std::string svg = d / "s.svg";
    // The picture may be written whole and the command gone between two of the shell's polls
    // (50 ms apart), before the signal is sent: such a run tests nothing and is run again.
    Spawned r;
    for (int attempt = 0; attempt < 5; ++attempt) {
      fs::remove(svg);
      r = spawn(signalled_when(tetra_bin() + " " + command + " " + svg + " > /dev/null",
                               writing_temporary(d.path.string()), signal),
                60);
      if (r.out.find("missed") == std::string::npos) break;
    }
    check_stopped(r, signal == "INT" ? "Interrupt" : "Terminated");
    // No temporary, and no picture unless a whole one: a signal that lands after the rename,
    // on the way out, ends a command whose output is already complete.
    std::string entries;
    for (const auto& e : fs::directory_iterator(d.path))
      entries += e.path().filename().string() + " ";
    CAPTURE(entries);
    CHECK((entries.empty() || entries == "s.svg "));
    if (entries == "s.svg ") {
      const std::string picture = slurp(svg);
      CHECK(picture.size() > 1000000);
      CHECK(picture.ends_with("</svg>\n"));
    }
  }
}

TEST_CASE("signals: tetra ckpt, verifying, stops with one line and exit status 130") {
  TempDir d;
  const std::string ck = d / "ck";
  // A checkpoint large enough to take a while to verify (its shards are read whole).
  REQUIRE(spawn(tetra_bin() + " train" +
                    tiny_model_flags({.layers = 8,
                                      .dim = 512,
                                      .heads = 8,
                                      .kv_heads = 4,
                                      .ffn_dim = 1536,
                                      .steps = 1}) +
                    " --ckpt-dir " + ck,
                120)
              .status == 0);
  const Spawned r = spawn(signalled_when(tetra_bin() + " ckpt verify " + ck, kCatches, "HUP"), 60);
  check_stopped(r, "Hangup");
  CHECK(r.out == "exit 130\n");
}
