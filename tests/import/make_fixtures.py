#!/usr/bin/python3
"""make_fixtures.py -- synthetic OPUS-MT (Marian) model directories and CTranslate2's outputs on them.

No real OPUS-MT model can be downloaded here, so this script makes small ones: random weights
under Marian's exact tensor names and `special:model.yml` keys, SentencePiece models trained on
the enfr corpus with Debian's spm_train, Marian YAML vocabularies, decoder.yml; then it asks
CTranslate2 (an independent implementation of Marian's Transformer) what they translate to.
Those outputs are the fixtures `train import` and the decoders are checked against.

    python3 tests/import/make_fixtures.py --ct2 /work/ct2      # everything, as committed
    python3 tests/import/make_fixtures.py                      # models only (no CTranslate2)
    python3 tests/import/make_fixtures.py --base OUTDIR        # one base-sized model (not committed)
    python3 tests/import/make_fixtures.py --small OUTDIR       # one small model to fine-tune (not committed)
    python3 tests/import/make_fixtures.py --ct2 /work/ct2 --tune VARIANT   # EOS-bias sweep

Everything but CTranslate2's scores is a function of --seed: running it again gives the same
bytes (the zip members of model.npz carry a fixed date; spm_train runs with a fixed seed and
fixed relative input names, which it records in the model). See tests/import/README.md.

This file holds what the fixtures are and how they are made: the variants, the corpus and
its SentencePiece models, the source lines, CTranslate2's runs and their expected/ files, the
building of each directory, and the command line. The bytes of a model directory (model.yml,
.npz, vocabularies, weights, decoder.yml, the Hugging Face form) are written by
marian_files.py, next to this file.
"""

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True     # no __pycache__ next to the script for the import below
from marian_files import (check_vocab_file, marian_params, marian_vocab,  # noqa: E402
                          model_config, vocab_yml_text, write_atomic, write_hf_dir,
                          write_marian_dir)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_OUT = os.path.join(ROOT, "tests", "data", "opus-mt")
DEFAULT_DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "enfr"))
DEFAULT_WORK = "/tmp/opusmt-fixtures-work"

SEED = 20261128
N_TEST_LINES = 200          # first lines of test.en
SPM_TRAIN_LINES = 50000     # first lines of train.en / train.fr for the small spm models
MAX_DECODING_LENGTH = 256
ATT_MAX_OUT, ATT_MAX_SRC = 30, 40   # greedy.attention only for outputs/sources up to these
INTRA_THREADS = 1           # see README: 2 gives the same outputs, 25x slower on a busy 2-vCPU machine
LANG_TOKENS = [">>fra<<", ">>deu<<", ">>spa<<"]

# ---------------------------------------------------------------------------------------------
# The variants. Every key of a variant's "marian" dict overrides the model.yml defaults
# (MODEL_YML_DEFAULTS in marian_files.py).
# eos_bias: the offset added to decoder_ff_logit_out_b[0] (</s>), tuned with --tune so that
# CTranslate2's greedy outputs mostly end by themselves after 5-30 tokens.

