#!/usr/bin/env bash
# Peak memory (maximum resident set) of `stratumc check` on generated specs of 1,000 to 50,000
# steps: the figures in the README's performance section. Needs GNU time (/usr/bin/time,
# Debian package `time`). Run from the workspace root: bash tests/benches/peak-memory.sh
set -euo pipefail
cargo build --release --quiet -p stratum-compiler --bin stratumc -p stratum-tests --bin generate-spec
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '%8s %12s %14s %10s\n' steps bytes peak_kib seconds
for steps in 1000 10000 50000; do
  spec="$dir/generated-$steps.stratum.yaml"
  target/release/generate-spec "$steps" > "$spec"
  /usr/bin/time -f '%M %e' -o "$dir/time" target/release/stratumc check "$spec" 2> /dev/null
  read -r peak seconds < "$dir/time"
  printf '%8d %12d %14d %10s\n' "$steps" "$(stat -c %s "$spec")" "$peak" "$seconds"
done
