#!/usr/bin/env bash
# Data-parallel fairseq-train on fairseq's own distributed machinery (torch.distributed).
#
#   scripts/train_distributed.sh NPROC FAIRSEQ_TRAIN_ARGS...
#
# Starts NPROC local ranks (one process each, --distributed-no-spawn), waits for all of them,
# and exits non-zero if any rank fails (the other ranks are then killed). Each rank gets
#   --distributed-world-size NNODES*NPROC --distributed-rank NODE_RANK*NPROC+LOCAL_RANK
#   --distributed-init-method tcp://MASTER_ADDR:MASTER_PORT --distributed-no-spawn
#   --device-id LOCAL_RANK (CUDA) or 0 (CPU)
#   CPU:  --cpu --distributed-backend gloo, OMP_NUM_THREADS=1 (override: RANK_THREADS=N)
#   CUDA: --distributed-backend nccl
#   --ddp-backend legacy_ddp unless FAIRSEQ_TRAIN_ARGS choose one (see README, "Running at scale")
# The script owns these options: passing any of them in FAIRSEQ_TRAIN_ARGS is an error.
# CUDA is used when torch sees at least NPROC GPUs, unless --cpu is given or DEVICE=cpu.
#
# Logs: LOG_DIR/rank<R>.log for every rank (default LOG_DIR: SAVE_DIR/train_logs, SAVE_DIR
# from --save-dir, fairseq's default "checkpoints"); rank 0 is also copied to stdout.
#
# Several machines (same command on each; the node with NODE_RANK=0 hosts the rendezvous):
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 scripts/train_distributed.sh 4 ARGS...
#   NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 scripts/train_distributed.sh 4 ARGS...
# World size NNODES*NPROC, global rank NODE_RANK*NPROC + local rank. With NNODES=1 (default)
# MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to a free local port.
#
# Other environment: FAIRSEQ_TRAIN (command that runs training; default: the fairseq-train
# next to this repository's .venv python if present, else fairseq-train on PATH), PYTHON.
set -uo pipefail

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "train_distributed.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
NPROC=$1
shift
[[ "$NPROC" =~ ^[1-9][0-9]*$ ]] || die "NPROC must be a positive integer, got '$NPROC'"
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
[[ "$NNODES" =~ ^[1-9][0-9]*$ ]] || die "NNODES must be a positive integer, got '$NNODES'"
[[ "$NODE_RANK" =~ ^[0-9]+$ ]] && [ "$NODE_RANK" -lt "$NNODES" ] \
    || die "NODE_RANK must lie in [0, $((NNODES - 1))], got '$NODE_RANK'"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
if [ -z "${FAIRSEQ_TRAIN:-}" ]; then
    if [ -x "$REPO/.venv/bin/fairseq-train" ]; then FAIRSEQ_TRAIN="$REPO/.venv/bin/fairseq-train"
    else FAIRSEQ_TRAIN=fairseq-train; fi
fi
read -r -a TRAIN_CMD <<< "$FAIRSEQ_TRAIN"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python3; fi
fi

# Options this script owns, and the ones it reads.
SAVE_DIR=checkpoints
WANT_CPU=0
HAVE_DDP=0
prev=""
for arg in "$@"; do
    case "$arg" in
        --distributed-world-size|--distributed-world-size=*|--distributed-rank|--distributed-rank=*|\
