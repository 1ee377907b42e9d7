#!/usr/bin/env python3
"""PyTorch checks of scripts/gpu-check (issue 6), run under libcushim.so by tests/gpu/run.py.

usage: torch_checks.py peak | graph | forward OUTFILE [REFERENCE] | async_backend
Prints one JSON object on its last line. `forward` saves its output to OUTFILE and, given the file
of an earlier run, says whether its output equals that one (so that run.py itself never imports
torch, and no interpreter is started only to compare). Reads cushim's counters in-process through cushim.h's
API (ctypes.CDLL(None)) and the per-graph table through `cushim stat PID --json` ($GPUCHECK_CUSHIM).
"""
import ctypes
import json
import os
import signal
import subprocess
import sys

import torch

MiB = 1 << 20


class KindStats(ctypes.Structure):
    """struct cushim_kind_stats (include/cushim.h; the same field names)."""
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("current_bytes", "peak_bytes", "alloc_count", "free_count", "failed_count", "spill_count")]


# enum cushim_public_kind: KIND[name] = CUSHIM_MEM_<NAME>
KIND = {"device": 0, "async": 1, "vmm": 2, "array": 3, "managed": 4, "pinned_host": 5,
        "registered_host": 6, "imported": 7, "offloaded": 8, "capture": 9}


class DeviceStats(ctypes.Structure):
    """struct cushim_device_stats, version 5 (include/cushim.h; the same field names: the test
    tests/gpu/test_run_py.py compares every offset and the size with the C compiler's)."""
    _fields_ = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32),
                ("ordinal", ctypes.c_int32), ("uuid_valid", ctypes.c_int32),
                ("uuid", ctypes.c_uint8 * 16), ("total_bytes", ctypes.c_uint64),
                ("untracked_bytes", ctypes.c_uint64), ("kind", KindStats * len(KIND))] + [
                (n, ctypes.c_uint64) for n in (
                    "device_total_current_bytes", "device_total_peak_bytes",
                    # version 2
                    "async_pool_used_current_bytes", "async_pool_used_high_bytes",
                    "async_pool_reserved_current_bytes", "async_pool_reserved_high_bytes",
                    "async_pool_sampled_ns",
                    # version 3
                    "untracked_sampled_ns", "graph_pool_used_current_bytes", "graph_pool_used_high_bytes",
                    "graph_pool_reserved_current_bytes", "graph_pool_reserved_high_bytes",
                    "graph_pool_sampled_ns",
                    # version 4
                    "limit_bytes", "peak_reset_count", "peak_reset_last_ns", "run_device_peak_bytes",
                    "compile_device_peak_bytes",
                    # version 5
                    "device_total_lifetime_peak_bytes",
                    # version 6
                    "limit_held_bytes")]


shim = None  # libcushim.so's API, loaded by main() (importing this file needs no shim)


