#!/bin/sh
# test_netns.sh - across machines for real, between network namespaces of
# this host.  Three namespaces stand in for three machines: A (where mpirun
# and parallel are started), B and C, wired by veth links (A-B on
# 10.213.1.0/24, A-C on 10.213.2.0/24; nothing leaves the host), each with
# a host name of its own (a UTS namespace).
#
#   1. Training over TCP: mpirun in A starts rank 0 in A and rank 1 in B
#      (its launcher agent is a script that runs the daemon in B with `ip
#      netns exec`, where real hosts use ssh), Open MPI restricted to TCP
#      over the A-B link (`--mca btl tcp,self`, no shared memory): the model
#      of one process with --accum 2, bit for bit, and the gradient went
#      over the link (B's byte counter).
#   2. A link that goes down: B's link is cut mid-run; each rank ends on its
#      own within --peer-timeout naming the other (rank and host; rank 1's
#      words reach its file of --output-filename in B, not mpirun, across
#      the cut); the checkpoints left load; once the link is back, mpirun
#      ends, and --resume makes the model of the run never cut, bit for bit.
#   3. Translation across hosts: README's GNU parallel -S recipe, with an
#      ssh server in B and in C (keys and configurations made here; each
#      sshd in a mount namespace of its own where /root is a folder of this
#      test and tfm's programs are in /usr/local/bin), copies the model
#      with --basefile and translates the dates fixture's test set (or
#      NETNS_TEXT with NETNS_MODEL: below) byte for byte as one local
#      pipeline does; a host without the programs (a second sshd in C
#      without them) and one without the model are named by the recipe's
#      check and fail the run.
#
# Root, `ip netns`, mpirun, sshd, GNU parallel and rsync are needed (make
# check installs the packages: CHECK_PACKAGES); without them the parts
# skip saying why.  Where there are no namespaces (no root, not allowed),
# and in the sanitizer build, a rank stopped with SIGSTOP on this machine
# (its connections stay open, as across a cut link) tests the deadline
# instead: rank 0 ends within --peer-timeout naming it.  Everything is cleaned up on exit, also on failure: the
# processes inside the namespaces (mpirun, orted, train, sshd), then the
# namespaces and their links, all named after this script's PID so that
# two runs do not collide.  Every mpirun and remote command runs under
# `timeout`.  The namespaces are run in the optimised build only: the
# sanitizer build's slower start-up of every mpirun, ssh job and program
# would make make check longer, for no code that the stopped rank and
# test_train_mpi.sh do not already run under the sanitizers.
#   BIN=build/release/bin ROOT=$PWD BUILD=build/release TEST_TMP=$(mktemp -d) sh tests/cli/test_netns.sh
. "$ROOT/tests/cli/lib.sh"

TRAIN="$BIN/train"
if [ ! -x "$TRAIN" ]; then fail "no $TRAIN"; exit 0; fi
expect_status 2 "train --peer-timeout 5x: a usage error" "$TRAIN" --peer-timeout 5x --vocab-size 14 \
    --src /dev/null --tgt /dev/null -o never.st
expect_stderr "^train: --peer-timeout: '5x' is not a duration" "train --peer-timeout 5x: says why"
if ! command -v mpirun >/dev/null 2>&1; then skip "mpirun is not installed"; exit 0; fi

# test_train_mpi.sh's tiny model and run.
make_sequences 2800 1 >train.src
cp train.src train.tgt
RUN="--preset tiny --d-model 32 --d-ff 128 --heads 2 --threads 1 -q --vocab-size 14 \
     --src train.src --tgt train.tgt --batch-tokens 300 --dropout 0.1 --clip-norm 1 --ema 0.9 \
     --warmup 20 --seed 7"
ROOT_FLAG=""
[ "$(id -u)" = 0 ] && ROOT_FLAG="--allow-run-as-root"
seconds_since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

