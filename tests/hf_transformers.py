#!/usr/bin/env python3
"""tetra's exported model directory in Hugging Face transformers: LlamaForCausalLM loads it
as it is (from_pretrained, no hand-written config) and its loss on a batch equals tetra's, for
a byte-level model and for one with a SentencePiece BPE tokenizer, whose export AutoTokenizer
loads and encodes to the ids tetra trained on.

    python3 tests/hf_transformers.py build/tetra

Exit status 77 (ctest: skipped) where torch, transformers or sentencepiece cannot be imported.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

from llmc_shard import bin_tokens

try:
    import sentencepiece  # noqa: F401 (AutoTokenizer converts the export's tokenizer.model)
    import torch
    import transformers
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

transformers.logging.set_verbosity_error()  # not its notes on legacy tokenizers
TETRA = sys.argv[1]
S, G = 32, 4  # --seq-len, --global-batch
MODEL = ["--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--ffn-dim", "128",
         "--seq-len", str(S), "--global-batch", str(G), "--peak-tflops", "1"]
failures = []


def tetra(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([TETRA, "train", *args], check=True, env=env, capture_output=True,
                          text=True).stdout


def step0_loss(tmp, model, corpus):
    """tetra's loss at step 0 from the exported weights (--init-from), on the step-0 batch."""
    metrics = os.path.join(tmp, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    tetra("--seq-len", str(S), "--global-batch", str(G), "--peak-tflops", "1", "--steps", "1",
          "--data", corpus, "--init-from", model, "--metrics", metrics)
    with open(metrics) as f:
        return json.loads(f.readline())["loss"]


def compare_loss(label, model, tokens, tetra_loss):
    hf = transformers.LlamaForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    hf.eval()
    # Step 0 takes sequences 0 .. G-1: tokens k*S .. k*S+S (docs/design.md, sequence order).
    seqs = torch.tensor([tokens[k * S:k * S + S + 1] for k in range(G)], dtype=torch.long)
    with torch.no_grad():
        logits = hf(seqs[:, :-1]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             seqs[:, 1:].reshape(-1)).item()
    rel = abs(loss - tetra_loss) / tetra_loss
    print(f"{label}: transformers {transformers.__version__} loss {loss:.6f}, tetra "
          f"{tetra_loss:.6f}, relative difference {rel:.2e}")
    if not (rel < 1e-4 and math.isfinite(loss)):
        failures.append(f"{label}: loss")


with tempfile.TemporaryDirectory() as tmp:
    # Bytes: the tokens are the text's bytes.
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("the quick brown fox jumps over the lazy dog. " * 200)
    model = os.path.join(tmp, "model")
    # Trained a few steps, exported, then the exported weights' loss on the step-0 batch.
    tetra(*MODEL, "--steps", "5", "--data", corpus, "--export", model)
    compare_loss("bytes", model, list(open(corpus, "rb").read()), step0_loss(tmp, model, corpus))

    # A BPE tokenizer trained by tetra: digits, runs of spaces, newlines and characters outside
    # the pieces (byte fallback) included.
    text = os.path.join(tmp, "text.txt")
    lines = [f"Line {i}: the {w} of {i * 37 % 1000} items,  twice   spaced; café, naïve, 東京.\n"
             for i, w in zip(range(400), ["model", "pipeline", "tensor", "shard"] * 100)]
    with open(text, "w") as f:
        f.write("".join(lines))
    bpe_model = os.path.join(tmp, "bpe_model")
    out = tetra(*MODEL, "--steps", "5", "--data", text, "--tokenizer", "bpe:300", "--export",
                bpe_model)
    shard = re.search(r"^tokens: .* -> (\S+) ", out, re.M).group(1)
    ids = bin_tokens(shard)
    tok = transformers.AutoTokenizer.from_pretrained(bpe_model)
    with open(text, encoding="utf-8") as f:
        hf_ids = tok(f.read(), add_special_tokens=False)["input_ids"]
    same = hf_ids == ids
    print(f"tokenizer: AutoTokenizer ({type(tok).__name__}) of the export encodes the "
          f"{len(ids)}-token text to {'the same ids as' if same else 'OTHER ids than'} tetra")
    if not same:
        at = next((i for i, (a, b) in enumerate(zip(hf_ids, ids)) if a != b),
                  min(len(ids), len(hf_ids)))
        print(f"  first difference at token {at}: transformers {hf_ids[at:at + 8]}, "
              f"tetra {ids[at:at + 8]}")
        failures.append("tokenizer ids")
    compare_loss("bpe:300", bpe_model, ids, step0_loss(tmp, bpe_model, text))

if failures:
    print(f"failed: {', '.join(failures)}")
    sys.exit(1)