VARIANTS = {
    "postnorm-swish-tiedall": dict(
        index=1, spm="joint-uni", vocab="joint",
        dim=32, heads=4, ffn=64, enc=2, dec=2, eos_bias=-8.0, emb_std=0.3, eos_pos=20.0,
        model_file="opus.spm32k-spm32k.transformer-align.model1.npz.best-perplexity.npz",
        vocab_files=["opus.spm32k-spm32k.vocab.yml", "opus.spm32k-spm32k.vocab.yml"],
        marian={"transformer-preprocess": "", "transformer-postprocess": "dan",
                "transformer-postprocess-emb": "d", "transformer-postprocess-top": "",
                "transformer-ffn-activation": "swish", "transformer-aan-activation": "swish",
                "tied-embeddings-all": True, "tied-embeddings": False,
                "transformer-guided-alignment-layer": "last"},
        hf=True, int8=True, attention=True,
        what="the common OPUS-MT shape: post-norm (preprocess '', postprocess dan), embeddings "
             "postprocess d (no norm), swish, one joint vocabulary with Wemb shared by encoder, "
             "decoder and output layer (tied-embeddings-all), alignment layer = last; Marian's "
             "long OPUS-MT file names in decoder.yml"),
    "prenorm-relu-tiedtarget": dict(
        index=2, spm="sep-uni", vocab="sep",
        dim=32, heads=4, ffn=64, enc=3, dec=1, eos_bias=16.0, emb_std=0.3, eos_pos=40.0,
        model_file="model.npz",
        vocab_files=["opus.spm600.en.vocab.yml", "opus.spm600.fr.vocab.yml"],
        marian={"transformer-preprocess": "n", "transformer-postprocess": "da",
                "transformer-postprocess-emb": "", "transformer-postprocess-top": "n",
                "transformer-ffn-activation": "relu", "transformer-aan-activation": "relu",
                "tied-embeddings-all": False, "tied-embeddings": True,
                "transformer-guided-alignment-layer": "last"},
        what="pre-norm (preprocess n, postprocess da, postprocess-top n: a final layer norm on "
             "both stacks, encoder_top_ln_* / decoder_top_ln_*, and the *_ln_*_pre names), relu, "
             "3 encoder layers and 1 decoder layer, a vocabulary per side: encoder_Wemb for the "
             "source, decoder_Wemb shared by the decoder input and output (tied-embeddings)"),
    "postnorm-gelu-untied": dict(
        index=3, spm="sep-uni", vocab="sep",
        dim=32, heads=4, ffn=64, enc=2, dec=2, eos_bias=-14.0, emb_std=0.3, eos_pos=20.0,
        model_file="model.npz",
        vocab_files=["opus.spm600.en.vocab.yml", "opus.spm600.fr.vocab.yml"],
        marian={"transformer-preprocess": "", "transformer-postprocess": "dan",
                "transformer-postprocess-emb": "nd", "transformer-postprocess-top": "",
                "transformer-ffn-activation": "gelu", "transformer-aan-activation": "gelu",
                "tied-embeddings-all": False, "tied-embeddings": False,
                "transformer-guided-alignment-layer": "1"},
        what="post-norm with a layer norm on the embeddings (postprocess-emb nd: "
             "encoder_emb_ln_*_pre, decoder_emb_ln_*_pre), gelu (CTranslate2 runs Marian's gelu "
             "as x*sigmoid(1.702x)), no ties at all: encoder_Wemb, decoder_Wemb and "
             "decoder_ff_logit_out_W [d, V]; alignment layer 1 of 2"),
    "bpe-multilingual": dict(
        index=4, spm="sep-bpe", vocab="union+lang",
        dim=32, heads=2, ffn=64, enc=2, dec=2, eos_bias=-16.0, emb_std=0.3, eos_pos=20.0,
        model_file="opus+bt.spm32k-spm32k.transformer-align.model1.npz.best-perplexity.npz",
        vocab_files=["opus+bt.spm32k-spm32k.vocab.yml", "opus+bt.spm32k-spm32k.vocab.yml"],
        marian={"transformer-preprocess": "", "transformer-postprocess": "dan",
                "transformer-postprocess-emb": "d", "transformer-postprocess-top": "",
                "transformer-ffn-activation": "swish", "transformer-aan-activation": "swish",
                "tied-embeddings-all": True, "tied-embeddings": False,
                "transformer-guided-alignment-layer": "last"},
        lang_tokens=True,
        what="BPE SentencePiece models, one per side (source.spm != target.spm), and one "
             "vocabulary that is the union of both sides' pieces, as real OPUS-MT models have "
             "it, with the target-language tokens >>fra<< >>deu<< >>spa<< at ids 2-4 (in the "
             "Marian vocabulary only, not in either spm); each source line starts with one of "
             "them; 2 heads (head size 16); tied-embeddings-all"),
}

