#!/usr/bin/python3
"""torch_parity.py -- the PyTorch half of the training-parity harness.

    torch_parity.py --reference ../shared/reference --run DIR [--tol-loss 1e-3] [--tol-weights 1e-3]

DIR is what tests/tools/parity wrote: init.safetensors (tfm's freshly
initialised weights), batches.tsv (the batches of each update, in order),
steps.tsv (tfm's loss of each update) and final.safetensors (tfm's weights
after the last update).  This script loads the initial weights into the
reference's TransformerNMT (torch_ref.py: torch.nn.Transformer, post-norm,
shared embeddings), trains it on the same batches with the same recipe
(label-smoothed cross-entropy over real tokens, Adam 0.9/0.98/1e-9, the Noam
schedule with factor and warm-up), dropout 0, and compares:

  * the loss of every update, relative: |tfm - torch| / torch (--tol-loss);
  * every weight after the last update, as max |tfm - torch| over the largest
    magnitude of any weight (--tol-weights); and, for information, over the
    sum of the learning rates of the updates: Adam moves a weight by about lr
    per update at most, so this says how much of the way the two could have
    parted they did part (up to about a quarter, in FFN weights).  A weight whose gradient is near zero is where the
    two part most: Adam divides by the gradient's own size and turns rounding
    into steps.  The keys' bias is the extreme case: its gradient is zero in
    exact arithmetic (softmax(q.(k + b)) = softmax(q.k)), so both sides step
    it by rounding noise alone; it is shown, and counted like the others.

Prints one line per update and per tensor group, and "parity: ok" or
"parity: FAILED (...)"; exits 1 on failure.  Ids are tfm's (pad 0, <s> 2,
</s> 3): only pad's id matters to the reference's model, and it is 0 on both
sides.
"""
import argparse
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

TFM_PAD, TFM_BOS, TFM_EOS = 0, 2, 3


def read_safetensors(path):
    """{name: float32 numpy array} and the metadata of a safetensors file."""
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop('__metadata__', {})
    out = {}
    for name, t in header.items():
        assert t['dtype'] == 'F32', (name, t['dtype'])
        a, b = t['data_offsets']
        out[name] = np.frombuffer(data[a:b], dtype='<f4').reshape(t['shape']).copy()
    return out, meta


def to_reference_names(w, n_enc, n_dec):
    """tfm's (fairseq-style) tensor names -> TransformerNMT's state_dict names."""
    sd = {'emb.weight': w['encoder.embed_tokens.weight']}

    def attn(dst, src):
        sd[dst + '.in_proj_weight'] = np.concatenate([w[src + '.%s_proj.weight' % x] for x in 'qkv'])
        sd[dst + '.in_proj_bias'] = np.concatenate([w[src + '.%s_proj.bias' % x] for x in 'qkv'])
        sd[dst + '.out_proj.weight'] = w[src + '.out_proj.weight']
        sd[dst + '.out_proj.bias'] = w[src + '.out_proj.bias']

    def lin(dst, src):
        sd[dst + '.weight'] = w[src + '.weight']
        sd[dst + '.bias'] = w[src + '.bias']

    for i in range(n_enc):
        d, s = 'transformer.encoder.layers.%d' % i, 'encoder.layers.%d' % i
        attn(d + '.self_attn', s + '.self_attn')
        lin(d + '.norm1', s + '.self_attn_layer_norm')
        lin(d + '.linear1', s + '.fc1')
        lin(d + '.linear2', s + '.fc2')
        lin(d + '.norm2', s + '.final_layer_norm')
    for i in range(n_dec):
        d, s = 'transformer.decoder.layers.%d' % i, 'decoder.layers.%d' % i
        attn(d + '.self_attn', s + '.self_attn')
        lin(d + '.norm1', s + '.self_attn_layer_norm')
        attn(d + '.multihead_attn', s + '.encoder_attn')
        lin(d + '.norm2', s + '.encoder_attn_layer_norm')
        lin(d + '.linear1', s + '.fc1')
        lin(d + '.linear2', s + '.fc2')
        lin(d + '.norm3', s + '.final_layer_norm')
    return sd


def read_batches(path):
    """[[(src ids, tgt ids), ...] per update], in order."""
    batches = []
    with open(path) as f:
        for line in f:
            step, src, tgt = line.rstrip('\n').split('\t')
            step = int(step)
            while len(batches) < step:
                batches.append([])
            batches[step - 1].append(([int(x) for x in src.split()], [int(x) for x in tgt.split()]))
    return batches


def read_steps(path):
    with open(path) as f:
        head = f.readline().split()
        return [dict(zip(head, map(float, line.split()))) for line in f]


