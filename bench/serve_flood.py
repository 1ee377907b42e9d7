#!/usr/bin/env python3
"""Requests per second `cushim serve` answers to one client asking as fast as it can, over a segment
directory of N files (random bytes: each is opened, mapped and rejected, as a scan does).
Usage: bench/serve_flood.py [CUSHIM_BINARY] [N_FILES] (defaults: build/tools/cushim, 2000)."""
import os
import socket
import subprocess
import sys
import tempfile
import time

cushim = sys.argv[1] if len(sys.argv) > 1 else "build/tools/cushim"
n_files = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
with tempfile.TemporaryDirectory() as d:
    for i in range(n_files):
        with open(f"{d}/cushim-0-{100000 + i}", "wb") as f:
            f.write(os.urandom(4096))
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([cushim, "serve", "--listen", f"127.0.0.1:{port}"],
                           env={"CUSHIM_SEGMENT_DIR": d}, stderr=subprocess.DEVNULL)

    def get():
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            while c.recv(65536):
                pass

    for _ in range(100):
        try:
            get()
            break
        except OSError:
            time.sleep(0.05)
    t0, n = time.time(), 0
    while time.time() - t0 < 3:
        get()
        n += 1
    print(f"{n / 3:.0f} requests/s over {n_files} segment files")
    srv.terminate()
    srv.wait()
