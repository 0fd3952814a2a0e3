#!/usr/bin/env python3
"""--tensorboard read back by TensorBoard's own reader (its event accumulator, offline), value
by value against --metrics, for a plain run and for one killed and resumed under tetra launch;
and the step line's "step i/N" and ETA, by their format.

    python3 tests/tensorboard_readback.py build/tetra

Every number of a metrics record but "step" is a scalar, named by its key ("comm_bytes/pp",
"compute_ms/1" for nested ones), stored as a 32-bit float: each must equal the JSONL's value
rounded to float32, at the same steps, each step once. Exit status 77 (ctest: skipped) where
the tensorboard package cannot be imported.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

TETRA = sys.argv[1]
STEPS = 10
# Two pipeline stages (a bubble, two ranks' compute and wait), a validation loss every 3 steps.
FLAGS = ["--pp", "2", "--layers", "2", "--dim", "32", "--heads", "2", "--kv-heads", "1",
         "--ffn-dim", "64", "--seq-len", "16", "--global-batch", "4", "--steps", str(STEPS),
         "--val-split", "0.2", "--eval-every", "3", "--peak-tflops", "1"]
MPIRUN = ["mpirun", "--oversubscribe", "-np", "2"]
# The values of the metrics line, each of which must be a scalar (and the rest of the record).
NAMED = {"loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu", "hfu", "step_ms",
         "comm_share", "bubble", "peak_memory_bytes"}
# The tags that do not depend on timing, equal in any two runs of the same model and batch.
DETERMINED = ("loss", "val_loss", "lr", "grad_norm")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")
    return ok


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def flatten(value, name, out):
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out[name] = value
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{name}/{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, f"{name}/{i}", out)


def kept_records(path):
    """The metrics records by step; an attempt's record replaces an earlier one of its step."""
    records = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                records[r["step"]] = r
    return records


def read_scalars(logdir):
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    # A tag whose every value a restart dropped (a straggler named only in a lost step) stays
    # listed with no values; TensorBoard shows nothing for it, and neither does the JSONL.
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    return {tag: values for tag, values in scalars.items() if values}, acc


def compare(logdir, records, label):
    """Every scalar against the kept JSONL records; returns how many values were compared."""
    scalars, acc = read_scalars(logdir)
    expected = {}
    for step, r in records.items():
        flat = {}
        for k, v in r.items():
            if k != "step":
                flatten(v, k, flat)
        for tag, v in flat.items():
            expected.setdefault(tag, {})[step] = v
    check(set(scalars) == set(expected),
          f"{label}: tags {sorted(set(scalars) ^ set(expected))} in one of TensorBoard and JSONL")
    check(NAMED <= set(scalars), f"{label}: no scalar for {sorted(NAMED - set(scalars))}")
    compared, max_diff = 0, 0.0
    for tag in sorted(set(scalars) & set(expected)):
        steps = [s for s, _ in scalars[tag]]
        check(steps == sorted(expected[tag]),
              f"{label}: {tag} at steps {steps}, the JSONL has {sorted(expected[tag])}")
        for s, v in scalars[tag]:
            want = expected[tag].get(s)
            compared += 1
            if check(want is not None and v == f32(want),
                     f"{label}: {tag} at step {s} is {v!r}, the JSONL's {want!r}"):
                max_diff = max(max_diff, abs(v - want) / max(abs(want), 1e-30))
    config = acc.Tensors("config")
    check(len(config) >= 1 and b"TP 1 x CP 1 x PP 2 x DP 1" in config[-1].tensor_proto.string_val[0],
          f"{label}: the config text summary names the layout")
    check(acc.SummaryMetadata("config").plugin_data.plugin_name == "text",
          f"{label}: the config is a text summary")
    return compared, len(scalars), max_diff, scalars


def session_starts(logdir):
    """Per event file, in the order TensorBoard reads them, the steps of its SessionLog STARTs."""
    out = []
    for name in sorted(os.listdir(logdir)):
        events = event_file_loader.EventFileLoader(os.path.join(logdir, name)).Load()
        out.append([e.step for e in events if e.HasField("session_log") and e.session_log.status == 1])
    return out


