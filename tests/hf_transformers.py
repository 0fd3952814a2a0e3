#!/usr/bin/env python3
"""tetra's exported model directory in Hugging Face transformers: LlamaForCausalLM loads it
as it is (from_pretrained, no hand-written config) and its loss on a batch equals tetra's.

    python3 tests/hf_transformers.py build/tetra

Exit status 77 (ctest: skipped) where torch or transformers cannot be imported.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

TETRA = sys.argv[1]
S, G = 32, 4  # --seq-len, --global-batch
MODEL = ["--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn-dim", "128",
         "--seq-len", str(S), "--global-batch", str(G), "--peak-tflops", "1"]


def tetra(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run([TETRA, "train", *args], check=True, env=env, stdout=subprocess.DEVNULL)


with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    model = os.path.join(tmp, "model")
    # Trained a few steps, exported, then the exported weights' loss on the step-0 batch.
    tetra(*MODEL, "--steps", "5", "--data", corpus, "--export", model)
    metrics = os.path.join(tmp, "m.jsonl")
    tetra("--seq-len", str(S), "--global-batch", str(G), "--peak-tflops", "1", "--steps", "1",
          "--data", corpus, "--init-from", model, "--metrics", metrics)
    with open(metrics) as f:
        tetra_loss = json.loads(f.readline())["loss"]

    hf = transformers.LlamaForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    hf.eval()
    data = open(corpus, "rb").read()
    # Step 0 takes sequences 0 .. G-1: tokens k*S .. k*S+S (docs/design.md, sequence order).
    seqs = torch.tensor([list(data[k * S:k * S + S + 1]) for k in range(G)], dtype=torch.long)
    with torch.no_grad():
        logits = hf(seqs[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             seqs[:, 1:].reshape(-1)).item()
    rel = abs(loss - tetra_loss) / tetra_loss
    print(f"transformers {transformers.__version__}: loss {loss:.6f}, tetra {tetra_loss:.6f}, "
          f"relative difference {rel:.2e}")
    sys.exit(0 if rel < 1e-4 and math.isfinite(loss) else 1)
