#!/usr/bin/env bash
# A real Dask cluster of separate processes on this machine, for tests and trying `--dask` (issue 52).
#
#   eval "$(bash scripts/dask-cluster.sh start [N])"  # `dask scheduler` on a free localhost port and N
#                                                    # (default 2) `dask worker` processes, one thread each,
#                                                    # no nanny (a worker's pid is the worker); waits until
#                                                    # all N are registered; prints only `export ...` lines:
#                                                    # METAPILOT_DASK_ADDRESS=tcp://127.0.0.1:PORT, METAPILOT_DASK_DIR
#   metapilot backtest --dask "$METAPILOT_DASK_ADDRESS" ...
#   bash scripts/dask-cluster.sh stop [DIR]           # stops every process start started, by pid (TERM, then KILL)
#   bash scripts/dask-cluster.sh status [DIR]         # which of them are alive
#
# DIR (mktemp -d) holds the logs, `scheduler.pid` and `worker-I.pid`. The workers run with
# METAPILOT_WORKERS=1 (their own pools: one process each) unless the caller sets it, and in DIR, so a
# run that finds the warehouse only through a relative path fails here as it would on another node.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${METAPILOT_PYTHON:-$REPO/.venv/bin/python}"
[ -x "$PY" ] || PY=python3

say() { echo "dask-cluster.sh: $*" >&2 || true; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

registered() {  # how many workers the scheduler at $1 knows
    "$PY" - "$1" <<'EOF' 2>/dev/null || echo 0
import sys
from distributed import Client
with Client(sys.argv[1], timeout=5) as c:
    print(len(c.scheduler_info(n_workers=-1)["workers"]))
EOF
}

start() {
    local n="${1:-2}" dir port addr i
    dir="$(mktemp -d "${TMPDIR:-/tmp}/metapilot-dask.XXXXXX")"
    port="$(free_port)"
    addr="tcp://127.0.0.1:$port"
    cd "$dir"
    "$PY" -m distributed.cli.dask_scheduler --host 127.0.0.1 --port "$port" --no-dashboard \
        >"$dir/scheduler.log" 2>&1 </dev/null &
    echo $! >"$dir/scheduler.pid"
    for i in $(seq 1 "$n"); do
        METAPILOT_WORKERS="${METAPILOT_WORKERS:-1}" "$PY" -m distributed.cli.dask_worker "$addr" --nthreads 1 \
            --no-nanny --no-dashboard --name "worker-$i" --death-timeout 60 \
            >"$dir/worker-$i.log" 2>&1 </dev/null &
        echo $! >"$dir/worker-$i.pid"
    done
    local deadline=$((SECONDS + 120))
    until [ "$(registered "$addr")" = "$n" ]; do
        if [ $SECONDS -ge $deadline ]; then
            say "the scheduler at $addr did not see $n workers within 120 s (logs in $dir)"
            stop "$dir"
            exit 1
        fi
        sleep 0.5
    done
    echo "export METAPILOT_DASK_ADDRESS=$addr"
    echo "export METAPILOT_DASK_DIR=$dir"
}

stop_pid() {  # TERM, wait up to 10 s, then KILL
    local pid="$1" t
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for t in $(seq 1 50); do alive "$pid" || return 0; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
}

stop() {
    local dir="${1:-${METAPILOT_DASK_DIR:-}}" f
    [ -n "$dir" ] && [ -d "$dir" ] || { say "no cluster folder to stop (give DIR or set METAPILOT_DASK_DIR)"; exit 1; }
    for f in "$dir"/worker-*.pid "$dir"/scheduler.pid; do  # the workers first: they would wait for the scheduler
        [ -f "$f" ] && stop_pid "$(cat "$f")"
    done
    touch "$dir/stopped"
}

status() {
    local dir="${1:-${METAPILOT_DASK_DIR:-}}" f pid
    for f in "$dir"/scheduler.pid "$dir"/worker-*.pid; do
        [ -f "$f" ] || continue
        pid="$(cat "$f")"
        if alive "$pid"; then echo "$(basename "$f" .pid) $pid alive"; else echo "$(basename "$f" .pid) $pid gone"; fi
    done
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    status) shift; status "$@" ;;
    *) echo "usage: $0 start [N] | stop [DIR] | status [DIR]" >&2; exit 2 ;;
esac
