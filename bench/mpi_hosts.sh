#!/bin/sh
# MPI across machines, emulated on one: each "host" is a network namespace with its own veth link
# to a bridge (optionally rate-limited) and its own host name (a UTS namespace), and Open MPI's
# mpirun, in a namespace of its own (the launch machine), reaches it through its rsh launcher, a
# script standing in for ssh (docs/DISTRIBUTED.md, "Several machines, emulated here").  Run as
# root from the build directory (./yolocl, tests/mpi_dist, bench/mpi_allreduce: make
# tests/mpi_dist bench/mpi_allreduce).
#
#   bench/mpi_hosts.sh [--hosts N] [--ranks-per-host K] [--rate RATE] [STEP...]
#
# STEP is one or more of (default: dist local train allreduce faults):
#   dist       tests/mpi_dist on 2 ranks, one per host (needs N x K = 2): the summed gradient of
#              one step against one process's accumulation, the optimizer steps, resume, the
#              local ranks (YOLOCL_TEST_RANKS_PER_HOST); prints the bytes that crossed the links
#   local      where the ranks run and their local ranks (MPI_Comm_split_type SHARED, which
#              yolocl picks a rank's device and threads by), bench/mpi_allreduce's placement
#              lines, with K ranks per host and with 2: rank r must be on host r / k + 1 with local
#              rank r % k of k
#   train      mpirun yolocl train, K ranks per host: YOLOv5n (WEIGHTS) on DATA at 320, global
#              batch 16, 1 epoch (TRAIN_ARGS replaces those); the ranks' host names and network
#              namespaces, seen from outside while they run, must differ per host; one run
#              directory with one results.csv (rank 0's), one row per epoch; rank 0's
#              "data-parallel:" line and the run's wall time
#   allreduce  bench/mpi_allreduce of ELEMS floats (1872157, YOLOv5n's gradients) on N x K
#              ranks (ITERS sums, each timed to its slowest rank) at each link rate of RATES ("none 10gbit 1gbit"; --rate gives one), each
#              against the ring allreduce's bandwidth term, 2 (R - 1) / R x bytes / rate for R
#              = N x K ranks (what each host's link carries each way when the ring visits the
#              hosts in turn), with the bytes the first host's link carried (both ways) per
#              allreduce and the packets the rate limits dropped
#   faults     the tiny model on the demo data, one rank per host: SIGTERM to the rank on the
#              last host (every rank stops after the same batch, status 130, rank 0's resumable
#              checkpoint); SIGKILL to it (mpirun names it and ends the run); the last host's
#              link taken down mid-run, a lost machine (YOLOCL_DIST_TIMEOUT=5: the ranks give up
#              and call MPI_Abort), once per net.ipv4.tcp_retries2 of LOST_RETRIES ("default 3")
#              set in mpirun's namespace: mpirun then waits for the lost host's daemon until its
#              TCP gives up on the kill order it sent there (974 s here at the default 15); with
#              5 or fewer it must end within LOST_BOUND (60) s, with more it is killed then
#
# --rate RATE limits every host's outgoing link (tc tbf, "10gbit", "500mbit", ...) for all steps
# (the allreduce step then runs at that rate alone).  A host's traffic to another crosses its own
# link out (limited) and the other's link in, as two machines on one switch; ranks of one host
# exchange through shared memory (Open MPI's vader, which it uses only between ranks it placed on
# one host), ranks of different hosts by TCP over the links (btl tcp; pml ob1, not UCX, which
# might find the other "hosts" on the same kernel).  Everything shares this machine's cores and
# memory: the links are emulated, the compute is not.
#
# Environment: YOLOCL (./yolocl); DATA (YOLOCL_SHARED_DIR or ../shared, data/coco128.yaml:
# copied, as its label cache is written beside the labels); WEIGHTS (.../weights/yolov5n.pt);
# TRAIN_ARGS; RATES; ELEMS; ITERS (20); LOST_BOUND (60); LOST_RETRIES; MPIRUN_ARGS, options
# added to every mpirun (e.g. "--mca coll_tuned_use_dynamic_rules 1 --mca
# coll_tuned_allreduce_algorithm 4", the ring).
#
# Exit status: 0 when every check passed, 1 when one failed (named on standard output), 2 for a
# usage error, 77 when this machine cannot emulate hosts (not root, no ip or tc or unshare, no
# network namespaces, no Open MPI mpirun, or a first mpirun across the hosts failing), with the
# reason.  The namespaces, the bridge and the temporary folder are removed on exit.
set -u