# A rank that stops answering, on this machine (SIGSTOP: its connections
# stay open, as across a cut link): the deadline's path without
# namespaces, for the sanitizer build and where namespaces are not allowed
# (with them, the link cut below covers it).
stopped_rank() {
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    timeout 60 mpirun $ROOT_FLAG --oversubscribe -np 2 "$TRAIN" $RUN --schedule noam \
        --max-steps 100000 --save-every 0 --peer-timeout 2 --log stop.tsv -o stop.st \
        >stop.out 2>stop.err &
    job=$!
    while kill -0 $job 2>/dev/null && [ "$(cat stop.tsv 2>/dev/null | wc -l)" -lt 4 ]; do sleep 0.05; done
    # rank 1: mpirun's child (mpirun: timeout's) with OMPI_COMM_WORLD_RANK=1
    # in its environment
    rank1=""
    for p in $(children "$(children $job | head -1)"); do
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then
            rank1=$p
        fi
    done
    if [ -z "$rank1" ]; then
        fail "a stopped rank: rank 1 was not found"
        kill $job 2>/dev/null
        wait $job
        return
    fi
    start=$(date +%s.%N)
    kill -STOP "$rank1"
    { wait $job; } 2>/dev/null
    rc=$?
    took=$(seconds_since "$start")
    kill -CONT "$rank1" 2>/dev/null
    check "rank 1 stopped (SIGSTOP): the job ends with a failure (status $rc) in ${took} s, --peer-timeout 2" \
        awk -v t="$took" -v rc="$rc" 'BEGIN { exit !(t < 30 && rc != 0 && rc != 124) }'
    check "rank 1 stopped: rank 0 names it and its host" \
        grep -Eq "^train: (update [0-9]+: )?no answer from rank 1 \(on $(hostname)\) for [0-9]+ s" stop.err
}
case "$BIN" in *asan*)
    # Open MPI's own leaks (test_train_mpi.sh): not checked here
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    stopped_rank
    skip "the namespaces: run in the optimised build only (ASan would slow them and test no more of the code)"
    exit 0 ;;
esac
no_namespaces() { stopped_rank; skip "$1"; exit 0; }
[ "$(id -u)" = 0 ] || no_namespaces "needs root (ip netns, veth links, sshd)"
for p in ip unshare mount; do
    command -v $p >/dev/null 2>&1 || no_namespaces "$p is not installed"
done

ID=$$
NSA=tfm$ID-a NSB=tfm$ID-b NSC=tfm$ID-c
# veth names: at most 15 characters
VA1=tfm${ID}a1 VA2=tfm${ID}a2 VB=tfm${ID}b VC=tfm${ID}c
cleanup() {
    for ns in $NSA $NSB $NSC; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    done
    for ns in $NSA $NSB $NSC; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ip netns add "$NSA" 2>ns.err || no_namespaces "network namespaces are not allowed here ($(head -1 ns.err))"
ip netns add "$NSB" && ip netns add "$NSC" &&
    ip link add "$VA1" type veth peer name "$VB" &&
    ip link add "$VA2" type veth peer name "$VC" &&
    ip link set "$VA1" netns "$NSA" && ip link set "$VA2" netns "$NSA" &&
    ip link set "$VB" netns "$NSB" && ip link set "$VC" netns "$NSC" &&
    ip -n "$NSA" addr add 10.213.1.1/24 dev "$VA1" &&
    ip -n "$NSA" addr add 10.213.2.1/24 dev "$VA2" &&
    ip -n "$NSB" addr add 10.213.1.2/24 dev "$VB" &&
    ip -n "$NSC" addr add 10.213.2.2/24 dev "$VC" &&
    ip -n "$NSC" addr add 10.213.2.3/24 dev "$VC" &&
    for ns in $NSA $NSB $NSC; do ip -n "$ns" link set lo up || exit 1; done &&
    ip -n "$NSA" link set "$VA1" up && ip -n "$NSA" link set "$VA2" up &&
    ip -n "$NSB" link set "$VB" up && ip -n "$NSC" link set "$VC" up
if [ $? -ne 0 ]; then fail "the namespaces and their links could not be made"; exit 0; fi

# in_ns NS HOST COMMAND...: COMMAND in namespace NS, with host name HOST.
in_ns() {
    ns=$1 host=$2; shift 2
    ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}
# The launcher agent of mpirun: what ssh does for a real host (run the
# command line in the host's shell), here in the host's namespace.
cat >agent <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
10.213.1.1) ns=$NSA name=hosta ;;
10.213.1.2) ns=$NSB name=hostb ;;
*) echo "agent: no host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && exec \$*"
EOF
chmod +x agent
printf '10.213.1.1 slots=1\n10.213.1.2 slots=1\n' >hosts
# mpirun_ab SECONDS ARGS...: mpirun in A, one rank in A and one in B, TCP
# over the A-B link only, stopped after SECONDS.
mpirun_ab() {
    limit=$1; shift
    in_ns "$NSA" hosta timeout "$limit" mpirun $ROOT_FLAG --hostfile hosts -np 2 --map-by node \
        --bind-to none --mca plm_rsh_agent "$TEST_TMP/agent" --mca btl tcp,self \
        --mca btl_tcp_if_include 10.213.1.0/24 --mca oob_tcp_if_include 10.213.1.0/24 "$@"
}
rx_bytes() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_bytes"; }
# processes NS NAME: how many processes named NAME run in namespace NS.
processes() {
    for p in $(ip netns pids "$1" 2>/dev/null); do cat "/proc/$p/comm" 2>/dev/null; done |
        grep -cx "$2"
}

