"""torch_train.py - the peer of 'train' in tests/bench/train.sh: the same
Transformer trained with PyTorch's nn.Transformer on the same batch shape,
so the two rates can be put side by side.

The model follows train's: post-norm layers (norm_first=False), ReLU FFN,
dropout 0.1, sinusoidal positions, embeddings scaled by sqrt(d_model) and
shared by source, target and the output projection, label-smoothed (0.1)
cross-entropy, Adam (0.9, 0.98, 1e-9) with the warm-up schedule.  One
difference nn.Transformer imposes: a final LayerNorm after each stack.

Every batch holds BATCH pairs whose source is LEN ids followed by </s> and
whose target is LEN ids (the decoder reads <s> + target and predicts target
+ </s>), as train's batches of fixed-length pairs do.

Prints one line: torch_train threads=T tokens_per_s X cpu_tokens_per_s Y
(target tokens per wall second and per CPU second, over the timed steps).

Usage: python3 torch_train.py --d-model 256 --d-ff 1024 --heads 4 --layers 3
           --vocab 8000 --batch 163 --len 24 --steps 5 --threads 2
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--d-ff", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=163)
    ap.add_argument("--len", type=int, default=24)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup-steps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    D, V, B, L = a.d_model, a.vocab, a.batch, a.len
    PAD, BOS, EOS = 0, 2, 3

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, D, padding_idx=PAD)
            nn.init.normal_(self.embed.weight, 0, D ** -0.5)
            self.tf = nn.Transformer(d_model=D, nhead=a.heads, num_encoder_layers=a.layers,
                                     num_decoder_layers=a.layers, dim_feedforward=a.d_ff,
                                     dropout=0.1, batch_first=True)
            pos = torch.arange(1024).unsqueeze(1)
            div = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
            pe = torch.zeros(1024, D)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)
            self.register_buffer("pe", pe)
            self.drop = nn.Dropout(0.1)

        def embed_seq(self, ids):
            return self.drop(self.embed(ids) * math.sqrt(D) + self.pe[: ids.shape[1]])

        def forward(self, src, tgt_in):
            mask = self.tf.generate_square_subsequent_mask(tgt_in.shape[1])
            h = self.tf(self.embed_seq(src), self.embed_seq(tgt_in), tgt_mask=mask)
            return h @ self.embed.weight.t()

    model = Model()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(2)

    def batch():
        src = torch.randint(4, V, (B, L + 1), generator=g)
        src[:, -1] = EOS
        tgt = torch.randint(4, V, (B, L), generator=g)
        tgt_in = torch.cat([torch.full((B, 1), BOS), tgt], 1)
        labels = torch.cat([tgt, torch.full((B, 1), EOS)], 1)
        return src, tgt_in, labels

    def step(i):
        src, tgt_in, labels = batch()
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=PAD,
                               label_smoothing=0.1, reduction="sum")
        opt.zero_grad()
        (loss / labels.numel()).backward()
        for grp in opt.param_groups:
            grp["lr"] = D ** -0.5 * min((i + 1) ** -0.5, (i + 1) * 4000 ** -1.5)
        opt.step()

    for i in range(a.warmup_steps):
        step(i)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(a.steps):
        step(a.warmup_steps + i)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = a.steps * B * (L + 1)
    print("torch_train threads=%d tokens_per_s %.1f cpu_tokens_per_s %.1f torch=%s"
          % (a.threads, tokens / wall, tokens / cpu, torch.__version__))


if __name__ == "__main__":
    main()