def load_shim():
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "cushim_get_device_stats"):
        sys.exit("torch_checks.py must run under libcushim.so")
    lib.cushim_get_device_stats.argtypes = [ctypes.c_int, ctypes.POINTER(DeviceStats)]
    lib.cushim_get_device_stats.restype = ctypes.c_int
    for name in ("cushim_device_peak_bytes", "cushim_device_current_bytes"):
        getattr(lib, name).argtypes = [ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_uint64
    lib.cushim_reset_peak.argtypes = [ctypes.c_int]
    lib.cushim_reset_peak.restype = ctypes.c_int
    return lib


def stats(dev=0):
    s = DeviceStats()
    s.size = ctypes.sizeof(s)
    if shim.cushim_get_device_stats(dev, ctypes.byref(s)) != 0:
        raise RuntimeError("cushim has no counters for device %d" % dev)
    return s


def workload(dev):
    """Allocations of many sizes through the caching allocator, some freed, a matmul."""
    keep = []
    for i, n in enumerate([1 << 10, 3 << 20, 17 << 20, 200 << 20, 1 << 30, 5 << 20]):
        t = torch.empty(n, dtype=torch.uint8, device=dev)
        if i % 2 == 0:
            keep.append(t)
        del t
    a = torch.randn(2048, 2048, device=dev)
    b = a @ a
    keep.append(b)
    big = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    del big
    return keep


def expandable_in_use():
    """Whether PyTorch's allocator runs with expandable segments, as its memory snapshot says
    (allocator_settings, else the segments' is_expandable); None when the snapshot does not say."""
    try:
        snap = torch.cuda.memory._snapshot()
    except Exception:  # noqa: BLE001 - a private API: any version may lack or change it
        return None
    if not isinstance(snap, dict):
        return None
    settings = snap.get("allocator_settings")
    if isinstance(settings, dict) and "expandable_segments" in settings:
        return bool(settings["expandable_segments"])
    flags = [s["is_expandable"] for s in snap.get("segments", []) if isinstance(s, dict) and "is_expandable" in s]
    return any(flags) if flags else None


def check_peak():
    dev = torch.device("cuda:0")
    # Context, cuBLAS handle, and the workload's own matmul once (2048 x 2048, as in workload()):
    # whatever cuBLAS sets up for it outside the caching allocator is in the baseline, not the peak.
    w = torch.randn(2048, 2048, device=dev)
    w @ w
    del w
    torch.cuda.synchronize()
    # Anything not from the caching allocator shows as a constant offset (reported).
    baseline = shim.cushim_device_current_bytes(0) - torch.cuda.memory_reserved(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    shim.cushim_reset_peak(-1)
    keep = workload(dev)
    torch.cuda.synchronize()
    first = {"shim_peak": shim.cushim_device_peak_bytes(0) - baseline,
             "torch_max_reserved": torch.cuda.max_memory_reserved(dev)}
    # reset_peak through ctypes against reset_peak_memory_stats
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    shim.cushim_reset_peak(-1)
    # Larger than any free space left in `keep`'s segments (a review: 64 and 96 MiB fit there, so
    # the peak after the reset was current memory on both sides), and freed before the reading:
    # the peak is then above what is held, on both sides.
    more = [torch.empty(n, dtype=torch.uint8, device=dev) for n in (256 << 20, 384 << 20)]
    del more
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    second = {"shim_peak": shim.cushim_device_peak_bytes(0) - baseline,
              "torch_max_reserved": torch.cuda.max_memory_reserved(dev)}
    in_use = expandable_in_use()  # while `keep` holds segments
    del keep
    s = stats()
    return {"baseline": baseline, "first": first, "after_reset": second, "expandable_in_use": in_use,
            "vmm_current": s.kind[KIND["vmm"]].current_bytes,
            "device_current": s.kind[KIND["device"]].current_bytes,
            "expandable": "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


def cushim_stat():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the CLI itself runs without the shim
    out = subprocess.run([os.environ["GPUCHECK_CUSHIM"], "stat", str(os.getpid()), "--json"],
                         check=True, capture_output=True, text=True, env=env, timeout=30).stdout
    return json.loads(out)[0]


def check_graph():
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    static_x = torch.randn(256, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up on a side stream, as torch.cuda.graphs documents
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    launches_before = cushim_stat()["devices"][0]["graphs"]["launches"]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # empties the cache, then capture_begin
        reserved_begin = torch.cuda.memory_reserved(dev)
        static_y = model(static_x)
        extra = torch.empty(8 << 20, dtype=torch.uint8, device=dev)  # a new tensor inside
        extra.fill_(1)
    reserved_end = torch.cuda.memory_reserved(dev)
    replays = 10
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    st = cushim_stat()
    graphs = st["executable_graphs"]
    return {"reserved_growth": reserved_end - reserved_begin,
            "capture_bytes": graphs[-1]["capture_bytes"] if graphs else None,
            "replays": replays,
            "launches": st["devices"][0]["graphs"]["launches"] - launches_before,
            "graph_launches_of_exec": graphs[-1]["launches"] if graphs else None,
            "y_sum": float(static_y.sum())}


def check_forward(outfile, reference=None):
    dev = torch.device("cuda:0")
    torch.manual_seed(1234)
    free0, _ = torch.cuda.mem_get_info(dev)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(3)]).to(dev)
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info(dev)
    s = stats()
    at_load = (s.kind[KIND["offloaded"]].current_bytes, s.kind[KIND["offloaded"]].alloc_count)
    x = torch.randn(64, 8192, device=dev)
    with torch.no_grad():
        y = model(x)
    out = y.cpu()
    torch.save(out, outfile)
    s = stats()
    result = {"device_drop": free0 - free1, "offloaded_current": s.kind[KIND["offloaded"]].current_bytes,
              "offloaded_allocs": s.kind[KIND["offloaded"]].alloc_count,
              "offloaded_at_load": at_load[0], "offloaded_allocs_at_load": at_load[1]}
    if reference:
        # Tensors only: loadable with weights_only=True (torch.load's default since 2.6, said here
        # so that no version warns or refuses).
        result["equal_to_reference"] = bool(torch.equal(out, torch.load(reference, map_location="cpu",
                                                                         weights_only=True)))
    return result


def check_async_backend():
    """PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: every tensor is a cudaMallocAsync from the
    device's default pool; PyTorch's reserved memory is that pool's reserve."""
    dev = torch.device("cuda:0")
    keep = workload(dev)
    torch.cuda.synchronize()
    torch.cuda.mem_get_info(dev)  # cudaMemGetInfo: the shim reads the pools' reserve now
    s = stats()
    result = {"backend": torch.cuda.get_allocator_backend(),
              "torch_reserved": torch.cuda.memory_reserved(dev),
              "torch_allocated": torch.cuda.memory_allocated(dev),
              "shim_pool_reserved": s.async_pool_reserved_current_bytes,
              "shim_async_current": s.kind[KIND["async"]].current_bytes,
              "shim_device_current": s.kind[KIND["device"]].current_bytes}
    del keep
    return result


def main():
    global shim
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    shim = load_shim()
    if what == "peak":
        result = check_peak()
    elif what == "graph":
        result = check_graph()
    elif what == "forward" and len(sys.argv) in (3, 4):
        result = check_forward(*sys.argv[2:])
    elif what == "async_backend":
        result = check_async_backend()
    else:
        sys.exit(__doc__)
    print(json.dumps(result), flush=True)
    # An exit that hangs (the shim's exit report, PyTorch's or the runtime's teardown) ends 20 s
    # later by SIGALRM (Python leaves its default action, termination: run.py then judges the
    # figures and fails the check for the exit) rather than at the check's own limit (60 s).
    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not an inherited SIG_IGN
    signal.alarm(20)


if __name__ == "__main__":
    main()
