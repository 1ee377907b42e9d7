#!/usr/bin/env python3
"""The GPU validation suite of scripts/gpu-check (issue 6).

usage: run.py OUTDIR --root DIR --build DIR --bin DIR [--dry-run] [--budget SECONDS]

Runs the checks in order of value; after each one rewrites OUTDIR/gpu-report.json and
OUTDIR/gpu-report.md (so a run cut short still reports what it measured). Each check records its
expected value, its measured value and a verdict: pass, fail, info (a benchmark figure with no
threshold), or "not run: REASON" (never counted as passed).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20


class Suite:
    def __init__(self, args):
        self.args = args
        self.results = []
        self.start = time.monotonic()
        self.tmp = tempfile.mkdtemp(prefix="cushim-gpu.")
        self.shim = os.path.join(args.build, "shim", "libcushim.so")
        self.cushim = os.path.join(args.build, "tools", "cushim")
        self.static = os.path.join(args.bin, "gpu_checks_static")
        self.shared = os.path.join(args.bin, "gpu_checks_shared")
        self.torch_checks = os.path.join(args.root, "tests", "gpu", "torch_checks.py")
        self.platform = {}

    # ---- running things ----
    def env(self, shim=True, extra=None):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env["CUSHIM_SEGMENT_DIR"] = self.tmp
        env["GPUCHECK_CUSHIM"] = self.cushim
        if shim:
            env["LD_PRELOAD"] = self.shim
        env.update(extra or {})
        return env

    def run(self, cmd, shim=True, extra=None, timeout=120):
        p = subprocess.run(cmd, env=self.env(shim, extra), capture_output=True, text=True,
                           timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                      (p.stderr or p.stdout)[-800:]))
        return p.stdout

    @staticmethod
    def kv_lines(text):
        """Lines of "k=v k=v" into a list of dicts (numbers where they parse)."""
        rows = []
        for line in text.splitlines():
            row = {}
            for item in line.split():
                if "=" in item:
                    k, v = item.split("=", 1)
                    try:
                        row[k] = int(v)
                    except ValueError:
                        try:
                            row[k] = float(v)
                        except ValueError:
                            row[k] = v
            if row:
                rows.append(row)
        return rows

    def kv(self, text):
        merged = {}
        for row in self.kv_lines(text):
            merged.update(row)
        return merged

    # ---- reporting ----
    def record(self, name, description, expected, measured, verdict, seconds):
        self.results.append({"check": name, "description": description, "expected": expected,
                             "measured": measured, "verdict": verdict,
                             "seconds": round(seconds, 2)})
        self.write()
        print("%-26s %s: %s" % (name, verdict, measured)[:300],
              flush=True)

    def write(self):
        out = self.args.outdir
        os.makedirs(out, exist_ok=True)
        report = {"platform": self.platform, "dry_run": self.args.dry_run,
                  "checks": self.results}
        tmp = os.path.join(out, ".gpu-report.json.tmp")
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp, os.path.join(out, "gpu-report.json"))
        lines = ["# cushim GPU validation", ""]
        for k, v in self.platform.items():
            lines.append("- %s: %s" % (k, v))
        lines += ["", "| check | expected | measured | verdict |", "| --- | --- | --- | --- |"]
        for r in self.results:
            lines.append("| %s | %s | %s | %s |" % (r["check"], r["expected"],
                                                   str(r["measured"]).replace("|", "/"),
                                                   r["verdict"]))
        tmp = os.path.join(out, ".gpu-report.md.tmp")
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, os.path.join(out, "gpu-report.md"))

    def probe_platform(self):
        self.platform["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30)
            self.platform["gpu"] = smi.stdout.strip() or "none"
        except (OSError, subprocess.TimeoutExpired):
            self.platform["gpu"] = "none (nvidia-smi not found)"
        try:
            nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True)
            self.platform["nvcc"] = nvcc.stdout.strip().splitlines()[-1]
        except OSError:
            self.platform["nvcc"] = "none"
        try:
            import torch  # noqa: F401
            self.platform["torch"] = "%s (CUDA %s)" % (torch.__version__, torch.version.cuda)
        except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
            self.platform["torch"] = "none (%s)" % type(e).__name__

    def has_torch(self):
        return not self.platform.get("torch", "none").startswith("none")


# ---- the checks, in order of value ----
def exactness(suite, prog):
    rows = [r for r in suite.kv_lines(suite.run([prog, "exactness"])) if "size" in r]
    bad = [r for r in rows if r["shim_delta"] != r["size"] or
           abs(r["driver_delta"] - r["shim_delta"]) >= 2 * MiB]
    measured = "; ".join("%d: shim %d driver %d" % (r["size"], r["shim_delta"], r["driver_delta"])
                         for r in rows)
    return ("shim device_total delta = requested bytes; |cuMemGetInfo delta - shim delta| < 2 MiB",
            measured, "pass" if rows and not bad else "fail")


def check_exactness_static(suite):
    return exactness(suite, suite.static)


def check_exactness_shared(suite):
    return exactness(suite, suite.shared)


def torch_peak(suite, expandable):
    extra = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if expandable else {}
    r = json.loads(suite.run([sys.executable, suite.torch_checks, "peak"], extra=extra,
                             timeout=180).splitlines()[-1])
    ok = (r["first"]["shim_peak"] == r["first"]["torch_max_reserved"] and
          r["after_reset"]["shim_peak"] == r["after_reset"]["torch_max_reserved"])
    return ("shim device peak = torch.cuda.max_memory_reserved(), before and after "
            "reset_peak (ctypes) / reset_peak_memory_stats", r, "pass" if ok else "fail")


def check_torch_peak(suite):
    return torch_peak(suite, False)


def check_torch_peak_expandable(suite):
    return torch_peak(suite, True)


def check_torch_graph(suite):
    r = json.loads(suite.run([sys.executable, suite.torch_checks, "graph"], timeout=180).splitlines()[-1])
    ok = r["capture_bytes"] == r["reserved_growth"] and r["launches"] == r["replays"]
    return ("capture bytes = growth of memory_reserved() over the capture; launches = replays",
            r, "pass" if ok else "fail")


def check_harmless(suite):
    plain = suite.kv(suite.run([suite.static, "harmless"], shim=False))["hash"]
    shimmed = suite.kv(suite.run([suite.static, "harmless"]))["hash"]
    shared = suite.kv(suite.run([suite.shared, "harmless"]))["hash"]
    return ("output hash identical with and without the shim (static and shared cudart)",
            "plain %s, shim %s, shim+shared %s" % (plain, shimmed, shared),
            "pass" if plain == shimmed == shared else "fail")


OFFLOAD = {"CUSHIM_OFFLOAD": "always", "CUSHIM_OFFLOAD_MIN": "64MiB"}


def check_offload_vecadd(suite):
    plain = suite.kv(suite.run([suite.static, "vecadd"], shim=False))
    off = suite.kv(suite.run([suite.static, "vecadd"], extra=OFFLOAD))
    ok = plain["hash"] == off["hash"] and off["wrong"] == 0 and off["offloaded"] == 3 * 256 * MiB
    return ("vector add over 3 x 256 MiB offloaded arrays: same result as on the device, all offloaded",
            "plain %s, offloaded %s (%d wrong, %d bytes offloaded)" % (plain["hash"], off["hash"],
                                                                        off["wrong"], off["offloaded"]),
            "pass" if ok else "fail")


def check_offload_sgemm(suite):
    prog = suite.static
    extra = {"CUSHIM_OFFLOAD": "always", "CUSHIM_OFFLOAD_MIN": "8MiB"}
    plain = suite.kv(suite.run([prog, "sgemm"], shim=False))
    off = suite.kv(suite.run([prog, "sgemm"], extra=extra))
    ok = plain["hash"] == off["hash"] and off["offloaded"] == 3 * 16 * MiB
    return ("cuBLAS SGEMM 2048^3 with A, B, C offloaded: result identical to the plain run",
            "plain %s, offloaded %s (%d bytes offloaded)" % (plain["hash"], off["hash"], off["offloaded"]),
            "pass" if ok else "fail")


def check_torch_offload_forward(suite):
    a = os.path.join(suite.tmp, "plain.pt")
    b = os.path.join(suite.tmp, "offload.pt")
    plain = json.loads(suite.run([sys.executable, suite.torch_checks, "forward", a], timeout=180).splitlines()[-1])
    off = json.loads(suite.run([sys.executable, suite.torch_checks, "forward", b], extra=OFFLOAD,
                               timeout=180).splitlines()[-1])
    import torch
    same = bool(torch.equal(torch.load(a), torch.load(b)))
    drop = plain["device_drop"] - off["device_drop"]
    ok = same and off["offloaded_current"] > 0 and abs(drop - off["offloaded_current"]) <= 2 * MiB * max(1, off["offloaded_allocs"])
    return ("forward of 3 x Linear(8192, 8192) under CUSHIM_OFFLOAD=always, 64 MiB: same output; "
            "device memory saved (cudaMemGetInfo) = offloaded bytes",
            {"same_output": same, "device_saved": drop, "offloaded": off["offloaded_current"],
             "plain": plain, "offload": off}, "pass" if ok else "fail")


def check_async_exactness(suite):
    rows = [r for r in suite.kv_lines(suite.run([suite.static, "async"])) if "size" in r]
    ok = rows and all(r["shim_delta"] == r["size"] and r["driver_delta"] == r["pool_reserved_delta"] for r in rows)
    return ("cudaMallocAsync: shim async delta = requested; cuMemGetInfo delta = pool reserve delta",
            "; ".join("%d: shim %d driver %d pool %d" % (r["size"], r["shim_delta"], r["driver_delta"],
                                                          r["pool_reserved_delta"]) for r in rows),
            "pass" if ok else "fail")


def check_vmm_exactness(suite):
    rows = [r for r in suite.kv_lines(suite.run([suite.static, "vmm"])) if "size" in r]
    ok = rows and all(r["shim_delta"] == r["size"] == r["driver_delta"] and
                      r["after_release"] == r["size"] and r["after_unmap"] == 0 for r in rows)
    return ("cuMemCreate+cuMemMap: shim vmm delta = cuMemGetInfo delta = size; counted until "
            "both released and unmapped",
            "; ".join("%d: shim %d driver %d released %d unmapped %d" % (
                r["size"], r["shim_delta"], r["driver_delta"], r["after_release"], r["after_unmap"])
                for r in rows), "pass" if ok else "fail")


def check_nvidia_smi(suite):
    p = subprocess.Popen([suite.static, "hold", "6"], env=suite.env(), stdout=subprocess.PIPE,
                         text=True)
    info = {}
    for line in p.stdout:
        info.update(suite.kv(line))
        if "ready" in info:
            break
    pid = info["pid"]
    stat = json.loads(subprocess.run([suite.cushim, "stat", str(pid), "--json"], env=suite.env(shim=False),
                                     capture_output=True, text=True, check=True).stdout)[0]
    smi = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    p.terminate()
    p.wait()
    used = None
    for line in smi.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) > 1 and parts[0] == str(pid) and parts[1].isdigit():
            used = int(parts[1]) * MiB
    d = stat["devices"][0]
    if used is None and not smi.strip():
        # Containers often hide other pid namespaces from nvidia-smi's process list.
        return ("nvidia-smi used_memory of the process = shim device_total + untracked_bytes",
                {"device_total": d["device_total"]["current_bytes"], "untracked": d["untracked_bytes"]},
                "not run: nvidia-smi lists no compute processes here (container pid namespace?)")
    ours = d["device_total"]["current_bytes"] + d["untracked_bytes"]
    ok = used is not None and abs(used - ours) <= 64 * MiB
    return ("nvidia-smi used_memory of the process = shim device_total + untracked_bytes (within 64 MiB)",
            {"nvidia_smi": used, "device_total": d["device_total"]["current_bytes"],
             "untracked": d["untracked_bytes"]}, "pass" if ok else "fail")


def check_bench_overhead(suite):
    cases = [("4 KiB", ["4096", "20000"]), ("1 MiB", [str(MiB), "20000"]),
             ("256 MiB", [str(256 * MiB), "300"]), ("async 1 MiB", [str(MiB), "50000", "async"])]
    measured, worst = {}, 0.0
    for label, args in cases:
        ratios, plain_ns, shim_ns = [], [], []
        for _ in range(5):  # alternated: plain, shim, plain, shim, ...
            a = suite.kv(suite.run([suite.static, "overhead"] + args, shim=False))["ns_per_pair"]
            b = suite.kv(suite.run([suite.static, "overhead"] + args))["ns_per_pair"]
            plain_ns.append(a)
            shim_ns.append(b)
            ratios.append(b / a)
        r = statistics.median(ratios)
        worst = max(worst, r)
        measured[label] = "plain %.0f ns, shim %.0f ns, ratio %.3f" % (
            statistics.median(plain_ns), statistics.median(shim_ns), r)
    return ("per-pair time with the shim / without <= 1.01 (median of 5 alternated runs)",
            measured, "pass" if worst <= 1.01 else "fail (benchmark target)")


def check_bench_threads(suite):
    ratios = []
    for _ in range(3):
        a = suite.kv(suite.run([suite.static, "threads", "16", "2000"], shim=False))["seconds"]
        b = suite.kv(suite.run([suite.static, "threads", "16", "2000"]))["seconds"]
        ratios.append(b / a)
    return ("16 threads x 2000 cudaMalloc/cudaFree (1 MiB): time with shim / without",
            "ratios %s" % ", ".join("%.3f" % r for r in ratios), "info")


def check_bench_offload_bandwidth(suite):
    dev = suite.kv(suite.run([suite.static, "bandwidth"], shim=False))
    off = suite.kv(suite.run([suite.static, "bandwidth"], extra=OFFLOAD))
    return ("kernel read bandwidth: device vs offloaded buffer vs host-to-device copy",
            "device %.0f GB/s, offloaded %.1f GB/s (%d bytes offloaded), H2D copy %.1f GB/s" % (
                dev["kernel_read_gbps"], off["kernel_read_gbps"], off["offloaded"], dev["h2d_copy_gbps"]),
            "info")


def check_bench_pinned_cost(suite):
    rows = [r for r in suite.kv_lines(suite.run([suite.static, "pinned_cost"], shim=False)) if "gib" in r]
    return ("cudaHostAlloc(PORTABLE|MAPPED) cost per GiB",
            "; ".join("%d GiB: alloc %.1f ms/GiB, free %.1f ms/GiB" % (
                r["gib"], r["alloc_ms_per_gib"], r["free_ms_per_gib"]) for r in rows), "info")


CHECKS = [
    ("exactness_static", check_exactness_static, False, "cudaMalloc 1 B..4 GiB, static cudart"),
    ("exactness_shared", check_exactness_shared, False, "cudaMalloc 1 B..4 GiB, -cudart shared"),
    ("torch_peak", check_torch_peak, True, "PyTorch caching allocator peak"),
    ("torch_peak_expandable", check_torch_peak_expandable, True, "same with expandable_segments"),
    ("torch_graph", check_torch_graph, True, "PyTorch CUDA graph capture and replay"),
    ("harmless", check_harmless, False, "bit-identical outputs"),
    ("offload_vecadd", check_offload_vecadd, False, "kernels on offloaded memory"),
    ("offload_sgemm", check_offload_sgemm, False, "cuBLAS on offloaded memory"),
    ("torch_offload_forward", check_torch_offload_forward, True, "PyTorch forward, offload always"),
    ("async_exactness", check_async_exactness, False, "stream-ordered pools"),
    ("vmm_exactness", check_vmm_exactness, False, "virtual memory management"),
    ("nvidia_smi", check_nvidia_smi, False, "per-process figure vs nvidia-smi"),
    ("bench_overhead", check_bench_overhead, False, "per-call overhead, alternated"),
    ("bench_threads", check_bench_threads, False, "16 threads allocating at once"),
    ("bench_offload_bandwidth", check_bench_offload_bandwidth, False, "offload bandwidth"),
    ("bench_pinned_cost", check_bench_pinned_cost, False, "pinned allocation cost"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds after which no further check starts")
    args = ap.parse_args()
    suite = Suite(args)
    suite.probe_platform()
    print("checks (in order):")
    for name, _, torch_needed, what in CHECKS:
        print("  %-24s %s%s" % (name, what, " (PyTorch)" if torch_needed else ""))
    for name, fn, torch_needed, what in CHECKS:
        t0 = time.monotonic()
        if args.dry_run:
            suite.record(name, what, "-", "-", "not run: dry run (no GPU used)", 0)
            continue
        if torch_needed and not suite.has_torch():
            suite.record(name, what, "-", "-", "not run: PyTorch is not installed", 0)
            continue
        if time.monotonic() - suite.start > args.budget:
            suite.record(name, what, "-", "-", "not run: time budget of %.0f s spent" % args.budget, 0)
            continue
        try:
            expected, measured, verdict = fn(suite)
        except Exception as e:  # noqa: BLE001 - a failing check must not stop the others
            expected, measured, verdict = "-", "%s: %s" % (type(e).__name__, e), "error"
        suite.record(name, what, expected, measured, verdict, time.monotonic() - t0)
    shutil.rmtree(suite.tmp, ignore_errors=True)
    failed = [r["check"] for r in suite.results if r["verdict"] in ("fail", "error")]
    print("reports: %s/gpu-report.md, %s/gpu-report.json" % (args.outdir, args.outdir))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
