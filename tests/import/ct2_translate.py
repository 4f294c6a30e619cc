#!/usr/bin/python3
"""ct2_translate.py -- translate piece lines with CTranslate2: the peer of our decoding benchmark.

    ct2_translate.py DIR [--compute-type float32|int8|int8_float32] [--beam N] [--batch-size N]
                     [--threads N] [--max-length N] [--ct2 /work/ct2] < src.pieces > out.pieces

DIR is an OPUS-MT / Marian model directory (decoder.yml, model .npz, vocabularies). It is
converted once with ctranslate2.converters.OpusMTConverter and cached under
$XDG_CACHE_HOME/ct2-opusmt/ (keyed by the directory's path and its files' sizes and times).
Input: one line of SentencePiece pieces per sentence (spm_encode --output_format piece);
output: the best hypothesis's pieces, one line per input line, in order. The time of loading
and of translating, and tokens per second, go to stderr.

CTranslate2 spins its OpenMP threads while waiting; on a busy machine --threads 1 (or
OMP_WAIT_POLICY=PASSIVE in the environment) is much faster than 2.
"""

import argparse
import hashlib
import os
import sys
import time


def ensure_env(ct2):
    if os.environ.get("CT2_TRANSLATE_ENV") == ct2:
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ct2, "src", "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    libs = "/usr/lib/x86_64-linux-gnu/openblas-pthread:" + os.path.join(ct2, "install", "lib")
    env["LD_LIBRARY_PATH"] = libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["CT2_TRANSLATE_ENV"] = ct2
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def cache_dir(model_dir):
    h = hashlib.sha256(os.path.abspath(model_dir).encode())
    for f in sorted(os.listdir(model_dir)):
        st = os.stat(os.path.join(model_dir, f))
        h.update(("%s %d %d\n" % (f, st.st_size, st.st_mtime_ns)).encode())
    base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(base, "ct2-opusmt", h.hexdigest()[:16])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--compute-type", default="float32")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    ap.add_argument("--threads", type=int, default=2, help="intra_threads")
    ap.add_argument("--max-length", type=int, default=256, help="max_decoding_length")
    ap.add_argument("--ct2", default=os.environ.get("CT2DIR", "/work/ct2"))
    args = ap.parse_args()
    ensure_env(os.path.abspath(args.ct2))
    import ctranslate2

    t0 = time.perf_counter()
    out = cache_dir(args.dir)
    if not os.path.exists(os.path.join(out, "model.bin")):
        ctranslate2.converters.OpusMTConverter(args.dir).convert(out + ".tmp", force=True)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        os.replace(out + ".tmp", out)
    tr = ctranslate2.Translator(out, device="cpu", compute_type=args.compute_type,
                                inter_threads=1, intra_threads=args.threads)
    t1 = time.perf_counter()
    c1 = time.process_time()
    lines = [l.split() for l in sys.stdin.read().split("\n")]
    if lines and lines[-1] == []:
        lines.pop()
    res = tr.translate_batch(lines, beam_size=args.beam, max_batch_size=args.batch_size,
                             max_decoding_length=args.max_length)
    t2 = time.perf_counter()
    c2 = time.process_time()
    n_out = 0
    w = sys.stdout
    for r in res:
        hyp = r.hypotheses[0]
        n_out += len(hyp) + 1
        w.write(" ".join(hyp) + "\n")
    w.flush()
    print("ct2_translate: ctranslate2 %s, %s, beam %d, batch %d, threads %d: load %.3f s, "
          "translate %d lines %.3f s wall %.3f s cpu, %.1f output tokens/s (with </s>)" % (
              ctranslate2.__version__, args.compute_type, args.beam, args.batch_size, args.threads,
              t1 - t0, len(lines), t2 - t1, c2 - c1, n_out / max(t2 - t1, 1e-9)), file=sys.stderr)


if __name__ == "__main__":
    main()