# ---- 1. training over TCP between two namespaces ------------------------------------

STEPS=10
"$TRAIN" $RUN --accum 2 --max-steps $STEPS --save-every 0 -o one.st 2>err.txt
before=$(rx_bytes "$NSB" "$VB")
expect_status 0 "TCP between namespaces A and B: 2 ranks, exit 0" \
    mpirun_ab 60 "$TRAIN" $RUN --max-steps $STEPS --save-every 0 -o tcp.st
check "TCP between namespaces: 2 ranks = 1 process with --accum 2, bit for bit" \
    same_tensors one.st tcp.st
got=$(($(rx_bytes "$NSB" "$VB") - before))
model_bytes=$(tensors one.st | wc -c)
check "TCP between namespaces: B received the gradient sums over its link ($got bytes >= $STEPS x $model_bytes)" \
    test "$got" -ge $((STEPS * model_bytes))

# ---- 2. a link that goes down -------------------------------------------------------------

logged_step() { last_step cut.tsv; }
# No end in sight (the paper's schedule, 100,000 updates), a checkpoint
# every update; B's link is cut once update 5 is logged.
CUTRUN="$RUN --schedule noam --save-every 1 --keep 3"
WAIT=3
mpirun_ab 120 --output-filename "$TEST_TMP/cut-out" "$TRAIN" $CUTRUN --max-steps 100000 \
    --peer-timeout $WAIT --log cut.tsv -o cut.st >cut.out 2>cut.err &
job=$!
while kill -0 $job 2>/dev/null && [ "$(logged_step)" -lt 5 ]; do sleep 0.05; done
start=$(date +%s.%N)
ip -n "$NSB" link set "$VB" down
# Every rank ends on its own: no train process left in A or B.
while [ "$(processes "$NSA" train)" -gt 0 ] || [ "$(processes "$NSB" train)" -gt 0 ]; do
    [ "$(seconds_since "$start" | cut -d. -f1)" -ge 90 ] && break
    sleep 0.1
done
took=$(seconds_since "$start")
check "link of B cut: both ranks end within 60 s (${took} s, --peer-timeout $WAIT)" \
    awk -v t="$took" 'BEGIN { exit !(t < 60) }'
r0="$TEST_TMP/cut-out/1/rank.0/stderr" r1="$TEST_TMP/cut-out/1/rank.1/stderr"
check "link cut: rank 0 names rank 1 and its host" \
    grep -Eq "^train: (update [0-9]+: )?no answer from rank 1 \(on hostb\) for [0-9]+ s" "$r0"
check "link cut: rank 1 names rank 0 and its host (in its output file in B)" \
    grep -Eq "^train: rank 1: (update [0-9]+: )?no answer from rank 0 \(on hosta\) for [0-9]+ s" "$r1"
bad=$(unloadable_checkpoints cut.st)
newest=$(newest_checkpoint cut.st)
check "link cut: every checkpoint left loads ($bad bad), the newest ($newest) at most one update behind the log ($(logged_step))" \
    test "$bad" -eq 0 -a "${newest:-0}" -ge $(($(logged_step) - 1))