REFUSALS = {
    "ssru": dict(
        index=11, dim=16, heads=2, ffn=32, enc=1, dec=1, vocab_files=["vocab.yml", "vocab.yml"],
        marian={"transformer-decoder-autoreg": "rnn", "dec-cell": "ssru",
                "transformer-ffn-activation": "relu", "transformer-aan-activation": "relu",
                "tied-embeddings-all": True},
        what="a Bergamot-style student: the decoder's self-attention replaced by an SSRU "
             "(transformer-decoder-autoreg: rnn, dec-cell: ssru; decoder_l1_rnn_W/Wf/bf and "
             "decoder_l1_rnn_ffn_ln_* instead of decoder_l1_self_*)"),
    "no-projection": dict(
        index=12, dim=16, heads=2, ffn=32, enc=1, dec=1, vocab_files=["vocab.yml", "vocab.yml"],
        marian={"transformer-no-projection": True, "tied-embeddings-all": True},
        what="transformer-no-projection: true (no output projection Wo/bo after the attention)"),
    "factors": dict(
        index=13, dim=16, heads=2, ffn=32, enc=1, dec=1, vocab_files=["vocab.fsv", "vocab.fsv"],
        marian={"factors-combine": "sum", "factors-dim-emb": 0, "lemma-dim-emb": 0,
                "tied-embeddings-all": True},
        what="a factored vocabulary (Marian's .fsv factor spec: lemmas plus a capitalisation "
             "factor _c with |ca |ci |cn; factors-combine: sum); Wemb's rows are factor units, "
             "not words"),
}

SPM_SETS = {
    # name: list of (file stem, inputs, model_type, vocab_size)
    "joint-uni": [("joint-uni", ["en", "fr"], "unigram", 600)],
    "sep-uni": [("en-uni", ["en"], "unigram", 600), ("fr-uni", ["fr"], "unigram", 600)],
    "sep-bpe": [("en-bpe", ["en"], "bpe", 600), ("fr-bpe", ["fr"], "bpe", 600)],
}

# ---------------------------------------------------------------------------------------------
# Data and SentencePiece.

