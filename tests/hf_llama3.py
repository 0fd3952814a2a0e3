#!/usr/bin/env python3
"""A tiny Llama 3 made by transformers, through tetra and back. transformers makes a
LlamaForCausalLM with rope_scaling of type llama3 (each of its three kinds of frequency among
the head's pairs) and tie_word_embeddings, saved with a byte-level BPE tokenizer.json that
Hugging Face tokenizers trains here (Llama 3's BOS template, <|end_of_text|> ending documents).
tetra loads the directory (--init-from) and its first loss on JSONL documents equals
transformers' within 1e-6 relative; it trains three steps on TP 2 x PP 2 (the tied matrix on
the first stage and its copy on the last, their gradients summed), whose first loss equals one
rank's, and exports. transformers loads the export (tied: one matrix, no lm_head.weight stored;
the fast tokenizer, encoding the documents to tetra's ids) and its loss equals tetra's within
1e-6. Then --doc-mask against PyTorch attention with the block-diagonal causal mask (each
token sees the earlier tokens of its own document; the end-of-text token belongs to the
document it ends) on one rank, within 1e-6. (Debian's torch 1.13 has no
scaled_dot_product_attention: transformers' eager attention applies the 4-D mask, softmax(q k^T
/ sqrt(d) + mask) v, which SDPA computes with the same mask.)

    python3 tests/hf_llama3.py build/tetra

Exit status 77 (ctest: skipped) where torch, transformers or tokenizers cannot be imported.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

from llmc_shard import bin_tokens

try:
    import torch
    import transformers
    from safetensors import safe_open
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

transformers.logging.set_verbosity_error()
TETRA = sys.argv[1]
S, G = 32, 4  # --seq-len, --global-batch
BOS, EOT = "<|begin_of_text|>", "<|end_of_text|>"
failures = []


def documents(seed, n):
    """n short documents of words, digits and punctuation."""
    r = random.Random(seed)
    words = ("the model of a pipeline shards each tensor and its gradient over ranks while "
             "tokens flow through attention layers 42 7 , . ! ?").split()
    return [" ".join(r.choice(words) for _ in range(r.randint(3, 25))) for _ in range(n)]


def make_tokenizer(texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[BOS, EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A",
                                      special_tokens=[(BOS, tok.token_to_id(BOS))])])
    return tok


def tetra(*args, ranks=1):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [TETRA, "train", "--seq-len", str(S), "--global-batch", str(G), "--peak-tflops", "1",
           *args]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none", *cmd]
    return subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def step0(tmp, model, data, *flags):
    """tetra's step-0 loss from `model`'s weights (--init-from) on `data`'s step-0 batch, and
    the cached token stream it trained on."""
    metrics = os.path.join(tmp, "step0.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    out = tetra("--steps", "1", "--data", data, "--init-from", model, "--metrics", metrics, *flags)
    shard = re.search(r"^documents: .* -> (\S+) ", out, re.M).group(1)
    return losses(metrics)[0], bin_tokens(shard)


def batch(tokens):
    """Step 0's sequences 0 .. G-1: tokens k S .. k S + S (docs/design.md, sequence order)."""
    return torch.tensor([tokens[k * S:k * S + S + 1] for k in range(G)], dtype=torch.long)


def hf_loss(model, seqs, mask=None):
    with torch.no_grad():
        logits = model(seqs[:, :-1], attention_mask=mask).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             seqs[:, 1:].reshape(-1)).item()


def same(label, hf, ours, bound=1e-6, names=("transformers", "tetra")):
    rel = abs(hf - ours) / abs(ours)
    print(f"{label}: {names[0]} {hf:.8f}, {names[1]} {ours:.8f}, relative difference {rel:.2e}")
    if not rel <= bound:
        failures.append(label)


def block_diagonal(seqs, eot):
    """The additive mask [G, 1, S, S]: 0 where key j <= query i and both are of one document
    (a document's end-of-text token is its last), the dtype's least value elsewhere."""
    inputs = seqs[:, :-1]
    doc = torch.cumsum((inputs == eot).long(), dim=1) - (inputs == eot).long()
    same_doc = doc[:, :, None] == doc[:, None, :]
    causal = torch.tril(torch.ones(S, S, dtype=torch.bool))
    allowed = same_doc & causal
    mask = torch.full((G, 1, S, S), torch.finfo(torch.float32).min)
    mask[allowed[:, None]] = 0.0
    return mask, int(doc.max()) + 1


