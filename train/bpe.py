"""Byte-level BPE (GPT-2 / Qwen style) with the Qwen2 pre-tokenizer: training, encoding,
and the Hugging Face tokenizer.json / tokenizer_config.json it is saved as.

Text is first split by the Qwen2 regex (the one llama.cpp uses for
tokenizer.ggml.pre = qwen2), each piece's UTF-8 bytes are mapped to printable code points
(bytes_to_unicode), and merges are applied by rank inside a piece. Training counts the
pieces once and merges the most frequent adjacent pair until the vocabulary is full.

    python3 bpe.py train kjv_train.txt --vocab 4096 --out DIR   # DIR/tokenizer.json ...
    python3 bpe.py encode kjv_train.txt --tok DIR --out kjv_train.ids
      (uint16 little-endian ids: each chapter + "\n", then <|endoftext|>)
"""
import argparse
import json
import os
import struct
import sys

import regex  # \p{L} / \p{N} classes; Debian python3-regex

# Hugging Face's spelling of the Qwen2 pre-tokenizer (llama.cpp: LLAMA_VOCAB_PRE_TYPE_QWEN2).
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen-style ChatML: <|im_start|>role\ncontent<|im_end|>\n per message.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")

_SPLIT = regex.compile(QWEN2_PATTERN)


def bytes_to_unicode():
    """GPT-2's map from the 256 byte values to printable code points."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pre_tokenize(text):
    """Pieces of text as byte-level strings (one char per UTF-8 byte)."""
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")) for piece in _SPLIT.findall(text)]


def train(texts, vocab_size, log=print):
    """Returns (vocab: token -> id, merges: list of (a, b)); specials take the last ids."""
    word_freq = {}
    for text in texts:
        for piece in pre_tokenize(text):
            word_freq[piece] = word_freq.get(piece, 0) + 1
    words = [list(w) for w in word_freq]
    freqs = list(word_freq.values())
    # Every byte is a token, so any text encodes (ids 0..255 in byte order).
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    pair_count = {}
    pair_words = {}  # pair -> set of word indices containing it
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + freqs[wi]
            pair_words.setdefault((a, b), set()).add(wi)
    merges = []
    n_regular = vocab_size - len(SPECIAL_TOKENS)
    while len(vocab) < n_regular and pair_count:
        # Most frequent pair; ties broken by the pair itself so training is deterministic.
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if pair_count[best] < 2:
            break
        a, b = best
        merged = a + b
        merges.append(best)
        if merged not in vocab:
            vocab[merged] = len(vocab)
        for wi in list(pair_words.get(best, ())):
            w = words[wi]
            f = freqs[wi]
            for p in zip(w, w[1:]):  # remove this word's old pairs
                pair_count[p] -= f
                if pair_count[p] == 0:
                    del pair_count[p]
                pair_words[p].discard(wi)
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for p in zip(out, out[1:]):
                pair_count[p] = pair_count.get(p, 0) + f
                pair_words.setdefault(p, set()).add(wi)
        if len(merges) % 500 == 0:
            log(f"bpe: {len(merges)} merges, vocab {len(vocab)}, last {merged!r} x{pair_count.get(best, 0)}")
    for s in SPECIAL_TOKENS:
        vocab[s] = len(vocab)
    return vocab, merges


class Tokenizer:
    """Encoder over a trained vocab/merges; rank-ordered merges as HF and llama.cpp apply them."""

    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.id_to_token = {i: t for t, i in vocab.items()}
        self.ranks = {tuple(m): r for r, m in enumerate(merges)}
        self.cache = {}

    def _bpe(self, piece):
        w = list(piece)
        while len(w) > 1:
            best = None
            for i in range(len(w) - 1):
                r = self.ranks.get((w[i], w[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            a, b = w[best[1]], w[best[1] + 1]
            out = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            w = out
        return [self.vocab[t] for t in w]

    def encode(self, text):
        ids = []
        for piece in pre_tokenize(text):
            got = self.cache.get(piece)
            if got is None:
                got = self._bpe(piece)
                self.cache[piece] = got
            ids.extend(got)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_token[i]
            if t in SPECIAL_TOKENS:
                out.extend(t.encode("utf-8"))
            else:
                out.extend(CHAR_TO_BYTE[c] for c in t)
        return out.decode("utf-8", errors="replace")

    def token_id(self, s):
        return self.vocab[s]


def _byte_level(kind):
    return {"type": kind, "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def tokenizer_json(vocab, merges):
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in SPECIAL_TOKENS]
    regular = {t: i for t, i in vocab.items() if t not in SPECIAL_TOKENS}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            _byte_level("ByteLevel")]},
        "post_processor": _byte_level("ByteLevel"),
        "decoder": _byte_level("ByteLevel"),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": regular,
                  "merges": [f"{a} {b}" for a, b in merges]},
    }


def tokenizer_config_json(vocab, model_max_length):
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(vocab[s]): {"content": s, "lstrip": False, "normalized": False,
                                                  "rstrip": False, "single_word": False, "special": True}
                                 for s in SPECIAL_TOKENS},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def load(dir_path):
    """Reads back a tokenizer.json written by save()."""
    with open(os.path.join(dir_path, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    for t in tj["added_tokens"]:
        vocab[t["content"]] = t["id"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tj["model"]["merges"]]
    return Tokenizer(vocab, merges)


def save(dir_path, vocab, merges, model_max_length):
    os.makedirs(dir_path, exist_ok=True)
    with open(os.path.join(dir_path, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
    with open(os.path.join(dir_path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config_json(vocab, model_max_length), f, ensure_ascii=False, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["train", "encode"])
    ap.add_argument("corpus")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--tok", help="tokenizer directory (encode)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        text = f.read()
    if args.cmd == "encode":
        tok = load(args.tok)
        eos = tok.token_id("<|endoftext|>")
        ids = []
        for chapter in text.strip("\n").split("\n\n"):
            ids.extend(tok.encode(chapter + "\n"))
            ids.append(eos)
        with open(args.out, "wb") as f:
            f.write(struct.pack(f"<{len(ids)}H", *ids))
        print(f"{len(ids)} tokens -> {args.out}")
        return
    vocab, merges = train(text.split("\n\n"), args.vocab, log=lambda s: print(s, file=sys.stderr))
    save(args.out, vocab, merges, args.max_length)
    print(f"{len(vocab)} tokens ({len(merges)} merges) -> {args.out}")


if __name__ == "__main__":
    main()