hosts=2
per=1
rate=
steps=
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=${2:-}; shift 2 || exit 2 ;;
    --ranks-per-host) per=${2:-}; shift 2 || exit 2 ;;
    --rate) rate=${2:-}; shift 2 || exit 2 ;;
    dist | local | train | allreduce | faults) steps="$steps $1"; shift ;;
    *) echo "usage: bench/mpi_hosts.sh [--hosts N] [--ranks-per-host K] [--rate RATE]" \
            "[dist|local|train|allreduce|faults]..." >&2; exit 2 ;;
    esac
done
case $hosts$per in *[!0-9]* | '') echo "mpi_hosts: --hosts and --ranks-per-host take numbers" >&2
                                  exit 2 ;;
esac
[ "$hosts" -ge 2 ] && [ "$hosts" -le 32 ] && [ "$per" -ge 1 ] ||
    { echo "mpi_hosts: --hosts 2 to 32, --ranks-per-host 1 or more" >&2; exit 2; }
[ -n "$steps" ] || steps="dist local train allreduce faults"
for p in tests/mpi_dist bench/mpi_allreduce; do
    [ -x "$p" ] || { echo "mpi_hosts: no ./$p: run from the build directory after" \
                          "make tests/mpi_dist bench/mpi_allreduce" >&2; exit 2; }
done
yolocl=${YOLOCL:-./yolocl}
shared=${YOLOCL_SHARED_DIR:-../shared}
data=${DATA:-$shared/data/coco128.yaml}
weights=${WEIGHTS:-$shared/weights/yolov5n.pt}
train_args=${TRAIN_ARGS:-"--img 320 --batch 16 --epochs 1 --noautoanchor --noplots"}
rates=${RATES:-"none 10gbit 1gbit"}
[ -n "$rate" ] && rates=$rate
elems=${ELEMS:-1872157}
iters=${ITERS:-20}
lost_bound=${LOST_BOUND:-60}
mpirun_args=${MPIRUN_ARGS:-}
lost_retries=${LOST_RETRIES:-"default 3"}

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces and veth links need root"
for c in ip tc unshare nsenter mpirun timeout; do
    command -v $c >/dev/null 2>&1 || skip "no $c (iproute2, util-linux, openmpi-bin, coreutils)"
done
mpirun --version 2>&1 | grep -q 'Open MPI' ||
    skip "mpirun is not Open MPI's (the rsh launcher options here are Open MPI's)"
"$yolocl" --version 2>/dev/null | grep -q '^MPI: yes' || skip "$yolocl is built without MPI"
unshare --uts true 2>/dev/null || skip "unshare --uts fails: no UTS namespaces (CAP_SYS_ADMIN)"

