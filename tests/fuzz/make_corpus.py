#!/usr/bin/env python3
"""make_corpus.py DIR [PROGRAM ARGS...]: seeds the fuzz corpus with a few headers that pass the
magic and version checks, and (when PROGRAM is given, run with the shim preloaded by the caller's
environment) a real segment as the shim writes it at exit, so the fuzzer reaches the size, count,
string and record checks quickly."""
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
magic = b"CUSHIMSG"
for i, version in enumerate((1, 2, 0xFFFFFFFF)):
    hdr = magic + struct.pack("<IIIIIIII", version, 512, 768, 64, 10, 6, 17, 49664)
    with open(os.path.join(out, f"seed{i}"), "wb") as f:
        f.write(hdr + b"\0" * 64)
if len(sys.argv) > 2:
    # The shim writes its exit copy only into a directory like the ones `cushim run` makes.
    run_dir = tempfile.mkdtemp(prefix="cushim-run.")
    try:
        env = dict(os.environ, CUSHIM_RUN_DIR=run_dir)
        subprocess.run(sys.argv[2:], env=env, check=True, stdout=subprocess.DEVNULL)
        for seg in glob.glob(os.path.join(run_dir, "*.seg")):
            shutil.copy(seg, os.path.join(out, "real.seg"))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
