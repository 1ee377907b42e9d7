#!/usr/bin/env python3
"""The GPU validation suite of scripts/gpu-check (issue 6).

usage: run.py OUTDIR --root DIR --build DIR --bin DIR [--log FILE] [--dry-run]
              [--deadline EPOCH_SECONDS]

Runs the checks in order of value; after each one rewrites OUTDIR/gpu-report.json and
OUTDIR/gpu-report.md (so a run cut short still reports what it measured). Each check records its
expected value, its measured value and a verdict: pass, fail, info (a benchmark figure with no
threshold), or "not run: REASON" (never counted as passed). No check starts, and no program
runs on, past the deadline (scripts/gpu-check sets it so that the whole run, build included,
ends within 4 minutes). Every program's command, exit status and standard error are appended to
the log (--log; scripts/gpu-check: OUTDIR/gpu-check.log).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MiB = 1 << 20
GiB = 1 << 30


class DeadlineReached(TimeoutError):
    """The run's deadline came before or during a check: it is reported "not run", not "error"."""


class NotBuilt(RuntimeError):
    """A program the check needs was not built (scripts/gpu-check said why): "not run"."""


class ProgramFailed(RuntimeError):
    """A program exited non-zero or ran past its own time limit: "error", with what it printed
    (a crash at exit still shows the figures it had measured)."""