# mpirun and B's daemon wait on TCP across the cut; the link back, they
# end (TCP's next retransmission, seconds later: meanwhile the job resumes
# and the translation is tested; first_mpirun_ended checks at the end).
ip -n "$NSB" link set "$VB" up
link_back=$(date +%s.%N)
end=$((${newest:-0} + 5))
expect_status 0 "link back: the job resumes across A and B (to update $end)" \
    mpirun_ab 60 "$TRAIN" --resume --max-steps $end -q -o cut.st
"$TRAIN" $CUTRUN --accum 2 --max-steps $end --save-every 0 -o uncut.st 2>err.txt
check "link back: resumed to update $end, the model of the run never cut, bit for bit" \
    same_tensors uncut.st cut.st
first_mpirun_ended() {
    while kill -0 $job 2>/dev/null && [ "$(seconds_since "$link_back" | cut -d. -f1)" -lt 30 ]; do
        sleep 0.1
    done
    if kill -0 $job 2>/dev/null; then
        fail "link back: the first mpirun did not end within 30 s"
        kill $job 2>/dev/null
    fi
    wait $job
    rc=$?
    check "link back: the first mpirun has ended with a failure (status $rc)" \
        test "$rc" -ne 0 -a "$rc" -ne 124
}

# ---- 3. translation across hosts with GNU parallel -------------------------------------

missing=""
for p in sshd ssh ssh-keygen parallel rsync perl; do
    command -v $p >/dev/null 2>&1 || [ -x /usr/sbin/$p ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
    skip "GNU parallel across hosts: missing$missing (make deps-check installs openssh-server, parallel, rsync)"
    first_mpirun_ended
    exit 0
fi
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
if ! ip netns exec "$NSB" unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /run' 2>mount.err; then
    skip "GNU parallel across hosts: no mount namespace for the ssh servers' homes ($(head -1 mount.err))"
    first_mpirun_ended
    exit 0
fi
# The model and text: the dates fixture's, or (a one-off run, not make
# check's) NETNS_MODEL and NETNS_TEXT (.xz read as such), NETNS_LINES lines a
# block (40) and NETNS_TIMEOUT seconds for a run of parallel (60):
#   NETNS_MODEL=build/bench/quality/tfm-i46.st NETNS_TEXT=../shared/data/enfr/test.en.xz ...
if [ -n "${NETNS_MODEL:-}" ]; then
    cp "$NETNS_MODEL" m.st
    case $NETNS_TEXT in *.xz) xz -dc "$NETNS_TEXT" ;; *) cat "$NETNS_TEXT" ;; esac >test.src
else
    fixture dates || { fail "GNU parallel across hosts: no dates fixture"; first_mpirun_ended; exit 0; }
    mv dates.st m.st
fi
LINES=${NETNS_LINES:-40}
N_LINES=$(lines_of test.src)
mkdir -p home-a home-b home-c home-d
ssh-keygen -q -t ed25519 -N '' -f host.key && ssh-keygen -q -t ed25519 -N '' -f user.key &&
    cp user.key.pub authorized_keys
cat >ssh.config <<EOF
Host *
  IdentityFile $TEST_TMP/user.key
  IdentitiesOnly yes
  UserKnownHostsFile $TEST_TMP/known_hosts
  StrictHostKeyChecking no
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
  User root
EOF
# start_sshd NS ADDRESS HOME WITH_TFM: an sshd on ADDRESS in namespace NS,
# in a mount namespace of its own where /root is HOME and, with WITH_TFM
# "yes", tfm's programs are /usr/local/bin (as installed).
start_sshd() {
    cat >"sshd.$2" <<EOF
ListenAddress $2
HostKey $TEST_TMP/host.key
AuthorizedKeysFile $TEST_TMP/authorized_keys
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
EOF
    bind_bin=":"
    [ "$4" = yes ] && bind_bin="mount --bind '$BIN' /usr/local/bin"
    ip netns exec "$1" unshare -m --propagation private sh -c \
        "mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && mount --bind '$3' /root &&
         $bind_bin && exec '$SSHD' -D -e -f '$TEST_TMP/sshd.$2'" 2>"sshd.$2.log" &
}
# The local pipeline meanwhile.
"$BIN/tokenize" -m m.st --threads 1 <test.src | "$BIN/encode" -m m.st --threads 1 |
    "$BIN/decode" -m m.st --threads 1 | "$BIN/tokenize" -d -m m.st --threads 1 >local.out &
