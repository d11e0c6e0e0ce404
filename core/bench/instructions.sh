#!/usr/bin/env bash
# Instructions per delivery (docs/performance.md, "Instructions per delivery").
#
#   core/bench/instructions.sh                 # build, run all ten, print the table
#   N=2000 core/bench/instructions.sh          # fewer requests (a quick look)
#   FRAMEWORKS=actix CONFIGS="bare memory" core/bench/instructions.sh
#   BIN=/tmp/delivery_cost-before OUT=target/before core/bench/instructions.sh
#                                              # an earlier build, kept aside
#
# Builds `delivery_cost` (src/bin/delivery_cost.rs) in release, runs each
# framework x configuration under `valgrind --tool=callgrind`, collecting only
# inside `delivery_cost::measured` (the loop that sends the N requests, built
# and signed beforehand, after WARMUP others), and prints instructions per
# request. "SHA-256" is the inclusive count of the SHA-256 block function
# (software rounds under valgrind: sha2's `compress256` for this library,
# hmac-sha256's `State::blocks` for the peer crate); "own" subtracts the bare
# route and it. Takes about ten minutes. The callgrind files stay in target/delivery-cost/ for
# `callgrind_annotate --inclusive=yes target/delivery-cost/<fw>-<config>.out`.
set -euo pipefail
cd "$(dirname "$0")"

N=${N:-20000}
WARMUP=${WARMUP:-1000}
FRAMEWORKS=${FRAMEWORKS:-"axum actix"}
CONFIGS=${CONFIGS:-"bare memory verify duplicate peer"}
OUT=${OUT:-target/delivery-cost}
BIN=${BIN:-}

if [[ -z $BIN ]]; then
    nice -n 10 cargo build --release --quiet --bin delivery_cost
    BIN=target/release/delivery_cost
fi
mkdir -p "$OUT"

# The SHA-256 block functions' instructions in a callgrind file: sha2's
# `compress256` and the software rounds it calls (this library), and
# hmac-sha256's `State::blocks` with its `W::*` rounds (the peer crate).
# They call nothing else, so their own instructions summed are their
# inclusive count (callgrind_annotate lists a function once per source file
# its inlined code comes from).
sha_blocks() {
    callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null |
        awk '/:(sha2::sha256::(compress256|soft::)|hmac_sha256::(State::blocks|W::))/ {
                 gsub(",", "", $1); sum += $1
             }
             END { print sum + 0 }'
}

# The instructions collected in a callgrind file.
total() {
    awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

declare -A PER SHA
for fw in $FRAMEWORKS; do
    for config in $CONFIGS; do
        file="$OUT/$fw-$config.out"
        echo "running $fw $config ($N requests after $WARMUP)..." >&2
        nice -n 10 valgrind --tool=callgrind --toggle-collect='delivery_cost::measured' \
            --callgrind-out-file="$file" \
            "$BIN" "$fw" "$config" "$N" "$WARMUP" \
            2>"$OUT/$fw-$config.log"
        PER[$fw.$config]=$(( $(total "$file") / N ))
        SHA[$fw.$config]=$(( $(sha_blocks "$file") / N ))
    done
done

row() {
    local label=$1 expr=$2
    printf '| %s |' "$label"
    for fw in $FRAMEWORKS; do
        local value
        value=$(eval "$expr" 2>/dev/null) || value=""
        printf ' %s |' "$value"
    done
    printf '\n'
}
fig() { [[ -n "${PER[$fw.$1]:-}" ]] && echo "${PER[$fw.$1]}"; }
sha() { [[ -n "${SHA[$fw.$1]:-}" ]] && echo "${SHA[$fw.$1]}"; }
own() { [[ -n "${PER[$fw.$1]:-}" && -n "${PER[$fw.bare]:-}" ]] &&
    echo $(( PER[$fw.$1] - PER[$fw.bare] - SHA[$fw.$1] )); }

printf '\n%s requests after %s, instructions per request\n\n' "$N" "$WARMUP"
printf '| |'; for fw in $FRAMEWORKS; do printf ' %s |' "$fw"; done; printf '\n'
printf '|---|'; for _ in $FRAMEWORKS; do printf -- '---:|'; done; printf '\n'
for config in $CONFIGS; do
    row "$config" "fig $config"
done
for config in $CONFIGS; do
    [[ $config == bare ]] && continue
    row "$config: SHA-256 blocks" "sha $config"
done
for config in $CONFIGS; do
    [[ $config == bare ]] && continue
    case $config in
        memory) label="**own cost** (memory − bare − SHA-256)" ;;
        *) label="$config − bare − SHA-256" ;;
    esac
    row "$label" "own $config"
done