def train(tmp, name, *extra, launch=False):
    metrics, logdir = os.path.join(tmp, name + ".jsonl"), os.path.join(tmp, name)
    cmd = MPIRUN + [TETRA, "train", *FLAGS, "--data", corpus, "--metrics", metrics,
                    "--tensorboard", logdir, *extra]
    if launch:
        cmd = [TETRA, "launch", "--restarts", "2", "--"] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500)
    check(run.returncode == 0, f"{name}: exit status {run.returncode}\n{run.stdout}\n{run.stderr}")
    return metrics, logdir, run.stdout


with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 100)

    # A plain run: every value, and the step lines' format.
    metrics, logdir, out = train(tmp, "plain")
    plain = kept_records(metrics)
    check(sorted(plain) == list(range(STEPS)), f"plain: JSONL steps {sorted(plain)}")
    compared, tags, max_diff, plain_scalars = compare(logdir, plain, "plain")
    check(session_starts(logdir) == [[0]], f"plain: SessionLog STARTs {session_starts(logdir)}")
    lines = [l for l in out.splitlines() if l.startswith("step ")]
    check(len(lines) == STEPS, f"plain: {len(lines)} step lines")
    eta = re.compile(r" \| eta (\d+s|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh)( |$)")
    for i, line in enumerate(lines):
        check(re.match(rf"step +{i}/{STEPS} \| loss ", line), f"plain: step line {i}: {line}")
        # From the 4th step on (3 intervals between step ends), not after the last.
        check(bool(eta.search(line)) == (3 <= i < STEPS - 1), f"plain: eta in line {i}: {line}")
    summary = [l for l in out.splitlines() if l.startswith("summary: ")]
    check(len(summary) == 1 and re.search(r" in [0-9.]+ s \(total \d", summary[0]),
          f"plain: summary {summary}")
    print(f"plain run: {compared} values of {tags} tags equal to the JSONL rounded to float32 "
          f"(largest relative difference to the JSONL's double {max_diff:.1e}); e.g.")
    print("  " + lines[STEPS - 2])

    # Killed by rank 1 in step 7 under tetra launch: the restart resumes at step 6 and
    # writes a new file that starts with a SessionLog START at 6, so the first attempt's step
    # 6 is dropped: each step once, equal to the uninterrupted run.
    ck = os.path.join(tmp, "ck")
    metrics, logdir, out = train(tmp, "launched", "--ckpt-dir", ck, "--ckpt-every", "3",
                                 "--inject-failure", "1@7", launch=True)
    check("resumed from " + os.path.join(ck, "step_00000006") in out, "launched: resumed at 6")
    with open(metrics) as f:
        executed = sum(1 for line in f if line.strip())
    check(executed == STEPS + 1, f"launched: {executed} records in the JSONL (step 6 twice)")
    starts = session_starts(logdir)
    check(starts == [[0], [6]], f"launched: SessionLog STARTs per file {starts}")
    kept = kept_records(metrics)
    compared, tags, max_diff, scalars = compare(logdir, kept, "launched")
    same = 0
    for key in DETERMINED:
        check([kept[s].get(key) for s in range(STEPS)] == [plain[s].get(key) for s in range(STEPS)],
              f"launched: {key} in the JSONL differs from the uninterrupted run")
        # TensorBoard's curve after the restart, as read: the uninterrupted run's, point by point.
        check(scalars.get(key) == plain_scalars.get(key),
              f"launched: TensorBoard's {key} {scalars.get(key)}, uninterrupted "
              f"{plain_scalars.get(key)}")
        same += len(plain_scalars.get(key, []))
    print(f"launched run: 2 event files, SessionLog START at steps {starts}; {compared} values of "
          f"{tags} tags equal to the kept JSONL records (largest relative difference "
          f"{max_diff:.1e}); {same} values of {', '.join(DETERMINED)} equal to the uninterrupted "
          f"run's in TensorBoard")

if failures:
    print(f"{len(failures)} checks failed")
    sys.exit(1)
print("ok")
