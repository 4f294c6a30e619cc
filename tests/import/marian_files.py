"""marian_files.py -- the files of a Marian / OPUS-MT model directory, for make_fixtures.py.

Given a variant (make_fixtures.py's VARIANTS), its vocabularies and a seed, this writes what a
real OPUS-MT directory holds: the model .npz with random weights under Marian's exact tensor
names and its `special:model.yml`, Marian YAML vocabularies, decoder.yml; and, for the first
variant, the same weights in the Hugging Face (transformers) Marian layout as safetensors.
Every byte is a function of its arguments: the .npz zip members carry a fixed date, the
weights come from np.random.default_rng([seed, variant index]).

No command line: make_fixtures.py (run as a script, so this directory is on sys.path)
imports it. See tests/import/README.md.
"""

import io
import json
import os
import re
import shutil
import struct
import zipfile

import numpy as np
import yaml

# ---------------------------------------------------------------------------------------------
# Marian's model.yml (the model options a real OPUS-MT model carries in special:model.yml).

MODEL_YML_DEFAULTS = {
    "bert-class-symbol": "[CLS]",
    "bert-mask-symbol": "[MASK]",
    "bert-masking-fraction": 0.15,
    "bert-sep-symbol": "[SEP]",
    "bert-train-type-embeddings": True,
    "bert-type-vocab-size": 2,
    "build-info": "",
    "cnn-highway-layers": 4,
    "cnn-num-filters": [200, 200, 250, 250, 300, 300, 300, 300],
    "cnn-pool-size": [5],
    "dec-cell": "gru",
    "dec-cell-base-depth": 2,
    "dec-cell-high-depth": 1,
    "dec-depth": 6,
    "dim-emb": 512,
    "dim-rnn": 1024,
    "dim-vocabs": [0, 0],
    "enc-cell": "gru",
    "enc-cell-depth": 1,
    "enc-depth": 6,
    "enc-type": "bidirectional",
    "factors-combine": "sum",
    "factors-dim-emb": 0,
    "input-types": [],
    "layer-normalization": False,
    "lemma-dependency": "",
    "lemma-dim-emb": 0,
    "output-omit-bias": False,
    "right-left": False,
    "skip": False,
    "tied-embeddings": False,
    "tied-embeddings-all": False,
    "tied-embeddings-src": False,
    "transformer-aan-activation": "swish",
    "transformer-aan-depth": 2,
    "transformer-aan-nogate": False,
    "transformer-decoder-autoreg": "self-attention",
    "transformer-decoder-dim-ffn": 0,
    "transformer-decoder-ffn-depth": 0,
    "transformer-depth-scaling": False,
    "transformer-dim-aan": 2048,
    "transformer-dim-ffn": 2048,
    "transformer-dropout": 0.1,
    "transformer-dropout-attention": 0,
    "transformer-dropout-ffn": 0,
    "transformer-ffn-activation": "swish",
    "transformer-ffn-depth": 2,
    "transformer-guided-alignment-layer": "last",
    "transformer-heads": 8,
    "transformer-no-projection": False,
    "transformer-pool": False,
    "transformer-postprocess": "dan",
    "transformer-postprocess-emb": "d",
    "transformer-postprocess-top": "",
    "transformer-preprocess": "",
    "transformer-rnn-projection": False,
    "transformer-tied-layers": [],
    "transformer-train-position-embeddings": False,
    "type": "transformer",
    "ulr": False,
    "ulr-dim-emb": 0,
    "ulr-trainable-transformation": False,
    "version": "v1.10.0 (synthetic fixture made by tests/import/make_fixtures.py; no Marian build)",
}

_YAML_PLAIN_BAD_START = set("-?:,[]{}#&*!|>'\"%@`= \t")


