#!/bin/sh
# run.sh FUZZER CORPUS SECONDS: bounded libFuzzer run (meson test fuzz_segment), inputs up to twice a
# segment (about 69 KiB: a shorter limit cuts every input below the header checks). Crash inputs are
# written next to the corpus.
set -eu
exec "$1" -max_total_time="$3" -max_len=131072 -timeout=5 -rss_limit_mb=2048 \
    -artifact_prefix="$(dirname "$2")/" -print_final_stats=1 "$2"
