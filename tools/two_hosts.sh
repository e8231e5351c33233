#!/usr/bin/env bash
# Two "hosts" on this machine: each host's ranks started by a launcher of its own (torchrun
# for torch, the command-line worker with --rank for JAX), in a session of its own, none a
# child of the process that plays the session (tools/two_hosts.py). Issue 48; see
# docs/DISTRIBUTED.md ("Workers a launcher starts").
#
#   tools/two_hosts.sh [PYTHON]      # default: python; e.g. .tox/test/bin/python
#   MLBENCH_TWO_HOSTS_CASES="torch:fsdp jax:tp" tools/two_hosts.sh   # some of them
set -euo pipefail
PY=${1:-python}
BIN=$(dirname "$(command -v "$PY")")
cd "$(dirname "$0")/.."
PORT=${MLBENCH_TWO_HOSTS_PORT:-29555}
status=0
for case in ${MLBENCH_TWO_HOSTS_CASES:-torch:fsdp torch:tp jax:fsdp jax:tp}; do
    fw=${case%%:*} strategy=${case#*:}
    dir=$(mktemp -d)
    tok=$dir/token
    "$PY" tools/two_hosts.py --framework "$fw" --strategy "$strategy" \
        --listen "127.0.0.1:$PORT" --token-file "$tok" & session=$!
    while [ ! -s "$tok" ]; do sleep 0.1; done
    hosts=()
    for node in 0 1; do
        if [ "$fw" = torch ]; then
            setsid "$BIN/torchrun" --nnodes=2 --nproc-per-node=1 --node-rank=$node \
                --master-addr=127.0.0.1 --master-port=29400 --no-python \
                "$PY" -m pytest_mlbench.worker --connect "127.0.0.1:$PORT" \
                --token-file "$tok" --once >"$dir/host$node.log" 2>&1 & hosts+=($!)
        else
            setsid "$PY" -m pytest_mlbench.worker --connect "127.0.0.1:$PORT" \
                --token-file "$tok" --rank $node --world 2 --once \
                >"$dir/host$node.log" 2>&1 & hosts+=($!)
        fi
    done
    wait $session || { status=1; echo "FAILED: $fw $strategy"; tail -n 5 "$dir"/host*.log; }
    for h in "${hosts[@]}"; do wait "$h" || true; done
    rm -rf "$dir"
done
exit $status