def yaml_scalar(s):
    """A string the way yaml-cpp (Marian) writes it: plain when YAML reads it back as the same
    string, else double-quoted with escapes. Numbers, booleans, null and indicators are quoted."""
    if isinstance(s, bool):
        return "true" if s else "false"
    if isinstance(s, (int, float)):
        return repr(s)
    plain = (s != "" and s[0] not in _YAML_PLAIN_BAD_START and s == s.strip()
             and ": " not in s and " #" not in s and not s.endswith(":")
             and all(c.isprintable() and c not in "\u2028\u2029\ufeff" for c in s))
    if plain:
        try:
            plain = yaml.safe_load(s + ": 0") == {s: 0}
        except yaml.YAMLError:
            plain = False
    if plain:
        return s
    out = ['"']
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif not c.isprintable() or c in "\u2028\u2029\ufeff":
            o = ord(c)
            out.append("\\x%02x" % o if o < 0x100 else "\\u%04x" % o if o < 0x10000 else "\\U%08x" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def model_yml_text(cfg):
    """Marian's YAML layout: sorted keys, lists as block sequences, empty ones as []."""
    lines = []
    for k in sorted(cfg):
        v = cfg[k]
        if isinstance(v, list):
            lines.append("%s:" % k)
            if not v:
                lines.append("  []")
            for x in v:
                lines.append("  - %s" % yaml_scalar(x))
        elif isinstance(v, str) and v == "":
            lines.append('%s: ""' % k)
        else:
            lines.append("%s: %s" % (k, yaml_scalar(v)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Files: deterministic .npz (zip of .npy, stored, fixed dates) and safetensors.

ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def npz_bytes(arrays):
    """arrays: list of (name, ndarray). The layout numpy's np.savez writes (a stored zip of
    NAME.npy members, npy format 1.0), without the current time in the zip headers."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, a in arrays:
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(a), version=(1, 0),
                                      allow_pickle=False)
            zi = zipfile.ZipInfo(name + ".npy", date_time=ZIP_DATE)
            zi.compress_type = zipfile.ZIP_STORED
            zi.external_attr = 0o644 << 16
            zi.create_system = 3
            zf.writestr(zi, member.getvalue())
    return buf.getvalue()


def safetensors_bytes(tensors, metadata=None):
    """tensors: list of (name, float32 ndarray). 8-byte little-endian header length, JSON
    header (dtype, shape, data_offsets relative to the data block), padded with spaces to a
    multiple of 8, then the raw little-endian data in header order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, off = [], 0
    for name, a in sorted(tensors, key=lambda t: t[0]):
        a = np.ascontiguousarray(a, dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


# ---------------------------------------------------------------------------------------------
# Marian's vocabularies (YAML: one `piece: id` line each).

def marian_vocab(*piece_lists, front=()):
    """</s> 0, <unk> 1, then FRONT, then each list's pieces in order, each piece once."""
    tokens, seen = ["</s>", "<unk>"], {"</s>", "<unk>"}
    for p in list(front) + [p for pl in piece_lists for p in pl]:
        if p not in seen:
            tokens.append(p)
            seen.add(p)
    return tokens


def vocab_yml_text(tokens):
    return "".join("%s: %d\n" % (yaml_scalar(t), i) for i, t in enumerate(tokens))


def check_vocab_file(path, tokens):
    with open(path, encoding="utf-8") as f:
        parsed = yaml.safe_load(f)
    assert all(isinstance(k, str) for k in parsed), "a vocabulary key did not stay a string"
    back = [k for k, _ in sorted(parsed.items(), key=lambda kv: kv[1])]
    assert back == tokens, "vocabulary does not round-trip through YAML: " + path
    try:
        from ctranslate2.converters.marian import load_vocab
    except ImportError:
        return
    assert load_vocab(path) == tokens, "CTranslate2 reads the vocabulary differently: " + path


# ---------------------------------------------------------------------------------------------
# Weights.

class Init:
    def __init__(self, seed, index):
        self.rng = np.random.default_rng([seed, index])

    def normal(self, shape, std, mean=0.0):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
                + np.float32(mean)).astype(np.float32)


def ln(init, params, name, d, pre):
    suffix = "_pre" if pre else ""
    params[name + "_ln_scale" + suffix] = init.normal((1, d), 0.1, 1.0)
    params[name + "_ln_bias" + suffix] = init.normal((1, d), 0.05)


def attention(init, params, prefix, d, projection=True, gain=1.0):
    for m in ("q", "k", "v") + (("o",) if projection else ()):
        g = gain if m in "qkv" else 1.0
        params["%s_W%s" % (prefix, m)] = init.normal((d, d), g / np.sqrt(d))
        params["%s_b%s" % (prefix, m)] = init.normal((1, d), 0.05)


def ffn(init, params, prefix, d, f):
    params[prefix + "_W1"] = init.normal((d, f), 1 / np.sqrt(d))
    params[prefix + "_b1"] = init.normal((1, f), 0.05)
    params[prefix + "_W2"] = init.normal((f, d), 1 / np.sqrt(f))
    params[prefix + "_b2"] = init.normal((1, d), 0.05)


def marian_params(v, cfg, v_src, v_tgt, seed, n_units=None):
    """Random weights under Marian's names. Shapes as Marian stores them: W [in, out],
    biases and layer-norm parameters [1, n], embeddings [V, d]."""
    init = Init(seed, v["index"])
    d, f = v["dim"], v["ffn"]
    pre = "n" in cfg["transformer-preprocess"]
    autoreg = cfg["transformer-decoder-autoreg"]
    proj = not cfg["transformer-no-projection"]
    p = {}
    rows_src = n_units or v_src
    rows_tgt = n_units or v_tgt
    es = v.get("emb_std", 1.0)
    if cfg["tied-embeddings-all"] or cfg["tied-embeddings-src"]:
        p["Wemb"] = init.normal((rows_tgt, d), es)
    else:
        p["encoder_Wemb"] = init.normal((rows_src, d), es)
        p["decoder_Wemb"] = init.normal((rows_tgt, d), es)
    if "n" in cfg["transformer-postprocess-emb"]:
        ln(init, p, "encoder_emb", d, True)
        ln(init, p, "decoder_emb", d, True)
    for i in range(1, cfg["enc-depth"] + 1):
        s = "encoder_l%d" % i
        attention(init, p, s + "_self", d, proj)
        ln(init, p, s + "_self_Wo", d, pre)
        ffn(init, p, s + "_ffn", d, f)
        ln(init, p, s + "_ffn_ffn", d, pre)
    for i in range(1, cfg["dec-depth"] + 1):
        s = "decoder_l%d" % i
        if autoreg == "rnn":      # Marian's SSRU: W, Wf, bf and a post-norm on the output
            p[s + "_rnn_W"] = init.normal((d, d), 1 / np.sqrt(d))
            p[s + "_rnn_Wf"] = init.normal((d, d), 1 / np.sqrt(d))
            p[s + "_rnn_bf"] = init.normal((1, d), 0.05)
            ln(init, p, s + "_rnn_ffn", d, pre)
        else:
            attention(init, p, s + "_self", d, proj)
            ln(init, p, s + "_self_Wo", d, pre)
        # a sharper, stronger encoder-decoder attention: the source steers the output
        attention(init, p, s + "_context", d, proj, v.get("ctx_gain", 1.0))
        ln(init, p, s + "_context_Wo", d, pre)
        ffn(init, p, s + "_ffn", d, f)
        ln(init, p, s + "_ffn_ffn", d, pre)
    if pre and cfg["transformer-postprocess-top"] == "n":
        ln(init, p, "encoder_top", d, False)
        ln(init, p, "decoder_top", d, False)
    if not (cfg["tied-embeddings-all"] or cfg["tied-embeddings"]):
        # the embeddings' std, so that tied and untied models have logits of one scale
        p["decoder_ff_logit_out_W"] = init.normal((d, rows_tgt), es)
    b = init.normal((1, rows_tgt), 0.1)
    b[0, 0] += np.float32(v.get("eos_bias", 0.0))
    # A random decoder rarely stops: it falls into a cycle of tokens. To make </s> likelier as
    # the output grows, the output vector of </s> (id 0) gets a large negative weight on the
    # cosine dimension of the position encoding whose period is ~110 steps: cos(pos/17.8)
    # falls from 1 at pos 0 to -0.1 at pos 30, and with it the </s> logit rises.
    if v.get("eos_pos"):
        k = d // 2 + int(round(np.log(17.8) / np.log(10000.0) * d / 2))
        if v.get("eos_lane"):
            # Base size: 18 post-norm sublayers drown the position in dimension k. Keep it a
            # lane: no embedding or sublayer output writes to k, and each layer norm passes
            # it on with scale eos_lane, bias 0 (the small fixtures do not set this).
            for name, a in p.items():
                if name in ("Wemb", "encoder_Wemb", "decoder_Wemb"):
                    a[:, k] = 0.0
                elif re.search(r"_(Wo|bo|W2|b2)$", name):
                    a[:, k] = 0.0
                elif name.endswith("_ln_scale") or name.endswith("_ln_scale_pre"):
                    a[0, k] = np.float32(v["eos_lane"])
                elif name.endswith("_ln_bias") or name.endswith("_ln_bias_pre"):
                    a[0, k] = 0.0
        out = p.get("decoder_ff_logit_out_W")
        if out is not None:
            out[k, 0] -= np.float32(v["eos_pos"])
        else:
            p["Wemb" if "Wemb" in p else "decoder_Wemb"][0, k] -= np.float32(v["eos_pos"])
    p["decoder_ff_logit_out_b"] = b
    return p


def model_config(v, v_src, v_tgt):
    cfg = dict(MODEL_YML_DEFAULTS)
    cfg.update({"dim-emb": v["dim"], "transformer-heads": v["heads"], "transformer-dim-ffn": v["ffn"],
                "transformer-dim-aan": v["ffn"], "enc-depth": v["enc"], "dec-depth": v["dec"],
                "dim-vocabs": [v_src, v_tgt]})
    cfg.update(v.get("marian", {}))
    return cfg


def write_marian_dir(outdir, v, cfg, params, vocabs, extra_files=()):
    """vocabs: list of (file name, text) (one entry when both sides share the file)."""
    os.makedirs(outdir, exist_ok=True)
    yml = model_yml_text(cfg).encode("utf-8")
    assert yaml.safe_load(yml) == cfg, "model.yml does not round-trip"
    arrays = sorted(params.items())
    arrays.append(("special:model.yml", np.frombuffer(yml + b"\0", dtype=np.int8)))
    write_atomic(os.path.join(outdir, v.get("model_file", "model.npz")), npz_bytes(arrays))
    for name, text in vocabs:
        write_atomic(os.path.join(outdir, name), text.encode("utf-8"))
    dec = ("models:\n  - %s\nvocabs:\n  - %s\n  - %s\nbeam-size: 6\nnormalize: 0.6\n"
           "word-penalty: 0\nmini-batch: 16\nmaxi-batch: 100\nmaxi-batch-sort: src\n"
           "relative-paths: true\n") % (v.get("model_file", "model.npz"), v["vocab_files"][0],
                                        v["vocab_files"][1])
    write_atomic(os.path.join(outdir, "decoder.yml"), dec.encode("utf-8"))
    for src, name in extra_files:
        shutil.copyfile(src, os.path.join(outdir, name))


# ---------------------------------------------------------------------------------------------
# The Hugging Face form of the first variant (transformers' convert_marian_to_pytorch.py layout).

def sinusoid(n_pos, dim):
    """Marian's / transformers' static table: [sin of all even-index angles | cos of all odd]."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    rates = np.power(10000.0, 2 * (np.arange(dim) // 2) / dim)[None, :]
    ang = pos / rates
    out = np.zeros((n_pos, dim))
    half = dim // 2 + dim % 2
    out[:, :half] = np.sin(ang[:, 0::2])
    out[:, half:] = np.cos(ang[:, 1::2])
    return out.astype(np.float32)


def write_hf_dir(outdir, v, cfg, params, tokens, src_spm, tgt_spm):
    os.makedirs(outdir, exist_ok=True)
    d, V = v["dim"], len(tokens)
    pad = V                                       # <pad> appended, as transformers' converter does
    wemb = np.concatenate([params["Wemb"], np.zeros((1, d), np.float32)])
    bias = np.concatenate([params["decoder_ff_logit_out_b"], np.zeros((1, 1), np.float32)], axis=1)
    max_pos = 512
    pos = sinusoid(max_pos, d)
    t = [("model.shared.weight", wemb), ("model.encoder.embed_tokens.weight", wemb),
         ("model.decoder.embed_tokens.weight", wemb), ("lm_head.weight", wemb),
         ("final_logits_bias", bias),
         ("model.encoder.embed_positions.weight", pos), ("model.decoder.embed_positions.weight", pos)]
    names = {"self_W%s": "self_attn.%s_proj.weight", "self_b%s": "self_attn.%s_proj.bias",
             "context_W%s": "encoder_attn.%s_proj.weight", "context_b%s": "encoder_attn.%s_proj.bias"}
    for side, n in (("encoder", cfg["enc-depth"]), ("decoder", cfg["dec-depth"])):
        for i in range(n):
            mp, hp = "%s_l%d_" % (side, i + 1), "model.%s.layers.%d." % (side, i)
            blocks = ["self"] + (["context"] if side == "decoder" else [])
            for blk in blocks:
                for m, hm in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out")):
                    t.append((hp + names[blk + "_W%s"] % hm, params[mp + blk + "_W" + m].T))
                    t.append((hp + names[blk + "_b%s"] % hm, params[mp + blk + "_b" + m][0]))
                lnn = "self_attn_layer_norm" if blk == "self" else "encoder_attn_layer_norm"
                t.append((hp + lnn + ".weight", params[mp + blk + "_Wo_ln_scale"][0]))
                t.append((hp + lnn + ".bias", params[mp + blk + "_Wo_ln_bias"][0]))
            t.append((hp + "fc1.weight", params[mp + "ffn_W1"].T))
            t.append((hp + "fc1.bias", params[mp + "ffn_b1"][0]))
            t.append((hp + "fc2.weight", params[mp + "ffn_W2"].T))
            t.append((hp + "fc2.bias", params[mp + "ffn_b2"][0]))
            t.append((hp + "final_layer_norm.weight", params[mp + "ffn_ffn_ln_scale"][0]))
            t.append((hp + "final_layer_norm.bias", params[mp + "ffn_ffn_ln_bias"][0]))
    write_atomic(os.path.join(outdir, "model.safetensors"),
                 safetensors_bytes(t, {"format": "pt"}))
    n_enc, n_dec = cfg["enc-depth"], cfg["dec-depth"]
    config = {
        "activation_dropout": 0.0, "activation_function": cfg["transformer-ffn-activation"],
        "architectures": ["MarianMTModel"], "attention_dropout": 0.0,
        "bad_words_ids": [[pad]], "bos_token_id": 0, "classifier_dropout": 0.0,
        "d_model": d, "decoder_attention_heads": v["heads"], "decoder_ffn_dim": v["ffn"],
        "decoder_layerdrop": 0.0, "decoder_layers": n_dec, "decoder_start_token_id": pad,
        "decoder_vocab_size": V + 1, "dropout": 0.1, "encoder_attention_heads": v["heads"],
        "encoder_ffn_dim": v["ffn"], "encoder_layerdrop": 0.0, "encoder_layers": n_enc,
        "eos_token_id": 0, "forced_eos_token_id": 0, "init_std": 0.02,
        "is_encoder_decoder": True, "max_length": 512, "max_position_embeddings": max_pos,
        "model_type": "marian", "normalize_before": False, "normalize_embedding": False,
        "num_beams": 4, "num_hidden_layers": n_enc, "pad_token_id": pad,
        "scale_embedding": True, "share_encoder_decoder_embeddings": True,
        "static_position_embeddings": True, "tie_word_embeddings": True,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": V + 1,
    }
    write_atomic(os.path.join(outdir, "config.json"),
                 (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    gen = {"bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad,
           "eos_token_id": 0, "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4,
           "pad_token_id": pad}
    write_atomic(os.path.join(outdir, "generation_config.json"),
                 (json.dumps(gen, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    vocab = {tok: i for i, tok in enumerate(tokens)}
    vocab["<pad>"] = pad
    write_atomic(os.path.join(outdir, "vocab.json"),
                 (json.dumps(vocab, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    tok_cfg = {"eos_token": "</s>", "model_max_length": 512, "pad_token": "<pad>",
               "separate_vocabs": False, "source_lang": "en", "target_lang": "fr",
               "tokenizer_class": "MarianTokenizer", "unk_token": "<unk>"}
    write_atomic(os.path.join(outdir, "tokenizer_config.json"),
                 (json.dumps(tok_cfg, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    special = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    write_atomic(os.path.join(outdir, "special_tokens_map.json"),
                 (json.dumps(special, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    shutil.copyfile(src_spm, os.path.join(outdir, "source.spm"))
    shutil.copyfile(tgt_spm, os.path.join(outdir, "target.spm"))
