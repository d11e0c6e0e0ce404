#!/usr/bin/env bash
# Server instructions per request over real HTTP (docs/performance.md,
# "Instructions per request over HTTP"): the library's own cost as the
# server process pays it, sockets, hyper/actix and body collection included.
#
#   core/bench/http_instructions.sh                  # axum + actix, bare verify dedup
#   N=4000 core/bench/http_instructions.sh           # a quick look
#   FRAMEWORKS=actix CONFIGS="bare dedup" core/bench/http_instructions.sh
#   SERVER=/tmp/load_server-before OUT=target/before core/bench/http_instructions.sh
#   FRAMEWORKS=axum CONFIGS="bare floor dedup" core/bench/http_instructions.sh
#
# `floor` is a hand-written middleware doing the least a
# receiver must (load_server.rs, `mod floor`): the library's own cost
# against what that costs.
#
# For each framework x configuration it starts `load_server` (this crate's
# src/bin/load_server.rs, release) under `valgrind --tool=callgrind`, sends
# WARMUP signed Standard Webhooks deliveries, zeroes the counters
# (`callgrind_control -z`), sends N more, dumps (`callgrind_control -d`) and
# divides the dump's instructions by N. The load comes from another process:
# the workspace's `webhooks send --repeat N` (cli/, release), each delivery
# signed afresh with its own id, 1 KiB JSON bodies (BODY_LEN), CONCURRENCY
# kept-alive connections. "SHA-256" is the inclusive count of sha2's block
# function (software rounds under valgrind; natively the CPU's SHA
# extensions); "own" = config - bare - SHA-256. The callgrind files stay in
# OUT for `callgrind_annotate`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

N=${N:-20000}
WARMUP=${WARMUP:-2000}
CONCURRENCY=${CONCURRENCY:-16}
BODY_LEN=${BODY_LEN:-1024}
FRAMEWORKS=${FRAMEWORKS:-"axum actix"}
CONFIGS=${CONFIGS:-"bare verify dedup"}
OUT=${OUT:-$here/target/http-instructions}
SERVER=${SERVER:-}
SEND=${SEND:-}
SECRET="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" # load_server's

command -v valgrind >/dev/null || { echo "http_instructions: needs valgrind" >&2; exit 2; }
if [[ -z $SERVER ]]; then
    (cd "$here" && nice -n 10 cargo build --release --quiet --bin load_server)
    SERVER="$here/target/release/load_server"
fi
if [[ -z $SEND ]]; then
    (cd "$root" && nice -n 10 cargo build --release --quiet -p webhooks-cli)
    SEND="${CARGO_TARGET_DIR:-$root/target}/release/webhooks"
fi
mkdir -p "$OUT"

# A 1 KiB JSON body (an invoice with its lines, padded by a note).
body="$OUT/body.json"
python3 - "$BODY_LEN" >"$body" <<'EOF'
import json, sys
want = int(sys.argv[1])
event = {"type": "invoice.paid", "timestamp": "2026-12-03T12:00:00Z",
         "data": {"id": "in_1", "customer": "cus_1", "currency": "eur", "paid": True,
                  "lines": [{"id": f"il_{i}", "amount": 1000 * i, "qty": i} for i in range(1, 4)],
                  "note": ""}}
pad = want - len(json.dumps(event, separators=(",", ":")))
event["data"]["note"] = "x" * max(pad, 0)
sys.stdout.write(json.dumps(event, separators=(",", ":")))
EOF

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

send() { # port count
    "$SEND" send standard-webhooks "http://127.0.0.1:$1/hook" --secret "$SECRET" \
        --body-file "$body" --repeat "$2" --concurrency "$CONCURRENCY" --json >/dev/null
}

# Instructions in a callgrind dump ("totals:" or "summary:").
total() {
    awk '/^(totals|summary):/ { print $2; exit }' "$1"
}

# Inclusive instructions of sha2's block function in a dump.
sha256() {
    # (awk reads to the end: an early exit would fail the pipe under pipefail)
    callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
        awk '/sha2::sha256::compress256/ && !found { gsub(/,/, "", $1); print $1; found = 1 }'
}

declare -A per
for fw in $FRAMEWORKS; do
    for cfg in $CONFIGS; do
        port="$(free_port)"
        file="$OUT/$fw-$cfg.out"
        rm -f "$file" "$file".*
        valgrind --tool=callgrind --callgrind-out-file="$file" \
            "$SERVER" "$fw" "$cfg" "$port" "http-instructions-$$" >"$OUT/$fw-$cfg.log" 2>&1 &
        pid=$!
        for _ in $(seq 1 600); do
            grep -q '^ready' "$OUT/$fw-$cfg.log" 2>/dev/null && break
            sleep 0.1
        done
        grep -q '^ready' "$OUT/$fw-$cfg.log" || { echo "http_instructions: $fw $cfg did not start" >&2; cat "$OUT/$fw-$cfg.log" >&2; kill "$pid"; exit 1; }
        send "$port" "$WARMUP"
        callgrind_control -z "$pid" >/dev/null 2>&1
        send "$port" "$N"
        callgrind_control -d "$pid" >/dev/null 2>&1
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        dump="$(ls -t "$file".* 2>/dev/null | head -1)"
        [[ -n $dump ]] || { echo "http_instructions: no dump for $fw $cfg" >&2; exit 1; }
        instr="$(total "$dump")"
        sha="$(sha256 "$dump")"
        per[$fw-$cfg]=$((instr / N))
        per[$fw-$cfg-sha]=$(( ${sha:-0} / N ))
        printf '%s %s: %d instructions a request (SHA-256 %d)\n' "$fw" "$cfg" "${per[$fw-$cfg]}" "${per[$fw-$cfg-sha]}" >&2
    done
done

printf '\n| config |'
for fw in $FRAMEWORKS; do printf ' %s |' "$fw"; done
printf '\n|---|'
for fw in $FRAMEWORKS; do printf -- '---:|'; done
printf '\n'
for cfg in $CONFIGS; do
    printf '| %s |' "$cfg"
    for fw in $FRAMEWORKS; do printf ' %d |' "${per[$fw-$cfg]}"; done
    printf '\n'
done
if [[ " $CONFIGS " == *" bare "* ]]; then
    for cfg in $CONFIGS; do
        [[ $cfg == bare ]] && continue
        printf '| own (%s − bare − SHA-256) |' "$cfg"
        for fw in $FRAMEWORKS; do
            printf ' %d |' $(( per[$fw-$cfg] - per[$fw-bare] - per[$fw-$cfg-sha] ))
        done
        printf '\n'
    done
fi