# names of this run's namespaces and links (the pid keeps two runs apart; link names have at
# most 15 characters); namespace 0 is the launch machine, where mpirun runs, 1 to N the hosts.
# The bridge has no address of its own: the subnet lives only in the namespaces, so it cannot
# clash with this machine's networks or another run's.
id=$$
pre=yc${id}h
br=ycb$id
net=10.213.0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yolocl-hosts.XXXXXX") || exit 1
job=
cleanup() {
    [ -n "$job" ] && kill -KILL "$job" 2>/dev/null
    for i in $(seq 0 "$hosts"); do
        # what still runs in a host (an orted left by a lost link): ours, started in it
        for p in $(ip netns pids "$pre$i" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$pre$i" 2>/dev/null
    done
    ip link del "$br" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# host names: node1, node2, ... unless this machine is called so
name=node
case " $(seq -f "node%g" 1 "$hosts" | tr '\n' ' ')" in *" $(hostname) "*) name=ycnode ;; esac

# the bridge, the launch machine's namespace at 10.213.0.1 and one namespace per host at
# 10.213.0.(10 + i)
ip link add "$br" type bridge 2>"$tmp/err" && ip link set "$br" up ||
    skip "cannot make a bridge: $(cat "$tmp/err")"
for i in $(seq 0 "$hosts"); do
    ip netns add "$pre$i" 2>"$tmp/err" || skip "ip netns add fails: $(cat "$tmp/err")"
    ip link add "ycv${id}h$i" type veth peer name eth0 netns "$pre$i" 2>"$tmp/err" &&
        ip link set "ycv${id}h$i" master "$br" up &&
        ip -n "$pre$i" addr add "$net.$((i == 0 ? 1 : 10 + i))/24" dev eth0 &&
        ip -n "$pre$i" link set eth0 up && ip -n "$pre$i" link set lo up ||
        skip "cannot link namespace $pre$i to the bridge: $(cat "$tmp/err")"
done

# RATE (tc's units) in bits per second, for the tbf bucket and the ring formula
bits() {
    echo "$1" | awk '{ v = $0 + 0; u = tolower($0); sub(/^[0-9.]+/, "", u)
        m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : u == "bit" || u == "" ? 1 : -1
        print m < 0 ? -1 : v * m }'
}
# limits every host's link out to $1 ("none": unlimited): tbf with a bucket of 1 ms at the rate
# (at least 128 KiB, two of the veth's 64 KiB segments) and 10 ms of queue
set_rate() {
    for i in $(seq 1 "$hosts"); do
        tc -n "$pre$i" qdisc del dev eth0 root 2>/dev/null
        [ "$1" = none ] && continue
        b=$(bits "$1")
        [ "$b" != -1 ] || { echo "mpi_hosts: rate '$1' is not NUMBER[k|m|g]bit" >&2; exit 2; }
        burst=$(awk -v b="$b" 'BEGIN { x = b / 8 / 1000; printf "%d", x < 131072 ? 131072 : x }')
        tc -n "$pre$i" qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 10ms \
            2>"$tmp/err" || { echo "mpi_hosts: tc tbf at $1 fails: $(cat "$tmp/err")" >&2; exit 2; }
    done
}
set_rate "${rate:-none}"
# bytes sent and received on host $1's link (the bridge side's counters)
link_bytes() {
    echo $(($(cat "/sys/class/net/ycv${id}h$1/statistics/rx_bytes") +
            $(cat "/sys/class/net/ycv${id}h$1/statistics/tx_bytes")))
}

# packets the hosts' rate limits dropped so far (a full queue: TCP then slows down)
drops() {
    for i in $(seq 1 "$hosts"); do tc -n "$pre$i" -s qdisc show dev eth0; done |
        awk '{ for (j = 1; j < NF; j++) if ($j == "(dropped") { sub(",", "", $(j + 1)); n += $(j + 1) } }
             END { print n + 0 }'
}
# ssh's stand-in: Open MPI runs `AGENT HOST COMMAND...` to start its daemon (orted) on HOST; the
# command is run by a shell in HOST's network namespace under HOST's host name with a login's
# environment (PATH and HOME alone), as sshd would run it on that machine: the variables the
# ranks need must be passed by mpirun -x, as between real machines
cat >"$tmp/rsh" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case \$host in ${name}[0-9]*) ;; *) echo "rsh stand-in: no host \$host" >&2; exit 255 ;; esac
exec env -i PATH="$PATH" HOME="\$HOME" ip netns exec "$pre\${host#$name}" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' \\
    "\$host" "\$*"
