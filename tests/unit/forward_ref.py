#!/usr/bin/python3
"""forward_ref.py - an independent NumPy reimplementation of the model's
forward pass, which tests/unit/test_forward.c checks the C code against.

Written from the papers (Vaswani et al. 2017; Shaw et al. 2018 for relative
positions) and tfm/model.h, not from the C code: it reads the model file
(safetensors: an 8-byte little-endian header length, a JSON header, raw
little-endian float32 tensors) with nothing but json and numpy, and
computes in float64.

usage: forward_ref.py MODEL SRC_IDS TGT_IDS OUT
  SRC_IDS, TGT_IDS: comma-separated ids (TGT_IDS begins with <s>)
  OUT receives raw float32: the encoder states [S, D], then the decoder's
  log-probabilities [T, V_tgt] (row t: the distribution after tgt[0..t]).
"""
import json
import struct
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__")
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        tensors[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).astype(np.float64)
    return meta, tensors


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def linear(x, W, prefix, bias=True):
    y = x @ W[prefix + ".weight"].T
    return y + W[prefix + ".bias"] if bias else y


def softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def attention(q, k, v, H, allowed, rel=None):
    """q [n, D], k, v [m, D], allowed [n, m] booleans; rel: None, or the
    relative position tables (a_K, a_V, K), [2K+1, Dh] each, shared by the
    heads (Shaw et al., 2018): with a_ij the row K + clip(j - i, -K, K),
      e_ij = q_i (k_j + a^K_ij)^T / sqrt(Dh),  z_i = sum_j alpha_ij (v_j + a^V_ij)."""
    n, D = q.shape
    m = k.shape[0]
    Dh = D // H
    if rel is not None:
        a_K, a_V, K = rel
        bucket = np.clip(np.arange(m)[None, :] - np.arange(n)[:, None], -K, K) + K
        A_K, A_V = a_K[bucket], a_V[bucket]  # [n, m, Dh]: a vector per pair
    out = np.zeros((n, D))
    for h in range(H):
        sl = slice(h * Dh, (h + 1) * Dh)
        keys = k[None, :, sl] + (A_K if rel is not None else 0)  # [n or 1, m, Dh]
        values = v[None, :, sl] + (A_V if rel is not None else 0)
        s = np.einsum("id,ijd->ij", q[:, sl], np.broadcast_to(keys, (n, m, Dh))) / np.sqrt(Dh)
        s = np.where(allowed, s, -np.inf)
        out[:, sl] = np.einsum("ij,ijd->id", softmax(s), np.broadcast_to(values, (n, m, Dh)))
    return out


def mha(x_q, x_kv, W, prefix, H, allowed, K=0):
    q = linear(x_q, W, prefix + ".q_proj")
    k = linear(x_kv, W, prefix + ".k_proj")
    v = linear(x_kv, W, prefix + ".v_proj")
    rel = None
    if K > 0:
        rel = (W[prefix + ".relative_keys.weight"], W[prefix + ".relative_values.weight"], K)
    return linear(attention(q, k, v, H, allowed, rel), W, prefix + ".out_proj")


def sinusoids(n, D):
    pe = np.zeros((n, D))
    pos = np.arange(n)[:, None]
    i2 = np.arange(0, D, 2)[None, :]
    pe[:, 0::2] = np.sin(pos / 10000 ** (i2 / D))
    pe[:, 1::2] = np.cos(pos / 10000 ** (i2 / D))
    return pe


def sublayer(x, fn, W, norm, pre, eps):
    if pre:
        return x + fn(layer_norm(x, W[norm + ".weight"], W[norm + ".bias"], eps))
    return layer_norm(x + fn(x), W[norm + ".weight"], W[norm + ".bias"], eps)


def main():
    meta, W = load(sys.argv[1])
    src = [int(t) for t in sys.argv[2].split(",") if t]
    tgt = [int(t) for t in sys.argv[3].split(",") if t]
    D = int(meta["d_model"])
    H = int(meta["n_heads"])
    eps = float(meta["layer_norm_eps"])
    pre = meta["norm"] == "pre"
    r = int(meta["attention_window"])
    K = int(meta.get("relative_positions", "0"))  # absent in older files: none
    shared = meta["shared_embeddings"] == "true"
    positions = meta["positions"]  # sinusoidal, learned or none
    src_emb = W["encoder.embed_tokens.weight"]
    tgt_emb = src_emb if shared else W["decoder.embed_tokens.weight"]
    out_proj = src_emb if shared else W["decoder.output_projection.weight"]

    def embed(E, ids, side):
        if positions == "none":
            return E[ids] * np.sqrt(D)
        if positions == "learned":
            return E[ids] * np.sqrt(D) + W[side + ".embed_positions.weight"][: len(ids)]
        return E[ids] * np.sqrt(D) + sinusoids(len(ids), D)

    def ffn(prefix):
        return lambda h: linear(np.maximum(0, linear(h, W, prefix + ".fc1")), W, prefix + ".fc2")

    # encoder
    S, T = len(src), len(tgt)
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    enc_allowed = np.abs(i - j) <= r if r > 0 else np.ones((S, S), bool)
    x = embed(src_emb, src, "encoder")
    L = int(meta["n_encoder_layers"])
    for l in range(L):
        p = "encoder.layers.%d" % l
        x = sublayer(x, lambda h: mha(h, h, W, p + ".self_attn", H, enc_allowed, K), W,
                     p + ".self_attn_layer_norm", pre, eps)
        x = sublayer(x, ffn(p), W, p + ".final_layer_norm", pre, eps)
    if pre:
        x = layer_norm(x, W["encoder.layer_norm.weight"], W["encoder.layer_norm.bias"], eps)
    states = x

    # decoder
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    dec_allowed = (j <= i) & ((j >= i - r) if r > 0 else True)
    cross_allowed = np.ones((T, S), bool)
    y = embed(tgt_emb, tgt, "decoder")
    L = int(meta["n_decoder_layers"])
    for l in range(L):
        p = "decoder.layers.%d" % l
        y = sublayer(y, lambda h: mha(h, h, W, p + ".self_attn", H, dec_allowed, K), W,
                     p + ".self_attn_layer_norm", pre, eps)
        y = sublayer(y, lambda h: mha(h, states, W, p + ".encoder_attn", H, cross_allowed), W,
                     p + ".encoder_attn_layer_norm", pre, eps)
        y = sublayer(y, ffn(p), W, p + ".final_layer_norm", pre, eps)
    if pre:
        y = layer_norm(y, W["decoder.layer_norm.weight"], W["decoder.layer_norm.bias"], eps)
    logits = y @ out_proj.T
    m = logits.max(-1, keepdims=True)
    log_probs = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))

    with open(sys.argv[4], "wb") as f:
        f.write(states.astype("<f4").tobytes())
        f.write(log_probs.astype("<f4").tobytes())


if __name__ == "__main__":
    main()
