#!/bin/sh
# run.sh FUZZER CORPUS SECONDS: bounded libFuzzer run (meson test fuzz_segment). Crash inputs are
# written next to the corpus.
set -eu
exec "$1" -max_total_time="$3" -max_len=65536 -timeout=5 -rss_limit_mb=2048 \
    -artifact_prefix="$(dirname "$2")/" -print_final_stats=1 "$2"