--distributed-init-method|--distributed-init-method=*|--distributed-no-spawn|--device-id|--device-id=*|\
--distributed-port|--distributed-port=*|--distributed-backend|--distributed-backend=*|--distributed-num-procs|--distributed-num-procs=*)
            die "$arg is set by this script (NPROC, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT); remove it" ;;
        --cpu) WANT_CPU=1 ;;
        --ddp-backend|--ddp-backend=*) HAVE_DDP=1 ;;
        --save-dir=*) SAVE_DIR=${arg#--save-dir=} ;;
    esac
    [ "$prev" = "--save-dir" ] && SAVE_DIR=$arg
    prev=$arg
done
[ "${DEVICE:-}" = cpu ] && WANT_CPU=1

if [ "$WANT_CPU" = 0 ]; then
    NGPU=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
    if [ "${DEVICE:-}" = cuda ] && [ "$NGPU" -lt "$NPROC" ]; then
        die "DEVICE=cuda but torch sees $NGPU GPU(s) for NPROC=$NPROC"
    fi
    [ "$NGPU" -ge "$NPROC" ] || WANT_CPU=1
fi

if [ "$NNODES" -gt 1 ]; then
    [ -n "${MASTER_ADDR:-}" ] && [ -n "${MASTER_PORT:-}" ] \
        || die "NNODES=$NNODES needs MASTER_ADDR and MASTER_PORT (the address of the NODE_RANK=0 machine)"
else
    MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
    if [ -z "${MASTER_PORT:-}" ]; then
        MASTER_PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
            || die "could not find a free port; set MASTER_PORT"
    fi
fi
[[ "$MASTER_PORT" =~ ^[0-9]+$ ]] || die "MASTER_PORT must be a port number, got '$MASTER_PORT'"

WORLD=$((NNODES * NPROC))
LOG_DIR=${LOG_DIR:-$SAVE_DIR/train_logs}
mkdir -p "$LOG_DIR" || die "cannot create LOG_DIR $LOG_DIR"

COMMON=(--distributed-world-size "$WORLD" --distributed-init-method "tcp://$MASTER_ADDR:$MASTER_PORT"
        --distributed-no-spawn)
if [ "$WANT_CPU" = 1 ]; then
    DEVICE_ARGS=(--distributed-backend gloo)
    [[ " $* " == *" --cpu "* ]] || DEVICE_ARGS+=(--cpu)
else
    DEVICE_ARGS=(--distributed-backend nccl)
fi
[ "$HAVE_DDP" = 1 ] || DEVICE_ARGS+=(--ddp-backend legacy_ddp)

echo "train_distributed.sh: world size $WORLD (node $NODE_RANK of $NNODES, $NPROC local ranks)," \
     "$([ "$WANT_CPU" = 1 ] && echo "CPU/gloo" || echo "CUDA/nccl"), rendezvous tcp://$MASTER_ADDR:$MASTER_PORT," \
     "logs in $LOG_DIR" >&2

PIDS=()
RANKS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    sleep 1
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
}
trap 'echo "train_distributed.sh: interrupted, stopping all ranks" >&2; cleanup; exit 130' INT TERM

for ((local_rank = 0; local_rank < NPROC; local_rank++)); do
    rank=$((NODE_RANK * NPROC + local_rank))
    log="$LOG_DIR/rank$rank.log"
    if [ "$WANT_CPU" = 1 ]; then
        device=(--device-id 0)
        threads=${RANK_THREADS:-1}
        env_args=(OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads")
    else
        device=(--device-id "$local_rank")
        env_args=()
    fi
    if [ "$local_rank" = 0 ]; then
        env "${env_args[@]}" "${TRAIN_CMD[@]}" "$@" "${COMMON[@]}" "${DEVICE_ARGS[@]}" \
            --distributed-rank "$rank" "${device[@]}" > >(tee "$log") 2>&1 &
    else
        env "${env_args[@]}" "${TRAIN_CMD[@]}" "$@" "${COMMON[@]}" "${DEVICE_ARGS[@]}" \
            --distributed-rank "$rank" "${device[@]}" > "$log" 2>&1 &
    fi
    PIDS+=($!)
    RANKS+=("$rank")
done

status=0
live=("${PIDS[@]}")
while [ "${#live[@]}" -gt 0 ]; do
    finished=""
    wait -n -p finished "${live[@]}"
    code=$?
    [ -n "$finished" ] || break  # nothing left to wait for
    still=()
    for pid in "${live[@]}"; do [ "$pid" = "$finished" ] || still+=("$pid"); done
    live=("${still[@]}")
    if [ "$code" -ne 0 ]; then
        for i in "${!PIDS[@]}"; do [ "${PIDS[$i]}" = "$finished" ] && failed_rank=${RANKS[$i]}; done
        echo "train_distributed.sh: rank $failed_rank failed (exit $code); stopping the other ranks." \
             "Last lines of $LOG_DIR/rank$failed_rank.log:" >&2
        tail -n 20 "$LOG_DIR/rank$failed_rank.log" >&2
        cleanup
        wait 2>/dev/null
        status=$code
        break
    fi
done
trap - INT TERM
exit "$status"