def batch_tensors(batch):
    """src [B, S] (with tfm's </s>), decoder input [B, T] (<s> + target), output [B, T] (target + </s>)."""
    B = len(batch)
    S = max(len(s) for s, _ in batch)
    T = max(len(t) for _, t in batch) + 1
    src = torch.full((B, S), TFM_PAD, dtype=torch.long)
    tin = torch.full((B, T), TFM_PAD, dtype=torch.long)
    tout = torch.full((B, T), TFM_PAD, dtype=torch.long)
    for i, (s, t) in enumerate(batch):
        src[i, :len(s)] = torch.tensor(s)
        tin[i, :len(t) + 1] = torch.tensor([TFM_BOS] + t)
        tout[i, :len(t) + 1] = torch.tensor(t + [TFM_EOS])
    return src, tin, tout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--reference', required=True, help='the folder of torch_ref.py')
    ap.add_argument('--run', required=True, help="the folder tests/tools/parity wrote")
    ap.add_argument('--lr-factor', type=float, default=0.3)
    ap.add_argument('--warmup', type=int, default=150)
    ap.add_argument('--label-smoothing', type=float, default=0.1)
    ap.add_argument('--tol-loss', type=float, default=1e-3, help='relative, per update')
    ap.add_argument('--tol-weights', type=float, default=1e-3,
                    help='of the largest magnitude, per tensor and over the model')
    ap.add_argument('--threads', type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.reference))
    import torch_ref as R

    torch.set_num_threads(args.threads)
    init, meta = read_safetensors(os.path.join(args.run, 'init.safetensors'))
    final, _ = read_safetensors(os.path.join(args.run, 'final.safetensors'))
    cfg = {k: int(meta[k]) for k in ('src_vocab_size', 'd_model', 'd_ff', 'n_heads',
                                     'n_encoder_layers', 'n_decoder_layers')}
    assert meta.get('norm') == 'post' and meta.get('positions') == 'sinusoidal' \
        and meta.get('shared_embeddings') == 'true', 'the reference is post-norm, sinusoidal, shared'
    model = R.TransformerNMT(cfg['src_vocab_size'], cfg['d_model'], cfg['n_heads'], cfg['d_ff'],
                             cfg['n_encoder_layers'], cfg['n_decoder_layers'], dropout=0.0)
    sd = to_reference_names(init, cfg['n_encoder_layers'], cfg['n_decoder_layers'])
    own = model.state_dict()
    missing = set(own) - set(sd)
    assert not missing, 'no tfm tensor for %s' % sorted(missing)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    model.train()

    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    noam = R.noam_lambda(cfg['d_model'], args.warmup)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s0: args.lr_factor * noam(s0))
    batches = read_batches(os.path.join(args.run, 'batches.tsv'))
    steps = read_steps(os.path.join(args.run, 'steps.tsv'))
    assert len(batches) == len(steps)

    failures = []
    worst_loss = 0.0
    lr_sum = 0.0
    print('update  sentences  tokens      loss tfm     loss torch    rel. diff')
    for i, (batch, tfm) in enumerate(zip(batches, steps)):
        src, tin, tout = batch_tensors(batch)
        assert int(tout.ne(TFM_PAD).sum()) == int(tfm['tgt_tokens'])
        lr_sum += opt.param_groups[0]['lr']
        logits = model(src, tin)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tout.view(-1),
                               ignore_index=TFM_PAD, label_smoothing=args.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        rel = abs(tfm['loss'] - loss.item()) / abs(loss.item())
        worst_loss = max(worst_loss, rel)
        print('%6d  %9d  %6d  %12.7f  %12.7f  %11.2e' % (i + 1, len(batch), int(tfm['tgt_tokens']),
                                                       tfm['loss'], loss.item(), rel))
    if worst_loss > args.tol_loss:
        failures.append('a loss differs by %.2e relative (tolerance %.0e)' % (worst_loss, args.tol_loss))

    # The weights after the last update, per kind of tensor (layers together).
    trained = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    final_ref = to_reference_names(final, cfg['n_encoder_layers'], cfg['n_decoder_layers'])
    largest = max(float(np.abs(v).max()) for v in trained.values())
    D = cfg['d_model']
    groups = {}
    for name, ours in final_ref.items():
        theirs = trained[name]
        parts = [(name, ours, theirs)]
        if name.startswith('transformer.') and '.in_proj_' in name:
            parts = [(name + '[%s]' % x, ours[j * D:(j + 1) * D], theirs[j * D:(j + 1) * D])
                     for j, x in enumerate('qkv')]
        for pname, a, b in parts:
            kind = re.sub(r'layers\.\d+\.', 'layers.*.', pname.replace('transformer.', ''))
            diff = float(np.abs(a - b).max())
            g = groups.setdefault(kind, [0.0, 0.0])
            g[0] = max(g[0], diff)
            g[1] = max(g[1], float(np.abs(b).max()))
    print('\nweights after %d updates: max |tfm - torch|, absolute, of the largest weight (%.3g),'
          '\nand of the sum of the rates (%.3g: Adam moves a weight by at most about that much)'
          % (len(steps), largest, lr_sum))
    print('%-48s %10s %10s %10s' % ('tensor', 'absolute', 'of largest', 'of rates'))
    worst = worst_moved = 0.0
    for kind in sorted(groups):
        diff, own = groups[kind]
        note = '  (its gradient is 0 but for rounding)' if kind.endswith('in_proj_bias[k]') else ''
        print('%-48s %10.2e %10.2e %10.2e%s' % (kind, diff, diff / largest, diff / lr_sum, note))
        worst = max(worst, diff / largest)
        worst_moved = max(worst_moved, diff / lr_sum)
    print('largest weight difference: %.2e of the largest weight, %.2e of the sum of the rates'
          % (worst, worst_moved))
    print('largest loss difference: %.2e relative' % worst_loss)
    if worst > args.tol_weights:
        failures.append('a weight differs by %.2e of the largest weight (tolerance %.0e)'
                        % (worst, args.tol_weights))
    if failures:
        print('parity: FAILED (%s)' % '; '.join(failures))
        return 1
    print('parity: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
