#!/usr/bin/python3
"""torch_translate.py - the peer of encode | decode in tests/bench/translate.sh:
PyTorch's nn.Transformer with OUR weights, decoding greedily.

usage: torch_translate.py MODEL SRC_IDS OUT [--batch B] [--threads T]
                          [--length L] [--no-eos] [--no-repeat]

Builds nn.Transformer with the model file's dimensions (post-norm, no final
LayerNorm, as our post-norm model; dropout 0, eval mode), loads the weights
from the safetensors file with nothing but json, struct and numpy (our q, k
and v projections become PyTorch's fused in_proj_weight = cat(q, k, v)),
appends </s> to each source as 'encode' does, and decodes B sentences at a
time greedily for exactly L tokens, as 'decode --greedy --min-length L
--max-length L' does: <pad>, <s> and </s> are never chosen, ties go to the
lowest id (--no-repeat: nor a token already produced, as with
--no-repeat-ngram 1, which makes a random model's outputs varied enough for
a comparison of the two to mean something).  nn.Transformer has no key/value cache, so every step runs the
decoder over the whole prefix: that is what a PyTorch user gets.

Writes the ids to OUT, one line per source, and prints
"torch_seconds S sentences N tokens M" (encoder and decoder, loading excluded).
"""
import argparse
import json
import math
import struct
import sys
import time

import numpy as np
import torch
from torch import nn


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__")
    tensors = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            sys.exit(f"torch_translate: {name}: dtype {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        tensors[name] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).copy())
    return meta, tensors


class Translator(nn.Module):
    def __init__(self, meta, W):
        super().__init__()
        self.D = D = int(meta["d_model"])
        H, F = int(meta["n_heads"]), int(meta["d_ff"])
        Ne, Nd = int(meta["n_encoder_layers"]), int(meta["n_decoder_layers"])
        if meta["norm"] != "post" or meta["positions"] != "sinusoidal" or meta["shared_embeddings"] != "true":
            sys.exit("torch_translate: only post-norm, sinusoidal, shared-embedding models")
        eps = float(meta["layer_norm_eps"])
        enc_layer = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, batch_first=True, layer_norm_eps=eps)
        dec_layer = nn.TransformerDecoderLayer(D, H, F, dropout=0.0, batch_first=True, layer_norm_eps=eps)
        self.transformer = nn.Transformer(
            d_model=D, nhead=H, batch_first=True,
            custom_encoder=nn.TransformerEncoder(enc_layer, Ne, norm=None),
            custom_decoder=nn.TransformerDecoder(dec_layer, Nd, norm=None))
        self.embed = W["encoder.embed_tokens.weight"]  # shared: source, target, output
        self.pad, self.bos, self.eos = int(meta["pad_id"]), int(meta["bos_id"]), int(meta["eos_id"])
        self.max_positions = int(meta["max_positions"])
        pos = torch.arange(self.max_positions, dtype=torch.float64)[:, None]
        i = torch.arange(0, D, 2, dtype=torch.float64)
        angle = pos / torch.pow(10000.0, i / D)
        pe = torch.zeros(self.max_positions, D, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.pe = pe.float()
        self.load(W, Ne, Nd)

    def load(self, W, Ne, Nd):
        def attn(m, prefix):
            m.in_proj_weight.data = torch.cat([W[f"{prefix}.{x}_proj.weight"] for x in "qkv"])
            m.in_proj_bias.data = torch.cat([W[f"{prefix}.{x}_proj.bias"] for x in "qkv"])
            m.out_proj.weight.data = W[prefix + ".out_proj.weight"]
            m.out_proj.bias.data = W[prefix + ".out_proj.bias"]

        def copy(m, prefix):
            m.weight.data = W[prefix + ".weight"]
            m.bias.data = W[prefix + ".bias"]

        for i, l in enumerate(self.transformer.encoder.layers):
            p = f"encoder.layers.{i}"
            attn(l.self_attn, p + ".self_attn")
            copy(l.norm1, p + ".self_attn_layer_norm")
            copy(l.linear1, p + ".fc1")
            copy(l.linear2, p + ".fc2")
            copy(l.norm2, p + ".final_layer_norm")
        for i, l in enumerate(self.transformer.decoder.layers):
            p = f"decoder.layers.{i}"
            attn(l.self_attn, p + ".self_attn")
            copy(l.norm1, p + ".self_attn_layer_norm")
            attn(l.multihead_attn, p + ".encoder_attn")
            copy(l.norm2, p + ".encoder_attn_layer_norm")
            copy(l.linear1, p + ".fc1")
            copy(l.linear2, p + ".fc2")
            copy(l.norm3, p + ".final_layer_norm")

    def embed_positions(self, ids):
        return self.embed[ids] * math.sqrt(self.D) + self.pe[: ids.shape[1]]

    @torch.no_grad()
    def greedy(self, src, length, no_repeat=False):
        """src: [B, S] ids padded with <pad>; returns [B, length] ids.  With
        no_repeat, a token once produced is not chosen again in the sentence
        (decode --no-repeat-ngram 1)."""
        pad_mask = src == self.pad
        if not pad_mask.any():
            pad_mask = None  # no padding: no mask (and no nested-tensor warning)
        memory = self.transformer.encoder(self.embed_positions(src), src_key_padding_mask=pad_mask)
        ys = torch.full((src.shape[0], 1), self.bos, dtype=torch.long)
        banned = torch.tensor([self.pad, self.bos, self.eos])
        for t in range(length):
            mask = self.transformer.generate_square_subsequent_mask(t + 1)
            out = self.transformer.decoder(self.embed_positions(ys), memory, tgt_mask=mask,
                                           memory_key_padding_mask=pad_mask)
            logits = out[:, -1] @ self.embed.T
            logits[:, banned] = -math.inf
            if no_repeat:
                logits.scatter_(1, ys[:, 1:], -math.inf)
            ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
        return ys[:, 1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--no-eos", action="store_true")
    ap.add_argument("--no-repeat", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    meta, W = load_safetensors(a.model)
    model = Translator(meta, W).eval()
    sources = []
    for line in open(a.src):
        ids = [int(x) for x in line.split()]
        sources.append(ids if a.no_eos else ids + [model.eos])
    outputs = []
    start = time.perf_counter()
    for b in range(0, len(sources), a.batch):
        chunk = sources[b : b + a.batch]
        S = max(len(s) for s in chunk)
        src = torch.full((len(chunk), S), model.pad, dtype=torch.long)
        for i, s in enumerate(chunk):
            src[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        outputs.extend(model.greedy(src, a.length, a.no_repeat).tolist())
    seconds = time.perf_counter() - start
    with open(a.out, "w") as f:
        for ids in outputs:
            f.write(" ".join(map(str, ids)) + "\n")
    print(f"torch_seconds {seconds:.4f} sentences {len(outputs)} tokens {len(outputs) * a.length}")


if __name__ == "__main__":
    main()