with tempfile.TemporaryDirectory() as tmp:
    texts = documents(1, 300)
    tok = make_tokenizer(texts)
    docs = os.path.join(tmp, "docs.jsonl")
    with open(docs, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")

    # The model: head_dim 16 at rope_theta 500000 has wavelengths 6.3, 32, 167, 862, ...; with
    # an original context of 512 and factors 1 and 4, pairs 0 and 1 keep their frequency (below
    # 128), pair 2 is interpolated and the rest are divided by 8.
    config = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 512},
        tie_word_embeddings=True, bos_token_id=tok.token_to_id(BOS),
        eos_token_id=tok.token_to_id(EOT))
    torch.manual_seed(0)
    made = transformers.LlamaForCausalLM(config)
    model = os.path.join(tmp, "llama3")
    made.save_pretrained(model, safe_serialization=True)
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS,
                                         eos_token=EOT).save_pretrained(model)

    # Loaded by tetra: its first loss is transformers'.
    first, stream = step0(tmp, model, docs)
    eot = tok.token_to_id(EOT)
    same("the model as made (llama3 RoPE, tied)", hf_loss(made.eval(), batch(stream)), first)

    # Three steps on TP 2 x PP 2, then the export.
    exported = os.path.join(tmp, "export")
    metrics = os.path.join(tmp, "tp2pp2.jsonl")
    tetra("--tp", "2", "--pp", "2", "--steps", "3", "--data", docs, "--init-from", model,
          "--metrics", metrics, "--export", exported, ranks=4)
    run = losses(metrics)
    same("TP 2 x PP 2's first loss against one rank's", run[0], first, 1e-5,
         ("TP 2 x PP 2", "one rank"))

    # transformers loads the export: tied, one matrix stored, the fast tokenizer.
    back = transformers.LlamaForCausalLM.from_pretrained(exported, torch_dtype=torch.float32,
                                                         attn_implementation="eager").eval()
    with safe_open(os.path.join(exported, "model.safetensors"), "pt") as f:
        stored = set(f.keys())
    tied = (back.config.tie_word_embeddings and "lm_head.weight" not in stored and
            back.lm_head.weight.data_ptr() == back.model.embed_tokens.weight.data_ptr())
    rope = back.config.rope_scaling or {}
    print(f"export: tie_word_embeddings {back.config.tie_word_embeddings}, "
          f"{len(stored)} tensors stored, lm_head.weight {'not ' if tied else ''}among them; "
          f"rope_scaling {rope}")
    if not tied:
        failures.append("export tied")
    if rope.get("rope_type") != "llama3" or rope.get("original_max_position_embeddings") != 512:
        failures.append("export rope_scaling")
    fast = transformers.AutoTokenizer.from_pretrained(exported)
    ids = [i for t in texts for i in fast(t)["input_ids"] + [eot]]
    print(f"tokenizer: {type(fast).__name__} (fast: {fast.is_fast}), the documents' ids "
          f"{'equal' if ids == stream else 'DIFFER FROM'} tetra's")
    if not (fast.is_fast and ids == stream):
        failures.append("export tokenizer")
    trained, _ = step0(tmp, exported, docs)
    same("the export after 3 steps", hf_loss(back, batch(stream)), trained)

    # --doc-mask against the block-diagonal causal mask.
    masked, _ = step0(tmp, model, docs, "--doc-mask")
    seqs = batch(stream)
    mask, most = block_diagonal(seqs, eot)
    print(f"documents: up to {most} in a sequence of {S}")
    if most < 2:
        failures.append("the documents do not share sequences")
    same("--doc-mask (block-diagonal causal mask)", hf_loss(made, seqs, mask), masked)
    if abs(masked - first) < 1e-4:
        failures.append("--doc-mask changed nothing")

if failures:
    print(f"failed: {', '.join(failures)}")
    sys.exit(1)