class Suite:
    def __init__(self, args):
        self.args = args
        self.results = []
        self.deadline = args.deadline if args.deadline else time.time() + 200
        self.tmp = tempfile.mkdtemp(prefix="cushim-gpu.")
        self.shim = os.path.join(args.build, "shim", "libcushim.so")
        self.cushim = os.path.join(args.build, "tools", "cushim")
        self.static = os.path.join(args.bin, "gpu_checks_static")
        self.shared = os.path.join(args.bin, "gpu_checks_shared")
        self.torch_checks = os.path.join(args.root, "tests", "gpu", "torch_checks.py")
        self.platform = {}
        self.log = getattr(args, "log", None)
        self.exit_failures = []  # of the check running: programs that failed at exit after their work
        self.persistence = "?"  # nvidia-smi's persistence_mode, once probed
        self.torch_probe = None  # (Popen, start) of the PyTorch probe while it runs

    # ---- running things ----
    def env(self, shim=True, extra=None):
        # Nothing inherited changes what is measured: no CUSHIM_* setting of the caller (a report on
        # stdout, an offload policy) reaches the programs, only those a check sets.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUSHIM_")}
        env.pop("LD_PRELOAD", None)
        env["CUSHIM_SEGMENT_DIR"] = self.tmp
        env["GPUCHECK_CUSHIM"] = self.cushim
        if shim:
            env["LD_PRELOAD"] = self.shim
        for k, v in (extra or {}).items():  # None: the variable is removed
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def left(self):
        """Seconds until the deadline."""
        return self.deadline - time.time()

    def note(self, text):
        """Appends text to the log (--log), if any."""
        if self.log:
            with open(self.log, "a") as f:
                f.write(text if text.endswith("\n") else text + "\n")

    @staticmethod
    def text(b):
        return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

    def require(self, cmd, shim):
        """Raises NotBuilt when cmd's program (or the shim, with shim=True) is missing."""
        exe = cmd[1] if cmd[0] == sys.executable else cmd[0]
        if not os.path.exists(exe):
            raise NotBuilt("%s was not built (see the log)" % os.path.basename(exe))
        if shim and self.shim and not os.path.exists(self.shim):
            raise NotBuilt("the shim (%s) was not built (see the log)" % self.shim)

    def run(self, cmd, shim=True, extra=None, timeout=30):
        """Runs cmd (with the shim preloaded unless shim=False) and returns its standard output.
        timeout: the program's own limit in seconds; a C program's work here takes a few seconds,
        so a hang costs little of the run's 4 minutes."""
        if self.left() < 5:
            raise DeadlineReached("the run's deadline has passed")
        self.require(cmd, shim)
        limit = min(timeout, self.left())
        label = "%s%s" % ("[shim] " if shim else "", " ".join(cmd))
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, env=self.env(shim, extra), capture_output=True, text=True,
                               errors="replace", timeout=limit)
        except subprocess.TimeoutExpired as e:
            out, err = self.text(e.stdout), self.text(e.stderr)
            self.note("== %s: killed after %.0f s\n%s%s" % (label, limit, out[-2000:], err[-4000:]))
            if limit < timeout:  # cut by the deadline, not by the program's own limit
                raise DeadlineReached("the run's deadline came while %s ran" % " ".join(cmd)) from None
            raise ProgramFailed("%s ran past its %d s (a hang?): stdout %r, stderr %r" % (
                label, timeout, out[-600:], err[-600:])) from None
        self.note("== %s: exit %d in %.1f s\n%s" % (label, p.returncode, time.monotonic() - t0,
                                                      p.stderr[-4000:]))
        c_program = cmd[0] in (self.static, self.shared)
        if c_program:
            # gpu_checks says whether the shim is in it: a preload the loader refused ("cannot be
            # preloaded ... ignored") must not pass as a run under the shim. A program that said
            # nothing (a crash at load) is judged by its exit below.
            loaded = self.kv(p.stdout).get("shim_loaded")
            if loaded is not None and loaded != (1 if shim else 0):
                raise ProgramFailed("%s ran %s the shim (shim_loaded=%s): stderr %r" % (
                    label, "without" if shim else "with", loaded, p.stderr[-600:]))
        if p.returncode != 0:
            lines = p.stdout.strip().splitlines()
            finished = (self.kv(p.stdout).get("done") == 0 if c_program else
                        bool(lines) and lines[-1].startswith("{"))
            if not finished or (c_program and loaded is None):
                raise ProgramFailed("%s exited %d: stdout %r, stderr %r" % (
                    label, p.returncode, p.stdout[-600:], p.stderr[-600:]))
            # Its work done and printed, the exit failed (a crash in an exit handler): the figures
            # are judged, and the check fails for the exit (run.py main).
            # -14 (SIGALRM): its exit hung and its own alarm ended it (gpu_checks.cu main, 10 s;
            # torch_checks.py main, 20 s).
            self.exit_failures.append("%s exited %d after its work%s" % (
                label, p.returncode, " (SIGALRM: its exit hung, ended by its own alarm)" if p.returncode == -14 else ""))
        return p.stdout

    INT = re.compile(r"-?[0-9]+")
    FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*|inf|nan)")

    @classmethod
    def kv_lines(cls, text):
        """Lines of "k=v k=v" into a list of dicts: a decimal integer (%d, %zu, %llu) becomes an int,
        a fixed-point number (%.1f; inf, nan) a float, anything else stays a string: the hashes
        (0x%016llx) too, which int() or float() might otherwise read ("1e5" is a float)."""
        rows = []
        for line in text.splitlines():
            row = {}
            for item in line.split():
                if "=" in item:
                    k, v = item.split("=", 1)
                    if cls.INT.fullmatch(v):
                        row[k] = int(v)
                    elif cls.FLOAT.fullmatch(v):
                        row[k] = float(v)
                    else:
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
        """The machine, driver, toolkit and PyTorch: each probe in its own process with a time
        limit (a torch import that hangs or crashes costs its own line, not the run)."""
        self.platform["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        # What explains memory noise and odd timings: the kernel (gVisor, Firecracker), the GPU's
        # modes, and any process already on it.
        self.platform["kernel"] = os.uname().release
        gpus = smi_query(self, "--query-gpu=name,driver_version,memory.total,persistence_mode,"
                               "compute_mode,mig.mode.current,memory.used", limit=20)
        if gpus is None:
            self.platform["gpu"] = "none (nvidia-smi missing, failing or silent for 20 s: see the log)"
        else:
            g = (gpus[0] if gpus else []) + ["?"] * 7
            self.platform["gpu"] = "%s, driver %s, %s MiB" % tuple(g[:3]) if gpus else "none"
            self.persistence = g[3]
            if gpus:
                self.platform["gpu_modes"] = ("persistence %s, compute mode %s, MIG %s, %s MiB used "
                                              "before the checks" % tuple(g[3:7]))
            apps = smi_query(self, "--query-compute-apps=pid,process_name,used_memory", limit=20) or []
            self.platform["gpu_processes_before"] = "; ".join(", ".join(a) for a in apps) or "none"
        self.write()
        nvcc_out = ""
        try:
            nvcc = subprocess.run([os.environ.get("NVCC", "nvcc"), "--version"], capture_output=True,
                                  text=True, timeout=30)
            nvcc_out = nvcc.stdout
            self.platform["nvcc"] = nvcc.stdout.strip().splitlines()[-1]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            self.platform["nvcc"] = "none"
        if gpus:
            banner = smi_banner(self)
            driver = cuda_version(r"CUDA Version:\s*(\d+)\.(\d+)", banner)
            if driver:
                self.platform["driver_cuda"] = "%d.%d" % driver
            warning = toolkit_newer_than_driver(nvcc_out, banner)
            if warning:
                self.platform["warning"] = warning
        self.probe_torch_start()  # answered while the C checks run (has_torch waits for it)
        self.write()

    def probe_torch_start(self):
        """Starts asking another interpreter for PyTorch's version and CUDA (importing torch takes
        seconds, cold tens of seconds: it runs beside the C checks)."""
        code = ("import json, torch; print(json.dumps([torch.__version__, torch.version.cuda, "
                "torch.cuda.is_available()]))")
        self.torch_probe = None
        # is_available() asks NVML, not the driver (PYTORCH_NVML_BASED_CUDA_CHECK): no cuInit on the
        # GPU while the C checks measure cudaMemGetInfo deltas.
        try:
            self.torch_probe = (subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True, errors="replace",
                                                 env=self.env(False, {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"})),
                               time.monotonic())
        except OSError as e:
            self.platform["torch"] = "none (%s)" % e

    def probe_torch_finish(self):
        """The probe's answer, waiting for it until 90 s after it started (or the deadline):
        "none (...)" when PyTorch is missing, built without CUDA, or sees no GPU: its checks then
        say not run."""
        p, started = self.torch_probe
        self.torch_probe = None
        limit = max(1, min(90 - (time.monotonic() - started), self.left() - 20))
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            return "none (importing torch took over %d s)" % (time.monotonic() - started)
        if p.returncode != 0:
            last = (err.strip().splitlines() or ["exit %d" % p.returncode])[-1]
            return "none (%s)" % last[:200]
        try:
            version, cuda, available = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError, TypeError):
            return "none (unexpected answer %r)" % out[-200:]
        if cuda is None:
            return "none (torch %s is a CPU-only build)" % version
        if not available:
            return "none (torch %s, CUDA %s, sees no GPU: torch.cuda.is_available() is false)" % (version, cuda)
        return "%s (CUDA %s)" % (version, cuda)

    def probe_torch(self):
        """probe_torch_start, then probe_torch_finish."""
        self.probe_torch_start()
        return self.platform.get("torch") if self.torch_probe is None else self.probe_torch_finish()

    def has_torch(self):
        if getattr(self, "torch_probe", None) is not None:
            try:
                self.platform["torch"] = self.probe_torch_finish()
            except Exception as e:  # noqa: BLE001 - the probe must never stop the run
                self.platform["torch"] = "none (probing it failed: %s: %s)" % (type(e).__name__, e)
            self.write()
        return not self.platform.get("torch", "none").startswith("none")


# ---- the checks, in order of value ----
def exactness(suite, prog):
    rows = [r for r in suite.kv_lines(suite.run([prog, "exactness"])) if "size" in r]
    # The driver rounds each allocation up to 2 MiB and may serve a small one from a chunk it
    # already holds (delta 0), or add a page-table page: cuMemGetInfo's delta lies in
    # [size - 2 MiB, roundup(size, 2 MiB) + 2 MiB]. The shim's delta is exact.
    def driver_ok(r):
        rounded = -(-r["size"] // (2 * MiB)) * 2 * MiB
        return max(0, r["size"] - 2 * MiB) <= r["driver_delta"] <= rounded + 2 * MiB
    bad = [r for r in rows if r["shim_delta"] != r["size"] or not driver_ok(r)]
    measured = "; ".join("%d: shim %d driver %d" % (r["size"], r["shim_delta"], r["driver_delta"])
                         for r in rows)
    return ("shim device_total delta = requested bytes; cuMemGetInfo delta within "
            "[size - 2 MiB, roundup(size, 2 MiB) + 2 MiB]",
            measured, "pass" if len(rows) == 8 and not bad else "fail")


def check_exactness_static(suite):
    return exactness(suite, suite.static)


def check_exactness_shared(suite):
    return exactness(suite, suite.shared)


def torch_env(expandable=False, extra=None, conf=None):
    """PyTorch's allocator settings, set explicitly so that nothing inherited changes a check:
    under the older name, PYTORCH_CUDA_ALLOC_CONF, which every version reads (2.9 and later warn
    that it is deprecated), and the newer PYTORCH_ALLOC_CONF removed: where it is read, it is read
    first and alone, and 2.9.1 ignores expandable_segments in it (pytorch/pytorch#183387)."""
    conf = conf or ("expandable_segments:True" if expandable else "expandable_segments:False")
    # cuBLAS's workspaces from the caching allocator, so that they are in memory_reserved() as in
    # the shim's device figures: a PyTorch that makes that caching opt-in (TORCH_CUBLAS_WORKSPACE_
    # CACHE) would let cuBLAS allocate its own (a review); older ones ignore the variable.
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf, "PYTORCH_ALLOC_CONF": None, "TORCH_CUBLAS_WORKSPACE_CACHE": "1"}
    env.update(extra or {})
    return env


def torch_run(suite, args, expandable=False, extra=None, conf=None):
    return json.loads(suite.run([sys.executable, suite.torch_checks] + args,
                                extra=torch_env(expandable, extra, conf), timeout=60).splitlines()[-1])


def torch_peak(suite, expandable):
    r = torch_run(suite, ["peak"], expandable)
    ok = (r["first"]["shim_peak"] > 0 and
          r["first"]["shim_peak"] == r["first"]["torch_max_reserved"] and
          r["after_reset"]["shim_peak"] == r["after_reset"]["torch_max_reserved"])
    # The allocator really took the path under test: VMM with expandable segments, else cudaMalloc
    # (other libraries, such as cuBLAS, may still cudaMalloc a little on their own).
    ok = ok and r["vmm_current" if expandable else "device_current"] > 0
    if expandable and r["vmm_current"] == 0 and r["expandable_in_use"] is False:
        # PyTorch itself did not take expandable segments here (a build or platform without them,
        # or a setting it ignored): the shim's VMM path was not exercised, not found wrong.
        return ("shim device peak = torch.cuda.max_memory_reserved() through cuMemCreate/cuMemMap", r,
                "not run: PyTorch did not use expandable segments (its memory snapshot says so)")
    return ("shim device peak = torch.cuda.max_memory_reserved(), before and after "
            "reset_peak (ctypes) / reset_peak_memory_stats; memory through %s" %
            ("cuMemCreate/cuMemMap (vmm)" if expandable else "cudaMalloc (device)"),
            r, "pass" if ok else "fail")


def check_torch_peak(suite):
    return torch_peak(suite, False)


def check_torch_peak_expandable(suite):
    return torch_peak(suite, True)


def check_torch_graph(suite):
    r = torch_run(suite, ["graph"])
    ok = (r["capture_bytes"] is not None and r["capture_bytes"] > 0 and
          r["capture_bytes"] == r["reserved_growth"] and r["launches"] == r["replays"] > 0)
    return ("capture bytes = growth of memory_reserved() over the capture; launches = replays",
            r, "pass" if ok else "fail")


def check_harmless(suite):
    what = "output hash identical with and without the shim (static and shared cudart)"
    plain = suite.kv(suite.run([suite.static, "harmless"], shim=False))["hash"]
    shimmed = suite.kv(suite.run([suite.static, "harmless"]))["hash"]
    try:
        shared = suite.kv(suite.run([suite.shared, "harmless"]))["hash"]
    except NotBuilt as e:  # the static half is still worth its line
        measured = "plain %s, shim %s, shim+shared: %s" % (plain, shimmed, e)
        if plain != shimmed:
            return what, measured, "fail"
        return what, measured, "not run: %s (the static cudart half is identical)" % e
    return (what, "plain %s, shim %s, shim+shared %s" % (plain, shimmed, shared),
            "pass" if plain == shimmed == shared else "fail")


OFFLOAD = {"CUSHIM_OFFLOAD": "always", "CUSHIM_OFFLOAD_MIN": "64MiB"}


def check_offload_vecadd(suite):
    plain = suite.kv(suite.run([suite.static, "vecadd"], shim=False))
    off = suite.kv(suite.run([suite.static, "vecadd"], extra=OFFLOAD))
    ok = (plain["hash"] == off["hash"] and off["wrong"] == 0 and off["offloaded"] == 3 * 256 * MiB and
          off["rc_2d"] == 0 and off["hash_2d"] == off["hash"] and
          plain["rc_peer"] == 0 and off["rc_peer"] == 0 and off["hash_peer"] == off["hash"])
    return ("vector add over 3 x 256 MiB offloaded arrays: same result as on the device, all offloaded; "
            "the result read back by cudaMemcpy2D (explicit kind) and by cudaMemcpyPeer into device memory too",
            "plain %s, offloaded %s (%d wrong, %d bytes offloaded); 2D copy rc %d, %s; peer copy rc %d "
            "(plain run %d), %s" % (
                plain["hash"], off["hash"], off["wrong"], off["offloaded"], off["rc_2d"], off["hash_2d"],
                off["rc_peer"], plain["rc_peer"], off["hash_peer"]),
            "pass" if ok else "fail")


def check_offload_sgemm(suite):
    prog = suite.static
    if os.path.exists(os.path.join(suite.args.bin, "no-cublas")):
        raise NotBuilt("cuBLAS did not link: the programs were built without it (see the log)")
    extra = {"CUSHIM_OFFLOAD": "always", "CUSHIM_OFFLOAD_MIN": "8MiB"}
    plain = suite.kv(suite.run([prog, "sgemm"], shim=False))
    off = suite.kv(suite.run([prog, "sgemm"], extra=extra))
    ok = plain["hash"] == off["hash"] and off["offloaded"] == 3 * 16 * MiB
    return ("cuBLAS SGEMM 2048^3 with A, B, C offloaded: result identical to the plain run",
            "plain %s, offloaded %s (A, B, C: %d bytes offloaded; %d with cuBLAS's own allocations)" % (
                plain["hash"], off["hash"], off["offloaded"], off["offloaded_with_cublas"]),
            "pass" if ok else "fail")


def check_offload_edges(suite):
    r = suite.kv(suite.run([suite.static, "offload_edges"],
                           extra={"CUSHIM_OFFLOAD": "always", "CUSHIM_OFFLOAD_MIN": "1MiB"}, timeout=60))
    # The same program without the shim: the driver's own answers to the pool's exports, which the
    # shim must not change (cuda.h cuMemPoolExportPointer: "an already shared memory pool").
    plain = suite.kv(suite.run([suite.static, "offload_edges"], shim=False, timeout=60))
    ok = r.get("rc_thread") == 0 and r.get("host_rounds_positive") == 1 and r.get("host_errors") == 0
    # A driver that makes no exportable pool (POSIX descriptors: a sandbox's may not) leaves that part
    # not run, as context_teardown's attach part; the teardown part is judged all the same.
    pool_made = r.get("rc_pool_create") == 0
    exports = ("rc_export", "rc_share", "rc_export_shared")
    pool_ok = (r.get("rc_current") == 0 and r.get("rc_export_shared") == 0 and r.get("pool_matches") == 1 and
               all(r.get(k) == plain.get(k) for k in exports) and
               r.get("offloaded_by_current") == 0 and r.get("offloaded_left") == 0) if pool_made else True
    r = dict(r, plain={k: plain.get(k) for k in exports})
    if ok and not pool_made:
        verdict = ("pass; the exportable pool part not run: cudaMemPoolCreate gives rc %s for it" %
                   r.get("rc_pool_create"))
    else:
        verdict = "pass" if ok and pool_ok else "fail"
    return ("offload always: 20 contexts made, each offloading 4 x 2 MiB freed by cudaFreeAsync on its own "
            "stream, then destroyed, while another thread pins, polls and frees its own 2 MiB (its frees never "
            "fail: the shim holds back releases of a context being torn down); a cudaMallocAsync of 4 MiB from "
            "an exportable pool made current (cudaDeviceSetMemPool) is the pool's (not offloaded) and "
            "cudaMemPoolExportPointer works on it once the pool is shared (cudaMemPoolExportToShareableHandle), "
            "each export answered as without the shim (plain)",
            r, verdict)


# The simulated device's answers where cuda.h leaves room (tests/sim/README.md, tests/sim/driver/copy.c,
# async.c): the real driver's differing answer means the simulator, and the tests built on it, encode
# a wrong reading.
SIM_MODEL = {"dtod_mapped_pinned": 0, "copy2d_pinned_as_device": 0, "dtod_wc_pinned": 0, "dtod_registered_host": 0,
             "dtod_pageable": 1, "memset_mapped_pinned": 0, "host_pool_no_context": 0, "exec_update_alloc": 0,
             "exec_update_used_mib": 96}


def check_sim_model(suite):
    r = suite.kv(suite.run([suite.static, "sim_model"], shim=False))
    differ = ["%s: simulator %d, driver %s" % (k, v, r.get(k)) for k, v in SIM_MODEL.items()
              if k in r and r[k] != v]
    missing = [k for k in SIM_MODEL if k not in r]
    if differ:
        verdict = "fail: the simulator's reading differs (%s)" % "; ".join(differ)
    elif missing == ["host_pool_no_context"] and r.get("host_pool_create", 0) != 0:
        verdict = "pass (no host pool on this driver: cuMemPoolCreate %s)" % r.get("host_pool_create")
    elif missing:
        verdict = "fail: no answer for %s" % ", ".join(missing)
    else:
        verdict = "pass"
    return ("the simulated device's choices where cuda.h leaves room, asked of the real driver without the "
            "shim: %s (D sides of explicit copies; a host pool with no context; cuGraphExecUpdate of a graph "
            "allocating 32 MiB to one allocating 96 MiB, and what its launch then holds in the graph pool)" % ", ".join("%s=%d" % kv for kv in SIM_MODEL.items()),
            r, verdict)


def check_torch_offload_forward(suite):
    outputs = tempfile.mkdtemp(prefix="cushim-gpu-outputs.")  # not in the segment folder
    a = os.path.join(outputs, "plain.pt")
    b = os.path.join(outputs, "offload.pt")
    try:
        plain = torch_run(suite, ["forward", a])
        off = torch_run(suite, ["forward", b, a], extra=OFFLOAD)
        same = off["equal_to_reference"]
    finally:
        shutil.rmtree(outputs, ignore_errors=True)
    drop = plain["device_drop"] - off["device_drop"]
    # The drop is read over the model's load, so it is set against what was offloaded by then (the
    # forward offloads more: cuBLAS's workspace, 64 MiB on an H200).
    loaded = off["offloaded_at_load"]
    ok = same and loaded > 0 and abs(drop - loaded) <= 2 * MiB * max(1, off["offloaded_allocs_at_load"])
    return ("forward of 3 x Linear(8192, 8192) under CUSHIM_OFFLOAD=always, 64 MiB: same output; "
            "device memory saved over the model's load (cudaMemGetInfo) = bytes offloaded by then",
            {"same_output": same, "device_saved": drop, "offloaded_at_load": loaded,
             "offloaded": off["offloaded_current"],
             "plain": plain, "offload": off}, "pass" if ok else "fail")


def check_torch_async_backend(suite):
    r = torch_run(suite, ["async_backend"], conf="backend:cudaMallocAsync")
    if r["backend"] != "cudaMallocAsync":
        # PyTorch did not take the setting (a version that ignores it): the shim's async path was
        # not exercised, not found wrong.
        return ("the shim's async_pool reserve = torch.cuda.memory_reserved() under backend:cudaMallocAsync",
                r, "not run: PyTorch did not take backend:cudaMallocAsync (its allocator backend is %s)"
                % r["backend"])
    ok = (r["shim_pool_reserved"] > 0 and
          r["shim_pool_reserved"] == r["torch_reserved"] and r["shim_async_current"] > 0)
    return ("backend:cudaMallocAsync: the shim's async_pool reserve = torch.cuda.memory_reserved() "
            "(the default pool's reserve); tensors counted as async", r, "pass" if ok else "fail")


def check_async_exactness(suite):
    rows = [r for r in suite.kv_lines(suite.run([suite.static, "async"])) if "size" in r]
    # The shim's delta is exact; the driver's follows the pool's reserve, give or take a page-table
    # page (at most 2 MiB, as the cudaMalloc check allows).
    # The shim's async_pool figure (read at that cudaMemGetInfo) is the pool's own.
    ok = len(rows) == 4 and all(r["shim_delta"] == r["size"] and
                                0 <= r["driver_delta"] - r["pool_reserved_delta"] <= 2 * MiB and
                                r["shim_pool_reserved"] == r["pool_reserved"] for r in rows)
    return ("cudaMallocAsync: shim async delta = requested; 0 <= cuMemGetInfo delta - pool reserve "
            "delta <= 2 MiB; shim async_pool reserved = the pool's RESERVED_MEM_CURRENT",
            "; ".join("%d: shim %d driver %d pool %d (shim reads reserve %d of %d)" % (
                r["size"], r["shim_delta"], r["driver_delta"], r["pool_reserved_delta"],
                r["shim_pool_reserved"], r["pool_reserved"]) for r in rows),
            "pass" if ok else "fail")


def check_vmm_exactness(suite):
    out = suite.run([suite.static, "vmm"])
    g = suite.kv(out).get("granularity", 2 * MiB)
    rows = [r for r in suite.kv_lines(out) if "size" in r]
    # The shim's figures are exact; the driver's delta may include page-table memory for the new
    # range (at most one granule, as the cudaMalloc check allows 2 MiB), or miss a granule the
    # driver still held from the warm-up (as the cudaMalloc check allows size - 2 MiB).
    ok = len(rows) == 4 and all(r["shim_delta"] == r["size"] and
                                max(0, r["size"] - g) <= r["driver_delta"] <= r["size"] + g and
                                r["after_release"] == r["size"] and r["after_unmap"] == 0 for r in rows)
    return ("cuMemCreate+cuMemMap: shim vmm delta = size, cuMemGetInfo delta in [size - granularity, "
            "size + granularity]; counted until both released and unmapped",
            "; ".join("%d: shim %d driver %d released %d unmapped %d" % (
                r["size"], r["shim_delta"], r["driver_delta"], r["after_release"], r["after_unmap"])
                for r in rows), "pass" if ok else "fail")


def check_graph_update(suite):
    """cudaGraphExecUpdate from a 32 MiB allocation node to a 96 MiB one: the driver allocates the new
    size at the launch (its graph pool's used memory), and the shim's report at exit lists the
    executable graph, and its device, with the new allocation-node bytes."""
    folder = tempfile.mkdtemp(prefix="cushim-gpu-report.")
    path = os.path.join(folder, "report.json")
    try:
        r = suite.kv(suite.run([suite.static, "graph_update"],
                               extra={"CUSHIM_REPORT": path, "CUSHIM_REPORT_FORMAT": "json"}))
        try:
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            return ("the shim's report at exit (CUSHIM_REPORT, JSON)", dict(r, report=str(e)),
                    "fail: no report from the shim")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if isinstance(report, list):
        report = report[0]
    graphs = report.get("executable_graphs") or [{}]
    measured = dict(r, device_alloc_node_bytes=report["devices"][0]["graphs"]["alloc_node_bytes"],
                    exec_alloc_node_bytes=graphs[-1].get("alloc_node_bytes"))
    ok = (r["rc_update"] == 0 and r["rc_launch"] == 0 and r["driver_used"] == 96 * MiB and
          measured["device_alloc_node_bytes"] == 96 * MiB and measured["exec_alloc_node_bytes"] == 96 * MiB)
    return ("cudaGraphExecUpdate of a graph allocating 32 MiB to one allocating 96 MiB: the launch after "
            "allocates 96 MiB (driver's graph pool) and the shim counts 96 MiB of allocation nodes, on the "
            "device and on the executable graph", measured, "pass" if ok else "fail")


def check_context_teardown(suite):
    r = suite.kv(suite.run([suite.static, "teardown"]))
    ok = (r.get("rc") == 0 and r.get("rc_destroy") == 0 and r.get("created") == 96 * MiB and
          r.get("after_destroy") == 64 * MiB and r.get("after_reset") == 0 and
          r.get("async_after_reset") == 16 * MiB and r.get("rc_free_async") == 0 and
          r.get("async_after_free") == 0 and r.get("rc_primary") == 0)
    # cuCtxAttach/cuCtxDetach are deprecated (cuda.h): a driver that hands them out no more
    # (-11: no entry point; 801: CUDA_ERROR_NOT_SUPPORTED) leaves that part not run, not failed.
    attach_missing = r.get("rc_attach") in (-11, 801)
    attach_ok = (r.get("rc_attach") == 0 and r.get("rc_detach1") == 0 and r.get("detach1_kept") == 8 * MiB and
                 r.get("rc_detach2") == 0 and r.get("detach2_left") == 0)
    if ok and attach_missing:
        verdict = "pass; the attach/detach part not run: the driver gives rc %d for it" % r.get("rc_attach")
    else:
        verdict = "pass" if ok and attach_ok else "fail"
    return ("cudaMalloc 64 MiB (primary context) + cuMemAlloc 32 MiB (a cuCtxCreate context): "
            "cuCtxDestroy drops the 32 MiB only, cudaDeviceReset the rest (one device: the shim "
            "asks each allocation's context, cuPointerGetAttribute CONTEXT, before a teardown); "
            "a cudaMallocAsync of 16 MiB outlives the reset (cuda_runtime_api.h cudaDeviceReset), "
            "counted until its cudaFreeAsync succeeds after it; cuMemAlloc 8 MiB in a third "
            "context, cuCtxAttach, then two cuCtxDetach: kept after the first, dropped by the second",
            r, verdict)


def check_instantiate_lookup(suite):
    r = suite.kv(suite.run([suite.static, "instantiate_lookup"]))
    which = ("cuGraphInstantiateWithFlags" if r.get("lookup_is_with_flags") == 1 else
             "cuGraphInstantiate_v2" if r.get("lookup_is_v2") == 1 else "neither")
    # Either answer is CUDA's to give (cuda.h only #defines the name); the shim maps both. Through
    # v2 (no flags) the program frees the allocation between the launches.
    v2_frees = r.get("rc_sync1") == 0 and r.get("rc_free1") == 0 if which == "cuGraphInstantiate_v2" else True
    ok = (which != "neither" and v2_frees and r.get("rc_instantiate") == 0 and r.get("rc_launch1") == 0 and
          r.get("rc_launch2") == 0 and r.get("rc_sync") == 0 and r.get("rc_free") == 0 and
          r.get("rc_exec_destroy") == 0)
    return ('"cuGraphInstantiate" looked up at 12000 is cuGraphInstantiateWithFlags (cuda.h #define; the '
            "simulator's reading) or cuGraphInstantiate_v2; through the shim's wrapper of the answer, a graph "
            "with a 64 MiB allocation node launches twice (AUTO_FREE_ON_LAUNCH, or through v2 a cudaFree "
            "between the launches)",
            "driver answers %s; %s" % (which, r), "pass" if ok else "fail")


def check_budget(suite):
    r = suite.kv(suite.run([suite.static, "budget"], extra={"CUSHIM_DEVICE_LIMIT": "1GiB"}))
    # Held: the 256 MiB and the pool's whole reserve (nothing of it in use); the budget's free is
    # its limit less that (the GPU's own free is larger); trimmed, the 256 MiB alone.
    ok = (r.get("total") == GiB and r.get("kept_reserved", 0) >= 64 * MiB and
          r.get("kept_held") == 256 * MiB + r.get("kept_reserved", 0) and
          r.get("kept_free") == GiB - r.get("kept_held", 0) and r.get("rc_over") == 2 and
          r.get("trimmed_reserved") == 0 and r.get("trimmed_held") == 256 * MiB and
          r.get("trimmed_free") == 768 * MiB and r.get("rc_fits") == 0)
    return ("CUSHIM_DEVICE_LIMIT=1GiB: cudaMemGetInfo total 1 GiB; cudaMalloc 256 MiB beside the default "
            "pool keeping a freed 64 MiB (threshold UINT64_MAX): held (cushim.h limit_held_bytes) = 256 MiB + "
            "the pool's RESERVED_MEM_CURRENT, free = 1 GiB - held, 800 MiB refused (2); trimmed: reserve 0, "
            "held 256 MiB, free 768 MiB, 700 MiB fit", r, "pass" if ok else "fail")


def check_per_thread_contexts(suite):
    r = suite.kv(suite.run([suite.static, "per_thread_contexts"]))
    ok = (all(r.get(k) == 0 for k in ("rc", "rc_begin_a", "rc_status_b", "rc_begin_b", "rc_end_b", "rc_end_a")) and
          r.get("status_b_while_a") == 0 and r.get("distinct_graphs") == 1 and
          r.get("capture_bytes_both") == 6 * MiB and r.get("capture_bytes_after") == 6 * MiB)
    return ("a capture on the primary context's per-thread stream is not on a second context's "
            "(cuStreamIsCapturing NONE there: the per-thread stream is one per thread and context, "
            "as the simulator models it); both captures end with their own graphs; the shim counts "
            "4 MiB + 2 MiB allocated during them as capture",
            r, "pass" if ok else "fail")


def smi_query(suite, query, limit=30):
    """Lines of `nvidia-smi --query-...=... --format=csv,noheader,nounits`, split at commas; None
    when nvidia-smi cannot answer (missing, failing, or slower than `limit` seconds)."""
    try:
        p = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True,
                           text=True, errors="replace", timeout=min(limit, max(1, suite.left())))
    except (OSError, subprocess.TimeoutExpired) as e:
        suite.note("== nvidia-smi %s: %s" % (query, e))
        return None
    if p.returncode != 0:  # its own words ("No devices were found", an NVML mismatch) to the log
        suite.note("== nvidia-smi %s: exit %d\n%s%s" % (query, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
        return None
    return [[x.strip() for x in line.split(",")] for line in p.stdout.splitlines() if line.strip()]


def smi_banner(suite, limit=20):
    """Plain `nvidia-smi`'s output (its banner says the newest CUDA the driver supports), "" when
    it cannot answer."""
    try:
        p = subprocess.run(["nvidia-smi"], capture_output=True, text=True, errors="replace",
                           timeout=min(limit, max(1, suite.left())))
    except (OSError, subprocess.TimeoutExpired) as e:
        suite.note("== nvidia-smi: %s" % e)
        return ""
    return p.stdout if p.returncode == 0 else ""


def cuda_version(pattern, text):
    """(major, minor) of the first match of pattern's two groups in text, None without one."""
    m = re.search(pattern, text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def toolkit_newer_than_driver(nvcc_out, smi_out):
    """A warning for the report when nvcc's CUDA major version ("release 13.0," in `nvcc --version`)
    is newer than the driver's ("CUDA Version: 12.4" in nvidia-smi's banner): the C programs, built
    with that toolkit's runtime, then fail at their first CUDA call with
    cudaErrorInsufficientDriver (35: CUDA's minor version compatibility lets a newer minor run on
    an older driver of the same major, not a newer major), while PyTorch brings its own runtime.
    None when the majors agree or either is unknown."""
    toolkit = cuda_version(r"release (\d+)\.(\d+)", nvcc_out)
    driver = cuda_version(r"CUDA Version:\s*(\d+)\.(\d+)", smi_out)
    if not toolkit or not driver or toolkit[0] <= driver[0]:
        return None
    return ("the driver supports CUDA %d.%d, older than nvcc's %d.%d: the C checks' programs fail with "
            "cudaErrorInsufficientDriver (35); the PyTorch checks use PyTorch's own runtime"
            % (driver + toolkit))


def check_nvidia_smi(suite):
    # nvidia-smi's used_memory is the process's own (its allocations as the driver rounds them, its
    # context, its modules); the shim's device_total is what the program asked for, and
    # untracked_bytes is the rest of cudaMemGetInfo's device-wide use (this process's context and
    # rounding, other processes, memory the driver keeps), so the process's figure lies between.
    what = ("shim device_total <= nvidia-smi used_memory of the process <= device_total + "
            "untracked_bytes + 64 MiB (untracked: the rest of cudaMemGetInfo's device-wide use)")
    suite.require([suite.static], True)
    suite.require([suite.cushim], False)
    before = smi_query(suite, "--query-gpu=memory.used,memory.total") or []
    # Held 30 s at most (killed as soon as both readings are taken): nvidia-smi's first query can be slow.
    # Its standard error goes to the log, as every program's does.
    err = tempfile.TemporaryFile()  # bytes: whatever the program writes reaches the log
    p = subprocess.Popen([suite.static, "hold", "30"], env=suite.env(), stdout=subprocess.PIPE,
                         stderr=err, text=True)
    # Reading its lines blocks: a program that hangs before "ready" is killed (EOF ends the loop).
    watchdog = threading.Timer(max(1, min(60, suite.left() - 5)), p.kill)
    watchdog.start()
    try:
        info = {}
        for line in p.stdout:  # "hold" prints its pid, then "ready", within a second or two
            info.update(suite.kv(line))
            if "ready" in info or suite.left() < 10:
                break
        if "ready" not in info:
            if suite.left() < 10:
                raise DeadlineReached("the run's deadline came before the holding program was ready")
            raise RuntimeError("the holding program never said ready: %s" % info)
        pid = info["pid"]
        stat = json.loads(suite.run([suite.cushim, "stat", str(pid), "--json"], shim=False, timeout=30))[0]
        smi = smi_query(suite, "--query-compute-apps=pid,used_memory") or []
    finally:
        watchdog.cancel()
        p.kill()
        p.wait()
        p.stdout.close()
        err.seek(0)
        suite.note("== [shim] %s hold 30: exit %s (killed once read)\n%s" % (
            suite.static, p.returncode, err.read().decode(errors="replace")[-4000:]))
        err.close()
    used, listed = None, 0
    for parts in smi:
        if len(parts) < 2:
            continue
        listed += 1
        if parts[0] == str(pid) and parts[1].isdigit():
            used = int(parts[1]) * MiB
    d = stat["devices"][0]
    ours = {"device_total": d["device_total"]["current_bytes"], "untracked": d["untracked_bytes"],
            "gpu_used_before_mib": before[0][0] if before else "?", "processes_listed": listed}
    if used is None:
        # Containers often show host pids (another pid namespace), or "[N/A]" for used_memory.
        return (what, dict(ours, nvidia_smi_lines=listed),
                "not run: nvidia-smi does not give this process's used_memory here (%d process lines; "
                "another pid namespace, or [N/A])" % listed)
    total = d["device_total"]["current_bytes"]
    ok = total <= used <= total + d["untracked_bytes"] + 64 * MiB
    return (what, dict(ours, nvidia_smi=used, not_ours=used - total), "pass" if ok else "fail")


def check_bench_overhead(suite):
    # (label, program arguments, rounds): a stream-ordered pair takes about a microsecond, so its
    # runs are longer (300000 pairs, about 0.3 s) and more (7), their process starts apart.
    cases = [("4 KiB", ["4096", "20000"], 3), ("1 MiB", [str(MiB), "20000"], 3),
             ("256 MiB", [str(256 * MiB), "300"], 3), ("async 1 MiB", [str(MiB), "300000", "async"], 7)]
    measured, worst, beyond_noise = {}, 0.0, False
    for label, args, rounds in cases:
        ratios, plain_ns, shim_ns = [], [], []
        for _ in range(rounds):  # alternated: plain, shim, plain, shim, ...
            if suite.left() < 20:
                break
            try:
                a = suite.kv(suite.run([suite.static, "overhead"] + args, shim=False))["ns_per_pair"]
                b = suite.kv(suite.run([suite.static, "overhead"] + args))["ns_per_pair"]
            except DeadlineReached:  # the cases measured so far are kept
                break
            plain_ns.append(a)
            shim_ns.append(b)
            ratios.append(b / a)
        if not ratios:
            measured[label] = "not run: deadline"
            continue
        r = statistics.median(ratios)
        worst = max(worst, r)
        # Runs without the shim differ among themselves (process start, the driver's own state): a
        # ratio over the target by less than that spread does not show the shim's cost.
        spread = (max(plain_ns) - min(plain_ns)) / statistics.median(plain_ns)
        beyond_noise = beyond_noise or (r > 1.01 and r - 1 > spread)
        # Beside it, the best of each (on a noisy machine the least disturbed run is nearest the
        # calls' own cost): reported, not judged.
        measured[label] = "plain %.0f ns, shim %.0f ns, ratio %.3f, plain runs' spread %.3f; best %.0f / %.0f ns" % (
            statistics.median(plain_ns), statistics.median(shim_ns), r, spread, min(plain_ns), min(shim_ns))
    if suite.left() >= 20:
        # What the driver calls the shim may make on these paths cost by themselves (info).
        try:
            c = suite.kv(suite.run([suite.static, "driver_costs"], shim=False))
            if "cuCtxGetCurrent_ns" in c and "cuStreamGetCtx_ns" in c:
                measured["driver calls"] = "cuCtxGetCurrent %.1f ns, cuStreamGetCtx %.1f ns" % (
                    c["cuCtxGetCurrent_ns"], c["cuStreamGetCtx_ns"])
        except DeadlineReached:
            pass
    if not worst:
        return ("per-pair time with the shim / without <= 1.01", measured, "not run: deadline")
    done = sum(1 for label, _, _ in cases if not measured[label].startswith("not run"))
    part = "" if done == len(cases) else " (%d of %d cases; the rest not run: deadline)" % (done, len(cases))
    verdict = ("pass" if worst <= 1.01 else "fail (benchmark target)" if beyond_noise else
               "inconclusive (benchmark target: over 1.01 by less than the plain runs' own spread)")
    return ("per-pair time with the shim / without <= 1.01 (median of 3 alternated runs; over it by "
            "less than the spread of the runs without the shim: inconclusive)", measured, verdict + part)


def check_bench_threads(suite):
    ratios = []
    for _ in range(3):
        if suite.left() < 20:
            break
        try:
            a = suite.kv(suite.run([suite.static, "threads", "16", "2000"], shim=False))["seconds"]
            b = suite.kv(suite.run([suite.static, "threads", "16", "2000"]))["seconds"]
        except DeadlineReached:  # the rounds measured so far are kept
            break
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


# In order of value, the quick C checks (a second or two each) before the PyTorch ones (each starts
# an interpreter and imports torch), the benchmarks last (they take what time is left).
CHECKS = [
    ("exactness_static", check_exactness_static, False, "cudaMalloc 1 B..4 GiB, static cudart"),
    ("exactness_shared", check_exactness_shared, False, "cudaMalloc 1 B..4 GiB, -cudart shared"),
    ("context_teardown", check_context_teardown, False, "cuCtxDestroy / cudaDeviceReset drop memory"),
    ("harmless", check_harmless, False, "bit-identical outputs"),
    ("async_exactness", check_async_exactness, False, "stream-ordered pools"),
    ("vmm_exactness", check_vmm_exactness, False, "virtual memory management"),
    ("per_thread_contexts", check_per_thread_contexts, False, "per-thread stream per context"),
    ("instantiate_lookup", check_instantiate_lookup, False, "cuGraphInstantiate at 12000"),
    ("graph_update", check_graph_update, False, "cuGraphExecUpdate to other allocation sizes"),
    ("budget", check_budget, False, "device limit against the driver's pool"),
    ("offload_vecadd", check_offload_vecadd, False, "kernels on offloaded memory"),
    ("offload_sgemm", check_offload_sgemm, False, "cuBLAS on offloaded memory"),
    ("offload_edges", check_offload_edges, False, "teardown vs polls; a pool made current"),
    ("nvidia_smi", check_nvidia_smi, False, "per-process figure vs nvidia-smi"),
    ("sim_model", check_sim_model, False, "the simulator's readings vs the driver"),
    ("torch_peak", check_torch_peak, True, "PyTorch caching allocator peak"),
    ("torch_peak_expandable", check_torch_peak_expandable, True, "same with expandable_segments"),
    ("torch_graph", check_torch_graph, True, "PyTorch CUDA graph capture and replay"),
    ("torch_offload_forward", check_torch_offload_forward, True, "PyTorch forward, offload always"),
    ("torch_async_backend", check_torch_async_backend, True, "PyTorch's cudaMallocAsync backend"),
    ("bench_overhead", check_bench_overhead, False, "per-call overhead, alternated"),
    ("bench_threads", check_bench_threads, False, "16 threads allocating at once"),
    ("bench_offload_bandwidth", check_bench_offload_bandwidth, False, "offload bandwidth"),
    ("bench_pinned_cost", check_bench_pinned_cost, False, "pinned allocation cost"),
]


def with_exit_failures(verdict, failures):
    """A check's verdict given the programs that failed at exit after their work (Suite.run):
    a pass becomes a fail that says so; any other verdict says it too."""
    if not failures:
        return verdict
    exits = "; ".join(failures)
    if verdict.startswith("pass"):
        return "fail: %s (its figures pass)" % exits
    return "%s; also %s" % (verdict, exits)


def run_checks(suite, args):
    """Every check in order, each recorded (and the reports rewritten) as soon as it is known."""
    print("checks (in order):")
    for name, _, torch_needed, what in CHECKS:
        print("  %-24s %s%s" % (name, what, " (PyTorch)" if torch_needed else ""))
    only = [n for n in (getattr(args, "only", None) or "").split(",") if n]
    for name, fn, torch_needed, what in CHECKS:
        t0 = time.monotonic()
        if only and name not in only:
            suite.record(name, what, "-", "-", "not run: not among --only's checks", 0)
            continue
        if args.dry_run:
            suite.record(name, what, "-", "-", "not run: dry run (no GPU used)", 0)
            continue
        if torch_needed and not suite.has_torch():
            suite.record(name, what, "-", "-", "not run: PyTorch %s" % suite.platform.get("torch", "none"), 0)
            continue
        if suite.left() < 15:
            suite.record(name, what, "-", "-", "not run: the run's time (4 minutes, build included) "
                         "was spent", 0)
            continue
        suite.exit_failures = []
        # Said in the reports while it runs: a run killed from outside (a limit shorter than the
        # deadline) then shows which check it was in, not only the last one finished.
        suite.platform["running"] = "%s (started %s)" % (name, time.strftime("%H:%M:%S UTC", time.gmtime()))
        suite.write()
        try:
            expected, measured, verdict = fn(suite)
        except DeadlineReached as e:
            expected, measured, verdict = "-", str(e), ("not run: the run's time (4 minutes, build "
                                                         "included) ran out during this check")
        except NotBuilt as e:
            expected, measured, verdict = "-", "-", "not run: %s" % e
        except Exception as e:  # noqa: BLE001 - a failing check must not stop the others
            expected, measured, verdict = "-", "%s: %s" % (type(e).__name__, e), "error"
        verdict = with_exit_failures(verdict, suite.exit_failures)
        suite.platform.pop("running", None)
        suite.record(name, what, expected, measured, verdict, time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--log", help="file to append each program's command, exit status and "
                    "standard error to")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--only", help="comma-separated check names: run these alone (the others are "
                                   "reported not run), e.g. to run a failed check again")
    ap.add_argument("--deadline", type=float, default=0.0,
                    help="time (seconds since the epoch) after which no check starts and no program "
                         "runs on; default: 200 s from now")
    args = ap.parse_args()
    unknown = [n for n in (args.only or "").split(",") if n and n not in [c[0] for c in CHECKS]]
    if unknown:
        ap.error("--only: no check named %s (expected names from: %s)" % (
            ", ".join(unknown), ", ".join(c[0] for c in CHECKS)))
    suite = Suite(args)
    suite.write()  # a report exists whatever happens next
    suite.probe_platform()
    keeper = None
    if not args.dry_run and suite.persistence not in ("Enabled", "?"):
        # Without persistence mode the driver tears the GPU's state down whenever no client has it
        # open, and each of the run's ~50 CUDA processes would set it up again (seconds each). An
        # NVML client that only reads (nvidia-smi dmon) keeps it up for the run; no setting changes.
        try:
            keeper = subprocess.Popen(["nvidia-smi", "dmon", "-d", "10"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            time.sleep(1)
            if keeper.poll() is None:
                suite.platform["gpu_kept_initialized"] = "by nvidia-smi dmon for the run (persistence %s)" % (
                    suite.persistence)
            else:
                suite.note("== nvidia-smi dmon ended at once (exit %s): the GPU is not kept initialized" %
                           keeper.returncode)
                keeper = None
        except OSError as e:
            suite.note("== nvidia-smi dmon: %s" % e)
    try:
        run_checks(suite, args)
    finally:
        if keeper:
            keeper.kill()
            keeper.wait()
    suite.has_torch()  # a probe the checks did not wait for (a dry run) is settled for the report
    suite.write()
    shutil.rmtree(suite.tmp, ignore_errors=True)
    counts = {}
    for r in suite.results:
        m = re.match(r"[a-z]+( run)?", r["verdict"])
        word = m.group(0) if m else r["verdict"][:20]
        counts[word] = counts.get(word, 0) + 1
    print("verdicts: %s" % ", ".join("%d %s" % (n, w) for w, n in sorted(counts.items())))
    print("reports: %s/gpu-report.md, %s/gpu-report.json" % (args.outdir, args.outdir))
    return 1 if counts.get("fail") or counts.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