EOF
chmod +x "$tmp/rsh" || exit 1
# mpirun across the hosts with $1 ranks per host (its hostfile: each host with $1 slots), then
# the program and its arguments (a script, so that timeout can run it)
# (the sanitizers' options of a sanitizer build, OpenMP's wait policy, the library path and the
# test data directory of an out-of-tree build, where set, passed to the ranks with -x)
fwd=
for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS OMP_WAIT_POLICY LD_LIBRARY_PATH \
    YOLOCL_TEST_DATA; do
    eval "[ -n \"\${$v:-}\" ]" && fwd="$fwd -x $v"
done
cat >"$tmp/mpi" <<EOF
#!/bin/sh
k=\$1
shift
for i in \$(seq 1 $hosts); do echo "$name\$i slots=\$k"; done >"$tmp/hosts\$k" || exit 1
exec ip netns exec "${pre}0" mpirun --allow-run-as-root --hostfile "$tmp/hosts\$k" -np \$(($hosts * k)) \\
    --mca plm_rsh_agent "$tmp/rsh" --mca plm_rsh_no_tree_spawn 1 \\
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \\
    --mca btl tcp,vader,self --mca pml ob1$fwd $mpirun_args "\$@"
EOF
chmod +x "$tmp/mpi" || exit 1
mpi=$tmp/mpi
echo "$hosts hosts ($(seq -f "$name%g" 1 "$hosts" | tr '\n' ' ')in namespaces ${pre}1 to $pre$hosts," \
     "$net.11 up) and mpirun's (${pre}0, $net.1) on bridge $br, links ${rate:-unlimited};" \
     "$per rank(s) per host"
# a first mpirun across the hosts: where it fails the emulation does not work here (a firewall
# on the bridge, namespaces without their own host name), not yolocl
timeout 60 "$mpi" 1 sh -c 'echo "$(hostname) $OMPI_COMM_WORLD_RANK"' >"$tmp/out" 2>"$tmp/err" ||
    skip "mpirun across the emulated hosts fails (status $?): $(cat "$tmp/out" "$tmp/err")"
[ "$(sort "$tmp/out" | tr '\n' ' ')" = "$(seq 1 "$hosts" | awk -v n="$name" '{ printf "%s%d %d ", n, $1, $1 - 1 }')" ] ||
    skip "mpirun across the emulated hosts ran: $(tr '\n' ' ' <"$tmp/out"), not one rank per host"

demo() {
    [ -f "$tmp/demo/demo.yaml" ] ||
        "$yolocl" demo-data "$tmp/demo" --train 6 --val 2 >/dev/null || exit 1
}
tiny_train="train --data $tmp/demo/demo.yaml --cfg ${YOLOCL_TEST_DATA:-tests/data}/tiny/yolov5n-tiny.yaml
    --weights ${YOLOCL_TEST_DATA:-tests/data}/tiny/weights.safetensors --device cpu --img 64
    --noautoanchor --noplots --project $tmp/runs --exist-ok"
# the pid of the yolocl rank running in host $1's namespace, waiting for it up to 60 s
rank_pid() {
    j=0
    while [ $j -lt 600 ]; do
        for p in $(ip netns pids "$pre$1" 2>/dev/null); do
            case $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") in
            *yolocl\ train*) echo "$p"; return 0 ;;
            esac
        done
        sleep 0.1
        j=$((j + 1))
    done
    return 1
}
# waits (at most 120 s) until the run named $1 has written an epoch's row
wait_epoch() {
    j=0
    while [ "$(cat "$tmp/runs/$1/results.csv" 2>/dev/null | wc -l)" -lt 2 ] && [ $j -lt 1200 ]; do
        sleep 0.1
        j=$((j + 1))
    done
}
# a run named $2 with one rank per host, signal $1 to its rank on the last host ($last) once it
# has trained an epoch; sets p (that rank's pid), st (mpirun's status) and secs (from the
# signal to the end)
signal_last() {
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 timeout 120 "$mpi" 1 -x OMP_NUM_THREADS "$yolocl" $tiny_train \
        --epochs 1000 --batch $((2 * hosts)) --name "$2" >"$tmp/out" 2>"$tmp/err" </dev/null &
    job=$!
    wait_epoch "$2"
    p=$(rank_pid "$last") || fail "no rank on ${name}$last"
    t0=$(date +%s.%N)
    [ -n "$p" ] && kill -"$1" "$p"
    wait $job
    st=$?
    job=
    secs=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
}

