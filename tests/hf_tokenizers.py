#!/usr/bin/env python3
"""tetra's tokenizer.json against Hugging Face tokenizers itself. tokenizers trains byte-level
BPE tokenizers on a text of English, Chinese, digits, emoji, runs of white space and the special
tokens, with the GPT-2 pattern (ByteLevel's own, and as a Split with string-form merges, a
normalizer and added tokens with lstrip/rstrip/single_word) and the Llama 3 pattern (a Split,
ignore_merges, a BOS template). On a held-out text of over 100 kB tetra's ids equal the
library's exactly, as a text and as one document (special tokens read as text, BOS and the
end-of-text token around it), and decode to what the library decodes, which for the lossless
tokenizers is the text's bytes. Then tetra trains on JSONL documents with the Llama 3 one: the
cached token stream is the library's ids of each document, the end-of-text token between them;
the export loads in transformers' AutoTokenizer as the fast tokenizer, with the same ids.

    python3 tests/hf_tokenizers.py build/tetra

Exit status 77 (ctest: skipped) where tokenizers or transformers cannot be imported.
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
    import transformers
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

transformers.logging.set_verbosity_error()
TETRA = sys.argv[1]
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
failures = []

WORDS = ("the of and to in is was for that with as on by at from this be are it an or had model "
         "pipeline tensor shard gradient loss token document attention layer rank don't it's "
         "we're they've I'm you'll she'd DON'T IT'S O'Neil naïve café résumé").split()
CHINESE = "我们训练一个小模型数据并行张量流水线上下文注意力机制分词器文档的是了在有和就不人都一"
EMOJI = ["😀", "🚀", "👍🏽", "🇫🇷", "❤️", "👩‍👩‍👧", "🤖", "✨"]
SPACES = ["  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "    \n"]
# Other scripts, a combining accent, U+180E (white space to PCRE2's \s, not to the reference's),
# a ligature, mathematical letters and the long s that (?i:'s) takes.
RARE = ["Привет мир ", "مرحبا ", "नमस्ते ", "Ελληνικά ", "e\u0301 ", "\u180e", "ﬁ ", "𝔘𝔫𝔦 ",
        "'ſ "]


def text(seed, size, specials):
    """A text of at least `size` bytes of all the above, drawn from `seed`."""
    r = random.Random(seed)
    out, n = [], 0
    while n < size:
        k = r.random()
        if k < 0.45:
            s = r.choice(WORDS) + " "
            s = s.capitalize() if r.random() < 0.1 else s
        elif k < 0.6:
            s = "".join(r.choice(CHINESE) for _ in range(r.randint(1, 8))) + r.choice(["，", "。", ""])
        elif k < 0.7:
            s = str(r.randint(0, 10 ** r.randint(1, 9))) + r.choice([" ", ".", ",", "%"])
        elif k < 0.76:
            s = r.choice(EMOJI)
        elif k < 0.86:
            s = r.choice(SPACES)
        elif k < 0.9:
            s = r.choice(specials)
        elif k < 0.95:
            s = r.choice(["!", "?", "...", "--", "(", ")", "'s", "'S", "'ll", '"', "#", "$5", "{"])
        else:
            s = r.choice(RARE)
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def train(kind):
    """A tokenizer trained by the library, its special tokens, and whether decoding its ids
    gives the text back (a normalizer, add_prefix_space and lstrip/rstrip lose text)."""
    if kind == "llama3":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"]
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), "isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif kind == "gpt2":
        specials = ["<|endoftext|>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
    else:  # gpt2-split
        specials = ["<|endoftext|>", "<pad>"]
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.Sequence([normalizers.Replace("\r\n", "\n"),
                                               normalizers.Replace(Regex("\u00a0+"), " ")])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2), "isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text(1, 200_000, specials)], trainer)
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          special_tokens=[("<|begin_of_text|>", bos)])])
    if kind == "gpt2-split":
        tok.add_special_tokens([AddedToken("<|im_end|>", lstrip=True, rstrip=True)])
        tok.add_tokens([AddedToken("tensor", single_word=True),
                        AddedToken("model pipeline", normalized=False),
                        AddedToken("loss\n", normalized=True)])
        specials += ["<|im_end|>", "tensor", "model pipeline", "loss\n"]
    return tok, specials, kind != "gpt2-split"


def tetra_tokenize(path, data, *flags):
    out = subprocess.run([TETRA, "tokenize", "--tokenizer", path, *flags], input=data,
                         capture_output=True, check=True).stdout
    return out if "--decode" in flags else [int(x) for x in out.split()]


def same_ids(label, ref, mine):
    if ref == mine:
        print(f"{label}: the same {len(ref)} ids")
        return
    at = next((i for i, (a, b) in enumerate(zip(ref, mine)) if a != b), min(len(ref), len(mine)))
    print(f"{label}: OTHER ids ({len(ref)} and {len(mine)}), first difference at {at}: "
          f"tokenizers {ref[at:at + 8]}, tetra {mine[at:at + 8]}")
    failures.append(label)


def check(label, ok):
    print(f"{label}: {'yes' if ok else 'NO'}")
    if not ok:
        failures.append(label)


with tempfile.TemporaryDirectory() as tmp:
    trained = {}
    for kind in ["gpt2", "gpt2-split", "llama3"]:
        tok, specials, lossless = train(kind)
        os.makedirs(os.path.join(tmp, kind))
        path = os.path.join(tmp, kind, "tokenizer.json")
        tok.save(path)
        if kind == "gpt2-split":  # merges in the string form "a b", as before tokenizers 0.20
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
            assert isinstance(j["model"]["merges"][0], list)
            j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False)
            tok = Tokenizer.from_file(path)
        trained[kind] = (tok, path)
        held = text(2, 100_000, specials)
        data = held.encode()
        assert len(data) >= 100_000 and "\u180e" in held and "😀" in held and "\t" in held

        ref = tok.encode(held, add_special_tokens=False).ids
        same_ids(f"{kind}: the held-out text ({len(data)} bytes)", ref, tetra_tokenize(path, data))
        decoded = tetra_tokenize(path, " ".join(map(str, ref)).encode(), "--decode")
        check(f"{kind}: tetra decodes them to what tokenizers decodes",
              decoded == tok.decode(ref, skip_special_tokens=False).encode())
        if lossless:
            check(f"{kind}: ... which is the text's bytes", decoded == data)
        # As one document: its special tokens are text, the template's BOS before, the end of
        # text after.
        tok.encode_special_tokens = True
        eot = tok.token_to_id("<|end_of_text|>" if kind == "llama3" else "<|endoftext|>")
        same_ids(f"{kind}: the held-out text as a document", tok.encode(held).ids + [eot],
                 tetra_tokenize(path, data, "--document"))
        tok.encode_special_tokens = False

    # Documents: tetra trains on JSONL with the Llama 3 tokenizer; the cached stream is the
    # library's ids of each document (BOS, text, end of text), one after another.
    tok, path = trained["llama3"]
    docs = [text(10 + i, random.Random(i).randint(50, 3000), ["<|end_of_text|>"]) for i in range(30)]
    jsonl = os.path.join(tmp, "docs.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, "text": d}, ensure_ascii=False) + "\n")
    model = os.path.join(tmp, "model")
    out = subprocess.run(
        [TETRA, "train", "--layers", "1", "--dim", "32", "--heads", "2", "--kv-heads", "1",
         "--ffn-dim", "64", "--seq-len", "64", "--global-batch", "2", "--steps", "2",
         "--peak-tflops", "1", "--data", jsonl, "--tokenizer", path, "--export", model],
        capture_output=True, text=True, check=True, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    shard = re.search(r"^documents: .* -> (\S+) \(tokenized now; 30 documents\)", out, re.M)
    check("tetra trained on 30 JSONL documents", shard is not None and "summary:" in out)
    if shard:
        stream = bin_tokens(shard.group(1))
        tok.encode_special_tokens = True
        eot, bos = tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|begin_of_text|>")
        expected = [t for d in docs for t in tok.encode(d).ids + [eot]]
        tok.encode_special_tokens = False
        same_ids("the documents' token stream", expected, stream)
        ends = [i for i, t in enumerate(stream) if t == eot]
        check("an end-of-text token ends each document, and a BOS begins the next",
              len(ends) == 30 and ends[-1] == len(stream) - 1 and
              all(stream[i + 1] == bos for i in ends[:-1]))

    fast = transformers.AutoTokenizer.from_pretrained(model)
    check(f"AutoTokenizer loads the export as the fast tokenizer ({type(fast).__name__})",
          fast.is_fast)
    sample = text(3, 5000, ["<|end_of_text|>"])
    same_ids("the export's AutoTokenizer", tok.encode(sample).ids,
             fast(sample)["input_ids"])

if failures:
    print(f"failed: {', '.join(failures)}")
    sys.exit(1)