local_job=$!
start_sshd "$NSB" 10.213.1.2 "$TEST_TMP/home-b" yes
start_sshd "$NSC" 10.213.2.2 "$TEST_TMP/home-c" yes
start_sshd "$NSC" 10.213.2.3 "$TEST_TMP/home-d" no
tries=0
while [ $tries -lt 100 ] && [ "$(cat sshd.*.log 2>/dev/null | grep -c 'Server listening')" -lt 3 ]; do
    sleep 0.05
    tries=$((tries + 1))
done
check "3 ssh servers listen (B, C, and C's host without tfm)" \
    test "$(cat sshd.*.log | grep -c 'Server listening')" -eq 3
# par ARGS...: GNU parallel in A (a home of this test, tfm on its PATH for
# the jobs of ':'), through the test's ssh configuration.
par() {
    timeout "${NETNS_TIMEOUT:-60}" ip netns exec "$NSA" env HOME="$TEST_TMP/home-a" PATH="$BIN:$PATH" \
        parallel --ssh "ssh -F $TEST_TMP/ssh.config" "$@"
}
PIPE='tokenize -m m.st --threads 1 | encode -m m.st --threads 1 | decode -m m.st --threads 1 | tokenize -d -m m.st --threads 1'
wait $local_job
# README's recipe: blocks of lines to this machine and two hosts, the model
# copied first, the outputs joined in order.
expect_status 0 "GNU parallel on :, B and C: exit 0" \
    par --pipe -k -N $LINES -S 1/:,1/10.213.1.2,1/10.213.2.2 --basefile m.st \
    --halt now,fail=1 --joblog par.log "$PIPE" <test.src
mv out.txt remote.out
check "GNU parallel: the $N_LINES lines translated ($(lines_of remote.out) lines)" \
    test "$(lines_of remote.out)" -eq "$N_LINES"
same_files "GNU parallel across hosts = one local pipeline, byte for byte" local.out remote.out
check "GNU parallel: B and C each translated blocks" sh -c \
    "awk 'NR > 1 { print \$2 }' par.log | sort -u | tr '\n' ' ' | grep -q '10.213.1.2 10.213.2.2'"
check "--basefile copied the model to B's and C's homes" \
    sh -c "cmp -s m.st home-b/m.st && cmp -s m.st home-c/m.st"
# The recipe's check before a run: one line per host, a failing host named.
CHECK='tokenize --version >/dev/null && test -s m.st && echo ready'
expect_status 1 "the check on B, C and a host without tfm: fails (1 host)" \
    par --nonall --tag -S 10.213.1.2,10.213.2.2,10.213.2.3 "$CHECK"
check "the check: B and C ready" sh -c \
    "grep -q '^10.213.1.2	ready' out.txt && grep -q '^10.213.2.2	ready' out.txt"
expect_stderr "^10\\.213\\.2\\.3	.*tokenize: (command )?not found" \
    "the check names the host without tfm and the missing program"
expect_status 127 "a host without tfm: the translation fails (status 127), not a short file" \
    par --pipe -k -N $LINES -S 1/10.213.2.3 --halt now,fail=1 "$PIPE" <test.src
rm -f home-c/m.st
expect_status 1 "a host without the model (no --basefile): the check fails" \
    par --nonall --tag -S 10.213.1.2,10.213.2.2 "$CHECK"
check "a host without the model: the check names only it" sh -c \
    "grep -q '^10.213.1.2	ready' out.txt && ! grep -q '^10.213.2.2	ready' out.txt"
expect_status 1 "a host without the model: the translation fails" \
    par --pipe -k -N $LINES -S 1/10.213.2.2 --halt now,fail=1 "$PIPE" <test.src
expect_stderr "tokenize: m.st: No such file" "a host without the model: tokenize says the model is missing"
first_mpirun_ended