def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def prepare_data(data_dir, work):
    os.makedirs(work, exist_ok=True)
    for split in ("train.en", "train.fr", "test.en"):
        dst = os.path.join(work, split)
        if not os.path.exists(dst):
            src = os.path.join(data_dir, split)
            if os.path.exists(src):
                shutil.copyfile(src, dst + ".tmp")
            else:
                with open(dst + ".tmp", "wb") as f:
                    run(["xz", "-dc", src + ".xz"], stdout=f)
            os.replace(dst + ".tmp", dst)
    for lang in ("en", "fr"):
        dst = os.path.join(work, "%s.%dk" % (lang, SPM_TRAIN_LINES // 1000))
        if not os.path.exists(dst):
            with open(os.path.join(work, "train." + lang), encoding="utf-8") as f:
                lines = [next(f) for _ in range(SPM_TRAIN_LINES)]
            with open(dst, "w", encoding="utf-8") as f:
                f.writelines(lines)


def train_spm(work, stem, inputs, model_type, vocab_size, full=False, seed=SEED):
    """Train (or reuse) WORK/spm-STEM.model. spm_train records its input names and model
    prefix in the model, so both are relative names inside WORK, the same on every run."""
    prefix = "spm-" + stem
    model = os.path.join(work, prefix + ".model")
    args = ["spm_train",
            "--input=" + ",".join(("train.%s" % l) if full else ("%s.%dk" % (l, SPM_TRAIN_LINES // 1000))
                                  for l in inputs),
            "--model_prefix=" + prefix, "--vocab_size=%d" % vocab_size,
            "--model_type=" + model_type, "--random_seed=%d" % (seed % 2**32),
            "--num_threads=2", "--minloglevel=2"]
    if full:
        args += ["--input_sentence_size=2000000", "--shuffle_input_sentence=false"]
    stamp = model + ".args"
    if os.path.exists(model) and os.path.exists(stamp) and open(stamp).read() == " ".join(args):
        return model
    print("  spm_train %s (%s, %d)" % (stem, model_type, vocab_size), file=sys.stderr)
    run(args, cwd=work)
    with open(stamp, "w") as f:
        f.write(" ".join(args))
    return model


def spm_pieces(model):
    """The pieces of a SentencePiece model in id order, without its <unk>, <s>, </s>."""
    vocab = model[:-len(".model")] + ".vocab"
    out = []
    with open(vocab, encoding="utf-8") as f:
        for line in f:
            piece = line.rstrip("\n").split("\t")[0]
            if piece in ("<unk>", "<s>", "</s>"):
                continue
            out.append(piece)
    return out


def spm_encode(model, lines):
    p = run(["spm_encode", "--model", model, "--output_format", "piece"],
            input="".join(l + "\n" for l in lines).encode("utf-8"), stdout=subprocess.PIPE)
    out = p.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1, "spm_encode changed the line count"
    return out[:-1]


def spm_decode(model, piece_lines):
    p = run(["spm_decode", "--model", model, "--input_format", "piece"],
            input="".join(l + "\n" for l in piece_lines).encode("utf-8"), stdout=subprocess.PIPE)
    out = p.stdout.decode("utf-8").split("\n")
    assert out[-1] == "" and len(out) == len(piece_lines) + 1, "spm_decode changed the line count"
    return out[:-1]


# ---------------------------------------------------------------------------------------------
# Source lines.

def hostile_lines(test_lines):
    long_words = " ".join(test_lines[300:420]).split()
    long_line = " ".join(long_words[:104])          # ~300 pieces with a 600-piece model
    return [
        "",                                                  # empty
        "a",                                                 # one character
        long_line,                                           # long
        "!!! ??? ... ,;: -- () [] {} ** // \\\\ ||",         # punctuation only
        "0123456789 3.14159 1,000,000 -42 +7 1e10 0x1F",     # digits
        "\U0001F600 \U0001F389 \U0001F44D\U0001F3FD \U0001F1EB\U0001F1F7 \u2764\ufe0f",  # emoji
        "Ame\u0301lie a\u0300 la\u0300 n\u0303 e\u0308\u0301 \u0041\u030A",  # combining marks
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd \u0645\u0631\u062d\u0628\u0627 "
        "\u0628\u0627\u0644\u0639\u0627\u0644\u0645 (RTL)",  # right-to-left
        "abc\x01def\x1b[0m ghi\x7f jkl\x08",                 # control characters
        "left\tright\t\tend\t",                              # tabs
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",  # CJK
        "HTTP://EXAMPLE.COM/path?x=1&y=2 <b>bold</b> \"quoted\" 'single' %s %d %1$s",
        "   ",                                               # spaces only
        "a\u00a0b\u200bc\ufeffd\u2028e",                     # NBSP, zero-width, BOM, LS
        "Donaudampfschifffahrtsgesellschaftskapit\u00e4nswitwenrentenversicherung",  # long word
        "<s> </s> <unk> <pad> >>fra<< \u2581",               # special-looking text
        "yes no null true ~ : - # ' \" 123",                 # YAML-looking pieces
    ]


# ---------------------------------------------------------------------------------------------
# CTranslate2.

def ct2_env(ct2):
    env = dict(os.environ)
    py = os.path.join(ct2, "src", "python")
    libs = ["/usr/lib/x86_64-linux-gnu/openblas-pthread", os.path.join(ct2, "install", "lib")]
    env["PYTHONPATH"] = py + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["LD_LIBRARY_PATH"] = ":".join(libs + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    return env


def ensure_ct2(ct2):
    """Re-exec with CTranslate2's PYTHONPATH and LD_LIBRARY_PATH (the loader reads the latter
    at start-up only)."""
    if os.environ.get("MAKE_FIXTURES_CT2") == ct2:
        return
    env = ct2_env(ct2)
    env["MAKE_FIXTURES_CT2"] = ct2
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def ct2_convert(model_dir, out):
    import ctranslate2
    ctranslate2.converters.OpusMTConverter(model_dir).convert(out, force=True)


def ct2_translate(out, lines_tokens, beam, compute_type="float32", attention=False):
    import ctranslate2
    tr = ctranslate2.Translator(out, device="cpu", compute_type=compute_type,
                                inter_threads=1, intra_threads=INTRA_THREADS)
    res = []
    for toks in lines_tokens:       # one sentence per call: no padding across sentences
        r = tr.translate_batch([toks], beam_size=beam, max_decoding_length=MAX_DECODING_LENGTH,
                               return_scores=True, return_attention=attention)[0]
        res.append((r.hypotheses[0], r.scores[0], r.attention[0] if attention else None))
    return res


def fmt_score(s):
    return "%.6f" % s


def write_lines(path, lines):
    write_atomic(path, "".join(l + "\n" for l in lines).encode("utf-8"))


def expected_outputs(vdir, v, ct2_out, src_text, src_pieces, tgt_spm):
    import ctranslate2
    exp = os.path.join(vdir, "expected")
    os.makedirs(exp, exist_ok=True)
    write_lines(os.path.join(exp, "source.txt"), src_text)
    write_lines(os.path.join(exp, "source.pieces"), src_pieces)
    toks = [l.split() for l in src_pieces]
    summary = {}
    runs = [("greedy", 1, "float32"), ("beam4", 4, "float32")]
    if v.get("int8"):
        runs += [("int8-greedy", 1, "int8"), ("int8-beam4", 4, "int8")]
    for name, beam, ct in runs:
        att = v.get("attention") and name == "greedy"
        res = ct2_translate(ct2_out, toks, beam, ct, att)
        pieces = [" ".join(h) for h, _, _ in res]
        write_lines(os.path.join(exp, name + ".pieces"), pieces)
        write_lines(os.path.join(exp, name + ".scores"), [fmt_score(s) for _, s, _ in res])
        write_lines(os.path.join(exp, name + ".text"), spm_decode(tgt_spm, pieces))
        status = ["%d %d %s" % (len(t), len(h), "max" if len(h) >= MAX_DECODING_LENGTH else "ended")
                  for t, (h, _, _) in zip(toks, res)]
        write_lines(os.path.join(exp, name + ".status"), status)
        lens = [len(h) for h, _, _ in res]
        ended = sum(1 for l in lens if l < MAX_DECODING_LENGTH)
        summary[name] = dict(ended=ended, lines=len(res), mean_len=float(np.mean(lens)),
                             median_len=float(np.median(lens)),
                             ended_5_30=sum(1 for l in lens if 5 <= l <= 30))
        if att:
            rows = []
            for t, (h, _, a) in zip(toks, res):
                if len(h) > ATT_MAX_OUT or len(t) + 1 > ATT_MAX_SRC:
                    rows.append("-")        # kept small: long lines are left out
                    continue
                rows.append(" | ".join(" ".join("%.5g" % x for x in row) for row in a))
            write_lines(os.path.join(exp, "greedy.attention"), rows)
    return summary, ctranslate2.__version__


def expected_readme(vdir, v, summary, version, n_test, n_hostile):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import ctranslate2
    lines = [
        "# Expected outputs: CTranslate2 on this directory",
        "",
        "Made by tests/import/make_fixtures.py (see tests/import/README.md); do not edit by hand.",
        "",
        "- CTranslate2 %s (tag v4.8.1, commit 0d8bcd362ac75ef860ef161d6f0efad0ae439ff0), built from "
        "source by ../shared/tools/ct2_build.sh (OpenBLAS for float32, ruy for int8)" % version,
        "- date %s, %s, CPU: %s, compute types: %s" % (
            datetime.date.today().isoformat(), platform.machine(), cpu,
            " ".join(sorted(ctranslate2.get_supported_compute_types("cpu")))),
        "- conversion: ctranslate2.converters.OpusMTConverter(DIR).convert(OUT, force=True) "
        "(float32 weights; int8 is quantized at load time)",
        "- Translator(OUT, device='cpu', compute_type=float32 (int8 for int8-*), inter_threads=1, "
        "intra_threads=%d)" % INTRA_THREADS,
        "- translate_batch([tokens], beam_size=1 (greedy.*) or 4 (beam4.*), max_decoding_length=%d, "
        "return_scores=True%s), one sentence per call; every other option at CTranslate2's "
        "default: num_hypotheses=1, length_penalty=1, coverage_penalty=0, repetition_penalty=1, "
        "no_repeat_ngram_size=0, disable_unk=False, min_decoding_length=0, max_input_length=1024, "
        "return_end_token=False, sampling_topk=1" % (
            MAX_DECODING_LENGTH, ", return_attention=True for greedy" if v.get("attention") else ""),
        "- CTranslate2 appends </s> to every source (add_source_eos) and starts the decoder "
        "from a zero embedding (start_from_zero_embedding)",
        "",
        "Files, one line per source line:",
        "",
        "- source.txt: the raw source: the first %d lines of enfr test.en, then %d hostile "
        "lines (hostile_lines() in the script)" % (n_test, n_hostile),
        "- source.pieces: `spm_encode --model source.spm --output_format piece` of source.txt%s" % (
            "; then a target-language token (>>fra<<, >>deu<<, >>spa<< in turn) put first"
            if v.get("lang_tokens") else ""),
        "- NAME.pieces: the best hypothesis, pieces separated by spaces, without </s>",
        "- NAME.scores: its score: the sum of the token log-probabilities (the </s> step "
        "included) divided by the hypothesis length (without </s>) to the power length_penalty=1; "
        "an empty hypothesis gets -inf (CTranslate2 divides by 0)",
        "- NAME.status: `SOURCE_PIECES OUTPUT_PIECES ended|max` (SOURCE_PIECES without the </s> "
        "CTranslate2 appends; `max` = stopped by max_decoding_length)",
        "- NAME.text: `spm_decode --model target.spm --input_format piece` of NAME.pieces "
        "(informative only: pieces target.spm does not know come out as ' ⁇ ')",
    ]
    if v.get("attention"):
        lines.append("- greedy.attention: for each output piece, the attention over the source "
                     "positions (source pieces + </s>) of the alignment layer's first head "
                     "(CTranslate2's alignment_heads=1), rows separated by ' | ', values %%.5g; `-` for lines "
                     "with more than %d output pieces or %d source positions (left out to keep "
                     "the file small)" % (ATT_MAX_OUT, ATT_MAX_SRC))
    lines += ["", "Summary (lines that ended by themselves / all; mean and median output length):", ""]
    for name, s in summary.items():
        lines.append("- %s: %d/%d ended (%d with 5-30 pieces), mean %.1f, median %.1f" % (
            name, s["ended"], s["lines"], s["ended_5_30"], s["mean_len"], s["median_len"]))
    write_lines(os.path.join(vdir, "expected", "README.md"), lines)


# ---------------------------------------------------------------------------------------------
# Building the variants.

def variant_vocab(v, work):
    """Returns (src_tokens, tgt_tokens, src_spm, tgt_spm, vocab files [(name, text)])."""
    models = [train_spm(work, *spec) for spec in SPM_SETS[v["spm"]]]
    if len(models) == 1:
        models = models * 2
    src_spm, tgt_spm = models
    if v["vocab"] == "joint":
        toks = marian_vocab(spm_pieces(src_spm))
        return toks, toks, src_spm, tgt_spm, [(v["vocab_files"][0], vocab_yml_text(toks))]
    if v["vocab"] == "sep":
        s, t = marian_vocab(spm_pieces(src_spm)), marian_vocab(spm_pieces(tgt_spm))
        return s, t, src_spm, tgt_spm, [(v["vocab_files"][0], vocab_yml_text(s)),
                                        (v["vocab_files"][1], vocab_yml_text(t))]
    if v["vocab"] == "union+lang":
        toks = marian_vocab(spm_pieces(src_spm), spm_pieces(tgt_spm), front=LANG_TOKENS)
        return toks, toks, src_spm, tgt_spm, [(v["vocab_files"][0], vocab_yml_text(toks))]
    raise ValueError(v["vocab"])


def build_variant(name, v, out, work, seed):
    vdir = os.path.join(out, name)
    src, tgt, src_spm, tgt_spm, vocabs = variant_vocab(v, work)
    cfg = model_config(v, len(src), len(tgt))
    params = marian_params(v, cfg, len(src), len(tgt), seed)
    if os.path.isdir(vdir):
        for f in os.listdir(vdir):         # stale model files of an earlier layout
            if f.endswith(".npz") or f.endswith(".yml"):
                os.remove(os.path.join(vdir, f))
    write_marian_dir(vdir, v, cfg, params, vocabs,
                     [(src_spm, "source.spm"), (tgt_spm, "target.spm")])
    for fname, _ in vocabs:
        check_vocab_file(os.path.join(vdir, fname), src if fname == v["vocab_files"][0] else tgt)
    if v.get("hf"):
        write_hf_dir(os.path.join(out, name + "-hf"), v, cfg, params, tgt, src_spm, tgt_spm)
    return vdir, src_spm, tgt_spm


def fsv_text(pieces):
    """A Marian factor spec: lemmas (pieces, lower-cased, each once) with a capitalisation
    factor _c on those that have letters."""
    lines = ["# factors", "_lemma", "_c", "_has_c", "", "# factor distributions",
             "_lemma <->", "_c <-> _has_c", "", "# factor values",
             "ca : _c", "ci : _c", "cn : _c", "", "# lemmas",
             "</s> : _lemma", "<unk> : _lemma"]
    seen, n = set(), 2
    for p in pieces:
        lem = p.lower()
        if lem in seen or " " in lem or "|" in lem or lem.startswith("_") or lem.startswith("#"):
            continue
        seen.add(lem)
        n += 1
        lines.append("%s : _lemma%s" % (lem, " _has_c" if any(c.isalpha() for c in lem) else ""))
    return "\n".join(lines) + "\n", n + 3


def build_refusal(name, v, out, work, seed):
    vdir = os.path.join(out, name)
    spm = train_spm(work, *SPM_SETS["joint-uni"][0])
    toks = marian_vocab(spm_pieces(spm))
    n_units = None
    if v["vocab_files"][0].endswith(".fsv"):
        text, n_units = fsv_text(spm_pieces(spm))
        vocabs = [(v["vocab_files"][0], text)]
        nv = n_units
    else:
        vocabs = [(v["vocab_files"][0], vocab_yml_text(toks))]
        nv = len(toks)
    cfg = model_config(v, nv, nv)
    params = marian_params(v, cfg, nv, nv, seed, n_units)
    if os.path.isdir(vdir):
        for f in os.listdir(vdir):
            if f.endswith(".npz") or f.endswith(".yml") or f.endswith(".fsv"):
                os.remove(os.path.join(vdir, f))
    write_marian_dir(vdir, v, cfg, params, vocabs)
    return vdir


def refusal_expected(vdir, v, work):
    import ctranslate2
    try:
        ct2_convert(vdir, os.path.join(work, "ct2-refusal"))
        msg = "(no error: CTranslate2 converted it)"
        kind = "accepted"
    except Exception as e:  # noqa: BLE001 -- the message is the fixture
        msg, kind = str(e), type(e).__name__
    exp = os.path.join(vdir, "expected")
    os.makedirs(exp, exist_ok=True)
    lines = ["# Expected: refused",
             "",
             "What this directory is: %s." % v["what"],
             "",
             "`train import` must refuse it by name (DESIGN.md: a variant no option covers is "
             "refused, never approximated).",
             "",
             "CTranslate2 %s, `ctranslate2.converters.OpusMTConverter(DIR).convert(OUT, "
             "force=True)`, %s: it raised %s:" % (ctranslate2.__version__,
                                                  datetime.date.today().isoformat(), kind),
             "", "```"] + msg.split("\n") + ["```"]
    write_lines(os.path.join(exp, "README.md"), lines)
    write_lines(os.path.join(exp, "ct2.error"), ["%s: %s" % (kind, msg.replace("\n", " "))])
    return kind, msg


def source_lines(work):
    with open(os.path.join(work, "test.en"), encoding="utf-8") as f:
        test = f.read().split("\n")
    return test[:N_TEST_LINES], hostile_lines(test)


def source_pieces(v, src_spm, text):
    pieces = spm_encode(src_spm, text)
    if v.get("lang_tokens"):
        pieces = [(LANG_TOKENS[i % len(LANG_TOKENS)] + " " + p).strip()
                  for i, p in enumerate(pieces)]
    return pieces


def tune(name, v, out, work, seed, offsets):
    """Greedy decode the test lines for several EOS offsets; print how many end by themselves."""
    tmp = os.path.join(work, "tune")
    test, _ = source_lines(work)
    for off in offsets:
        vv = dict(v, eos_bias=off, hf=False)
        for kv in os.environ.get("TUNE_SET", "").split(","):
            if kv:
                vv[kv.split("=")[0]] = float(kv.split("=")[1])
        vdir, src_spm, _ = build_variant(name, vv, tmp, work, seed)
        ct2_out = os.path.join(work, "ct2-tune")
        ct2_convert(vdir, ct2_out)
        toks = [l.split() for l in source_pieces(v, src_spm, test)]
        res = ct2_translate(ct2_out, toks, 1)
        lens = np.array([len(h) for h, _, _ in res])
        print("%s eos_bias %5.2f: ended %3d/%d, 5-30: %3d, mean %.1f, median %.1f" % (
            name, off, (lens < MAX_DECODING_LENGTH).sum(), len(lens),
            ((lens >= 5) & (lens <= 30)).sum(), lens.mean(), np.median(lens)), flush=True)


def build_joint_model(outdir, work, seed, v, spm_stem, spm_size, what):
    """One model directory of variant v with one joint unigram SentencePiece model of spm_size
    pieces trained on the whole enfr training text, shared by both sides (tied-all)."""
    spm = train_spm(work, spm_stem, ["en", "fr"], "unigram", spm_size, full=True)
    toks = marian_vocab(spm_pieces(spm))
    cfg = model_config(v, len(toks), len(toks))
    params = marian_params(v, cfg, len(toks), len(toks), seed)
    write_marian_dir(outdir, v, cfg, params, [(v["vocab_files"][0], vocab_yml_text(toks))],
                     [(spm, "source.spm"), (spm, "target.spm")])
    check_vocab_file(os.path.join(outdir, v["vocab_files"][0]), toks)
    print("%s model written to %s (%d pieces)" % (what, outdir, len(toks)))


def build_base(outdir, work, seed, ct2):
    """One base-sized model (6+6, 512, 8 heads, 2048, swish, post-norm, tied-all, 32k joint)."""
    v = dict(VARIANTS["postnorm-swish-tiedall"])
    v.update(index=100, dim=512, heads=8, ffn=2048, enc=6, dec=6, eos_bias=BASE_EOS_BIAS,
             eos_pos=100.0, eos_lane=1.4, hf=False)
    build_joint_model(outdir, work, seed, v, "joint-uni-32k", 32000, "base")


def build_small(outdir, work, seed):
    """One model of the small preset's shape to fine-tune (make bench-import-quality): 3+3
    layers, 256, 4 heads, 1024, swish, post-norm, tied-all, an 8k joint unigram SentencePiece
    model of the whole enfr training text. Its weights are drawn to start training from
    (embeddings of std 1/sqrt(d), no EOS bias or lane): a user's fine-tuning stands in for the
    training OPUS-MT did."""
    v = dict(VARIANTS["postnorm-swish-tiedall"])
    v.update(index=101, dim=256, heads=4, ffn=1024, enc=3, dec=3, eos_bias=0.0,
             emb_std=1.0 / np.sqrt(256.0), eos_pos=0.0, hf=False)
    build_joint_model(outdir, work, seed, v, "joint-uni-8k", 8000, "small")


# With the EOS lane (marian_params) CTranslate2's greedy outputs of the first 64 test lines
# all end, mean 24.6 pieces, median 25 (bias 40 without the lane: 83% ended after one piece,
# the rest ran to 256).
BASE_EOS_BIAS = 35.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ct2", help="CTranslate2 build directory (ct2_build.sh's CT2DIR); "
                    "without it only the model directories are written")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--data", default=DEFAULT_DATA, help="the enfr corpus directory")
    ap.add_argument("--work", default=DEFAULT_WORK, help="scratch directory (corpus, spm models)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--only", action="append", help="only this variant (repeatable)")
    ap.add_argument("--base", metavar="OUTDIR", help="write one base-sized model there, and stop")
    ap.add_argument("--small", metavar="OUTDIR", help="write one small model to fine-tune there, "
                    "and stop")
    ap.add_argument("--tune", metavar="VARIANT", help="sweep the EOS bias of VARIANT, and stop")
    ap.add_argument("--offsets", default="0,3,6,9,12,15")
    args = ap.parse_args()

    if args.ct2:
        ensure_ct2(os.path.abspath(args.ct2))
    prepare_data(args.data, args.work)

    if args.tune:
        if not args.ct2:
            ap.error("--tune needs --ct2")
        tune(args.tune, VARIANTS[args.tune], args.out, args.work, args.seed,
             [float(x) for x in args.offsets.split(",")])
        return
    if args.base:
        build_base(os.path.abspath(args.base), args.work, args.seed, args.ct2)
        return
    if args.small:
        build_small(os.path.abspath(args.small), args.work, args.seed)
        return

    test, hostile = source_lines(args.work)
    text = test + hostile
    report = {}
    for name, v in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        print("%s" % name, file=sys.stderr)
        vdir, src_spm, tgt_spm = build_variant(name, v, args.out, args.work, args.seed)
        if args.ct2:
            ct2_out = os.path.join(args.work, "ct2-" + name)
            ct2_convert(vdir, ct2_out)
            summary, version = expected_outputs(vdir, v, ct2_out, text,
                                                source_pieces(v, src_spm, text), tgt_spm)
            expected_readme(vdir, v, summary, version, len(test), len(hostile))
            report[name] = summary
    for name, v in REFUSALS.items():
        if args.only and name not in args.only:
            continue
        print("%s" % name, file=sys.stderr)
        vdir = build_refusal(name, v, args.out, args.work, args.seed)
        if args.ct2:
            report[name] = refusal_expected(vdir, v, args.work)
    for name, r in report.items():
        print(name, r)


if __name__ == "__main__":
    main()
