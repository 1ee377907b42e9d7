#!/usr/bin/env python3
"""make_corpus.py DIR [PROGRAM ARGS...]: seeds the fuzz corpus with a few headers that pass the
magic and version checks, and (when PROGRAM is given, run with the shim preloaded by the caller's
environment) a real segment as the shim writes it at exit, so the fuzzer reaches the size, count,
string and record checks quickly."""
import os
import struct
import subprocess
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
magic = b"CUSHIMSG"
for i, version in enumerate((1, 2, 0xFFFFFFFF)):
    hdr = magic + struct.pack("<IIIIIIII", version, 512, 768, 64, 10, 6, 17, 49664)
    with open(os.path.join(out, f"seed{i}"), "wb") as f:
        f.write(hdr + b"\0" * 64)
if len(sys.argv) > 2:
    env = dict(os.environ, CUSHIM_RUN_DIR=os.path.abspath(out))
    subprocess.run(sys.argv[2:], env=env, check=True, stdout=subprocess.DEVNULL)
