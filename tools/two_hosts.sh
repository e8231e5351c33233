#!/usr/bin/env bash
# Two "hosts" on this machine (issue 48; docs/DISTRIBUTED.md, "Workers a launcher starts"): a
# pytest session whose parallel cases run on external workers (--mlbench-hosts=external), and,
# for each of two hosts, torch's rank under a torchrun of that host's own and JAX's process as
# the command-line worker, each launched in a process session of its own (setsid): none is a
# child of the pytest session, which finds them only as connections that prove its token.
#
#   tools/two_hosts.sh                      # the project's mlp: fsdp and tp in torch and JAX
#   tools/two_hosts.sh suites -k "gpt-"     # any pytest arguments instead (given last, they win)
#   PYTHON=.tox/test/bin/python MLBENCH_PORT=29555 tools/two_hosts.sh
#
# The token is MLBENCH_TOKEN (a fresh one when unset), exported to the session and the workers
# alike, as a cluster job script would. Exit status: the session's.
set -uo pipefail
PY=${PYTHON:-python}
BIN=$(dirname "$(command -v "$PY")")
PORT=${MLBENCH_PORT:-29555}
MLBENCH_TOKEN=${MLBENCH_TOKEN:-$("$PY" -c 'import secrets; print(secrets.token_hex(32))')}
export MLBENCH_TOKEN
logs=$(mktemp -d)
if [ $# -eq 0 ]; then
    set -- "$(dirname "$0")/../suites" -k "mlp- and (torch-eager or jax-jit)" \
        --mlbench-strategies=fsdp,tp --mlbench-processes=1
fi
"$PY" -m pytest --mlbench-hosts=external --mlbench-listen="127.0.0.1:$PORT" \
    --mlbench-workers=2 --mlbench-nodes=2 --mlbench-frameworks=torch,jax "$@" & session=$!
hosts=()
for node in 0 1; do
    setsid "$BIN/torchrun" --nnodes=2 --nproc-per-node=1 --node-rank=$node \
        --master-addr=127.0.0.1 --master-port=$((PORT + 1)) --no-python \
        "$PY" -m pytest_mlbench.worker --connect "127.0.0.1:$PORT" --pool torch-w2-n2 \
        >"$logs/torch-host$node.log" 2>&1 & hosts+=($!)
    setsid "$PY" -m pytest_mlbench.worker --connect "127.0.0.1:$PORT" --pool jax-w2-n2 \
        --rank $node --world 2 >"$logs/jax-host$node.log" 2>&1 & hosts+=($!)
done
wait $session
status=$?
# the workers leave once the session no longer answers (their --linger)
for h in "${hosts[@]}"; do wait "$h"; done
if [ $status -ne 0 ]; then
    for f in "$logs"/*.log; do echo "== $(basename "$f")"; tail -n 5 "$f"; done
fi
rm -rf "$logs"
exit $status
