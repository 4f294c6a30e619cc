# train_lib.sh - what the training benchmarks (train.sh, train_mpi.sh,
# train_netns.sh) share, sourced by them from the top of the tree: the
# same random data, and the rates read from a train --log file.

# The data: V ids, every line LEN long, batches of BATCH_TOKENS tokens.
V=8000 LEN=24 BATCH_TOKENS=4096

# ids N SEED: N random id lines, LEN ids each from 4 .. V-1, from a seeded
# awk generator.
ids() {
    awk -v n="$1" -v L=$LEN -v V=$V -v seed="$2" 'BEGIN { srand(seed)
        for (i = 0; i < n; i++) { s = ""
            for (k = 0; k < L; k++) s = s (k ? " " : "") (4 + int(rand() * (V - 4)))
            print s } }'
}
# rate LOG: target tokens per second over the updates after the first (the
# warm-up).
rate() {
    awk -F'\t' '$8 == "train" { if ($1 == 1) e0 = $7; else { tok += $11; e = $7 } }
                END { if (e > e0) printf "%.1f", tok / (e - e0) }' "$1"
}
# update_seconds LOG: seconds per update after the first.
update_seconds() {
    awk -F'\t' '$8 == "train" { if ($1 == 1) e0 = $7; else { n++; e = $7 } }
                END { if (n) printf "%.3f", (e - e0) / n }' "$1"
}