for step in $steps; do
    case $step in
    dist)
        echo "== dist: tests/mpi_dist on 2 ranks, $per per host"
        if [ $((hosts * per)) != 2 ]; then
            echo "skipped: tests/mpi_dist runs on 2 ranks, not $hosts x $per"
            continue
        fi
        demo
        mkdir -p "$tmp/resume" || exit 1
        b0=$(link_bytes 1)
        t0=$(date +%s.%N)
        OMP_NUM_THREADS=1 YOLOCL_TEST_RANKS_PER_HOST=$per timeout 300 "$mpi" "$per" \
            -x OMP_NUM_THREADS -x YOLOCL_TEST_RANKS_PER_HOST ./tests/mpi_dist \
            "$tmp/demo/demo.yaml" "$tmp/resume" >"$tmp/out" 2>&1 </dev/null
        st=$?
        grep '^rank 0:\|FAIL' "$tmp/out"
        [ $st = 0 ] && tail -1 "$tmp/out" | grep -q '^PASS' ||
            { cat "$tmp/out"; fail "tests/mpi_dist across the hosts: status $st"; }
        echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s;" \
             "$(( ($(link_bytes 1) - b0) / 1000 )) kB through ${name}1's link"
        ;;
    local)
        echo "== local: placement and local ranks"
        for k in $(printf '%s\n' "$per" 2 | sort -u); do
            timeout 120 "$mpi" "$k" ./bench/mpi_allreduce 1000 3 >"$tmp/out" 2>&1 </dev/null ||
                { cat "$tmp/out"; fail "bench/mpi_allreduce on $hosts x $k ranks"; continue; }
            grep '^rank ' "$tmp/out"
            n=$((hosts * k))
            want=$(seq 0 $((n - 1)) | awk -v n="$n" -v k="$k" -v h="$name" \
                '{ printf "rank %d of %d on host %s%d: local rank %d of %d\n", $1, n, h,
                   int($1 / k) + 1, $1 % k, k }')
            [ "$(grep '^rank ' "$tmp/out")" = "$want" ] ||
                fail "$hosts hosts x $k ranks: not rank r on host r / $k + 1, local rank r % $k"
        done
        ;;
    train)
        echo "== train: mpirun yolocl train on $hosts x $per ranks"
        if [ ! -f "$data" ] || [ ! -f "$weights" ]; then
            echo "skipped: no $data or $weights (DATA, WEIGHTS, YOLOCL_SHARED_DIR)"
            continue
        fi
        rm -rf "$tmp/data" "$tmp/train"
        cp -r "$(dirname "$data")/." "$tmp/data" || exit 1
        t0=$(date +%s.%N)
        b0=$(link_bytes 1)
        # shellcheck disable=SC2086
        timeout 1200 "$mpi" "$per" "$yolocl" train --data "$tmp/data/$(basename "$data")" \
            --weights "$weights" --device cpu $train_args --project "$tmp/train" --name hosts \
            >"$tmp/train.out" 2>"$tmp/train.err" </dev/null &
        job=$!
        # each host's rank, seen from outside: its network namespace and its host name
        seen=
        for i in $(seq 1 "$hosts"); do
            p=$(rank_pid "$i") || { fail "no yolocl rank in ${name}$i's namespace"; continue; }
            h=$(nsenter -t "$p" -u hostname)
            ns=$(ip netns identify "$p")
            echo "${name}$i: yolocl rank pid $p in network namespace $ns, host name $h"
            seen="$seen$ns/$h "
        done
        wait $job
        st=$?
        job=
        t1=$(date +%s.%N)
        for f in 1 2; do
            [ "$(echo "$seen" | tr ' ' '\n' | grep . | cut -d/ -f$f | sort -u | wc -l)" = "$hosts" ] ||
                fail "the ranks' network namespaces and host names are not $hosts distinct: $seen"
        done
        [ $st = 0 ] || { tail -20 "$tmp/train.err"; fail "mpirun yolocl train: status $st"; continue; }
        grep '^device:\|^data-parallel:' "$tmp/train.out"
        echo "wall $(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s;" \
             "$(( ($(link_bytes 1) - b0) / 1000000 )) MB through ${name}1's link"
        [ "$(ls "$tmp/train")" = hosts ] || fail "run directories: $(ls "$tmp/train" | tr '\n' ' ')"
        [ "$(find "$tmp/train" "$tmp/data" -name results.csv | wc -l)" = 1 ] ||
            fail "not one results.csv: $(find "$tmp/train" "$tmp/data" -name results.csv)"
        epochs=$(echo "$train_args" | sed -n 's/.*--epochs \([0-9]*\).*/\1/p')
        rows=$(($(wc -l <"$tmp/train/hosts/results.csv") - 1))
        [ "$rows" = "${epochs:-$rows}" ] || fail "results.csv has $rows rows, not $epochs"
        tail -1 "$tmp/train/hosts/results.csv" | tr -s ' '
        grep -q "^data-parallel: $((hosts * per)) ranks" "$tmp/train.out" ||
            fail "no 'data-parallel: $((hosts * per)) ranks' line"
        ;;
    allreduce)
        echo "== allreduce: $elems floats on $hosts x $per ranks"
        printf '%-8s %10s %10s %12s %10s %12s %8s\n' link median fastest "ring model" "bus GB/s" \
            "kB/allreduce" drops
        n=$((hosts * per))
        for r in $rates; do
            set_rate "$r"
            b0=$(link_bytes 1)
            d0=$(drops)
            timeout 600 "$mpi" "$per" ./bench/mpi_allreduce "$elems" "$iters" >"$tmp/out" 2>&1 \
                </dev/null || { cat "$tmp/out"; fail "bench/mpi_allreduce at $r"; continue; }
            kb=$(( ($(link_bytes 1) - b0) / (iters + 3) / 1000 ))
            d=$(($(drops) - d0))
            # the ring's bandwidth term: each rank sends 2 (N - 1) / N x the bytes, and with the
            # ranks placed host by host the ring enters and leaves each host once, so each
            # host's link carries that much each way, N counting all the ranks
            model=$(awk -v b="$(bits "$r")" -v h="$n" -v e="$elems" 'BEGIN {
                if ("'"$r"'" == "none") { print "-"; exit }
                printf "%.2f ms", 2 * (h - 1) / h * 4 * e * 8 / b * 1e3 }')
            sed -n 's/.*median \([0-9.]*\) ms, fastest \([0-9.]*\) ms.*bus bandwidth \([0-9.]*\) GB.*/\1 \2 \3/p' \
                "$tmp/out" | awk -v r="$r" -v m="$model" -v kb="$kb" -v d="$d" \
                '{ printf "%-8s %7.2f ms %7.2f ms %12s %10.2f %12d %8d\n", r, $1, $2, m, $3, kb, d }'
            [ "$n" = "$(grep -c '^rank ' "$tmp/out")" ] || fail "not $n ranks at $r"
        done
        set_rate "${rate:-none}"
        ;;
    faults)
        echo "== faults: one rank per host, the tiny model on the demo data"
        demo
        last=$hosts
        signal_last TERM sig
        echo "SIGTERM to the rank on ${name}$last (pid $p): status $st after $secs s;" \
             "$(grep -c "training interrupted" "$tmp/err") ranks said 'training interrupted'"
        [ $st = 130 ] || fail "SIGTERM to a rank on ${name}$last: status $st, not 130"
        head -c 65536 "$tmp/runs/sig/weights/last.safetensors" | grep -a -q '"next_batch":"[1-9]' ||
            fail "rank 0 did not save the interrupted run's checkpoint"
        head -c 65536 "$tmp/runs/sig/weights/last.safetensors" 2>/dev/null |
            grep -a -q "world_size\\\\\": $hosts," ||
            fail "the interrupted checkpoint does not say $hosts ranks"
        # SIGKILL to it
        signal_last KILL kill
        echo "SIGKILL to the rank on ${name}$last (pid $p): status $st after $secs s:" \
             "$(grep -h "mpirun noticed" "$tmp/out" "$tmp/err")"
        [ $st != 0 ] && [ $st != 124 ] || fail "SIGKILL to a rank on ${name}$last: status $st"
        grep -q "rank $((last - 1)) with PID $p on node ${name}$last exited on signal 9" \
            "$tmp/out" "$tmp/err" || fail "mpirun did not name rank $((last - 1)) on ${name}$last"
        # the last host's link down: a lost machine, with the launch machine's TCP giving up
        # on unacknowledged data after each net.ipv4.tcp_retries2 of LOST_RETRIES
        for rt in $lost_retries; do
            [ "$rt" = default ] && rt=$(ip netns exec "${pre}0" sysctl -n net.ipv4.tcp_retries2)
            # (a container may hold /proc/sys read-only: then this case is left out)
            ip netns exec "${pre}0" sysctl -q -w net.ipv4.tcp_retries2="$rt" 2>"$tmp/err" ||
                { echo "skipped: sysctl net.ipv4.tcp_retries2=$rt in mpirun's namespace:" \
                       "$(cat "$tmp/err")"; continue; }
            # shellcheck disable=SC2086
            YOLOCL_DIST_TIMEOUT=5 OMP_NUM_THREADS=1 timeout -s KILL "$lost_bound" "$mpi" 1 \
                -x OMP_NUM_THREADS -x YOLOCL_DIST_TIMEOUT "$yolocl" $tiny_train --epochs 1000 \
                --batch $((2 * hosts)) --name "lost$rt" >"$tmp/out" 2>"$tmp/err" </dev/null &
            job=$!
            wait_epoch "lost$rt"
            t0=$(date +%s.%N)
            ip link set "ycv${id}h$last" down
            wait $job
            st=$?
            job=
            echo "${name}$last's link down (mpirun's machine: tcp_retries2 $rt):" \
                 "$(grep -h -o "rank [0-9]* of [0-9]*: [^;]*waited 5 s" "$tmp/err" | head -2 |
                    tr '\n' ' ')"
            if [ $st = 137 ]; then
                echo "  mpirun still running ${lost_bound} s after the link went down (killed):" \
                     "it waits for ${name}$last's daemon"
                [ "$rt" -gt 5 ] || fail "tcp_retries2 $rt: mpirun did not end within $lost_bound s"
            else
                echo "  mpirun ended with status $st after" \
                     "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s"
            fi
            grep -q "waited 5 s for the other ranks (YOLOCL_DIST_TIMEOUT)" "$tmp/err" ||
                fail "no rank gave up after YOLOCL_DIST_TIMEOUT with ${name}$last lost"
            for p in $(ip netns pids "$pre$last"); do kill -KILL "$p" 2>/dev/null; done
            ip link set "ycv${id}h$last" up
        done
        ;;
    esac
done
[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo PASS
