#!/usr/bin/env bash
# The risk classifier's cost per exec (issue 15): median, p99 and mean time of
# Classifier::classify_exec with the built-in rules over N typical commands.
# This is the time added to each exec once `--ask` decides execs.
#
# Usage: bench/classifier.sh [N]      (default 100000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec cargo run --quiet --release --manifest-path "$root/Cargo.toml" -p vg-policy --example classifier -- "${1:-100000}"
