#!/usr/bin/env python3
"""CI test of the GPU suite's glue, no GPU needed (scripts/test runs it after the dry run).

A mismatch between what a program prints and what run.py reads would only show on a GPU machine,
where time is short. So:
- every non-PyTorch check of run.py runs against stand-ins of gpu_checks, `cushim stat` and
  nvidia-smi whose output is GENERATED from gpu_checks.cu's own printf formats (each mode's),
  with dicts that raise on any key the program does not print; each value must parse to its
  format's type (%x hashes stay strings, even the ones float() would read);
- every key a PyTorch check reads is one torch_checks.py's mode emits, and every `cushim stat`
  key read is one docs/SUMMARY-JSON.md shows;
- torch_checks.py's ctypes structs match include/cushim.h (the C compiler's offsets and sizes).

usage: python3 tests/gpu/test_run_py.py [-v]   (standard library only; needs cc for the layout)
"""
import ast
import contextlib
import ctypes
import io
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import types
import unittest
from argparse import Namespace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ left in tests/gpu
import run  # noqa: E402


def slurp(path):
    with open(path) as f:
        return f.read()


CU = slurp(os.path.join(HERE, "gpu_checks.cu"))
# A printf conversion: flags, width, precision (kept), length (dropped for Python's %), type.
CONV = re.compile(r"(%[-+ #0]*[0-9]*(?:\.[0-9]+)?)(?:hh|h|ll|l|z|j|t|L)?([diouxXfFeEgGsc%])")
HEX_VALUE = 0x1e5  # printed as 00000000000001e5: float() would read it as 100000.0
INT_VALUE = 7  # every int: hold's pid too, which the stand-in nvidia-smi lists


def printf_formats(body):
    """The format strings of the printf calls in a C function body (adjacent literals joined)."""
    formats = []
    for m in re.finditer(r"(?<![\w])printf\(\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)", body):
        literal = "".join(re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1)))
        formats.append(literal.encode().decode("unicode_escape"))
    return formats


def modes():
    """{mode: printf formats of its cmd_ function}, from main()'s dispatch in gpu_checks.cu."""
    bodies = dict(re.findall(r"^static int (cmd_\w+)\([^)]*\)\n\{\n(.*?)^\}", CU, re.S | re.M))
    dispatch = re.findall(r"if \(!strcmp\(cmd, \"(\w+)\"\)[^\n]*\n\s*return (cmd_\w+)\(", CU)
    assert dispatch and all(fn in bodies for _, fn in dispatch), "cannot read gpu_checks.cu's main()"
    return {mode: printf_formats(bodies[fn]) for mode, fn in dispatch}


def fill(fmt, hex_value=HEX_VALUE):
    """fmt with a value of its type for each conversion; also [(key, type)] of its k=v pairs."""
    def value(m):
        spec, c = m.group(1) + m.group(2), m.group(2)
        if c == "%":
            return "%"
        if c in "xX":
            return spec % hex_value
        if c in "fFeEgG":
            return spec % 1.5
        if c in "diouc":
            return str(INT_VALUE)
        return "s"
    line = CONV.sub(value, fmt)
    types_ = []
    for item in fmt.split():
        k, _, v = item.partition("=")
        conv = CONV.fullmatch(v.replace("0x", "", 1)) if v else None
        if conv:
            c = conv.group(2)
            types_.append((k, str if c in "xXs" else float if c in "fFeEgG" else int))
    return line, types_


OUTPUT = {mode: "".join(fill(f)[0] for f in fmts) for mode, fmts in modes().items()}
# `cushim stat --json`, the part check_nvidia_smi reads (Torch.test_stat_keys checks every name
# read against docs/SUMMARY-JSON.md).
STAT_JSON = [{"devices": [{"device_total": {"current_bytes": 7}, "untracked_bytes": 7}]}]


def index(subscript):
    """A subscript's index expression (Python 3.8 wraps it in an ast.Index, 3.9 and later do not)."""
    s = subscript.slice
    return s.value if type(s).__name__ == "Index" else s


class Strict(dict):
    """A parsed output: reading a key the program does not print raises, .get() too."""
    def get(self, key, default=None):
        return self[key]


class FakeSuite(run.Suite):
    @classmethod
    def kv_lines(cls, text):
        return [Strict(r) for r in run.Suite.kv_lines(text)]

    def kv(self, text):
        return Strict(run.Suite.kv(self, text))


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class Checks(unittest.TestCase):
    """Each non-PyTorch check against stand-in programs printing gpu_checks.cu's formats."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="cushim-gpu-test.")
        d = cls.dir.name
        for sub in ("bin", "build/tools", "path"):
            os.makedirs(os.path.join(d, sub))
        # As main() prints around each mode: whether the shim is in, and that the work ended.
        fake = ("#!%s\nimport os, sys\nsys.stdout.write('shim_loaded=%%d\\n' %% ('LD_PRELOAD' in os.environ))\n"
                "sys.stdout.write(%r[sys.argv[1]])\nsys.stdout.write('done=0\\n')\n" % (sys.executable, OUTPUT))
        for name in ("gpu_checks_static", "gpu_checks_shared"):
            executable(os.path.join(d, "bin", name), fake)
        executable(os.path.join(d, "build/tools/cushim"),
                   "#!/bin/sh\necho '%s'\n" % json.dumps(STAT_JSON))
        executable(os.path.join(d, "path/nvidia-smi"), "#!/bin/sh\necho '%d, 7'\n" % INT_VALUE)
        os.environ["PATH"] = os.path.join(d, "path") + os.pathsep + os.environ["PATH"]
        args = Namespace(outdir=os.path.join(d, "out"), root=ROOT, build=os.path.join(d, "build"),
                         bin=os.path.join(d, "bin"), dry_run=False, deadline=0.0)
        cls.suite = FakeSuite(args)
        cls.suite.shim = ""  # LD_PRELOAD="": nothing preloaded

    @classmethod
    def tearDownClass(cls):
        run.shutil.rmtree(cls.suite.tmp, ignore_errors=True)
        cls.dir.cleanup()

    def test_types(self):
        """Each value parses to its format's type: ints, floats, and hashes as strings (also one
        of decimal digits only)."""
        for mode, fmts in modes().items():
            for fmt in fmts:
                for hex_value in (HEX_VALUE, 0x1234):
                    line, types_ = fill(fmt, hex_value)
                    row = run.Suite.kv(self.suite, line)
                    for key, typ in types_:
                        self.assertIs(type(row[key]), typ, "%s: %s=%r" % (mode, key, row[key]))

    def test_checks(self):
        """Each check runs to a verdict (no missing key, no type error) and a JSON-able report."""
        checks = [(name, fn) for name, fn, torch_needed, _ in run.CHECKS if not torch_needed]
        self.assertGreater(len(checks), 10)
        for name, fn in checks:
            with self.subTest(check=name):
                self.suite.deadline = run.time.time() + 100
                expected, measured, verdict = fn(self.suite)
                json.dumps([expected, measured])  # the report is JSON
                self.assertRegex(verdict, r"^(pass|fail|info)", "%s: %s" % (name, measured))

    def test_membership(self):
        """A key a check looks for with `"key" in row` (to pick lines) is one that the modes it
        runs print."""
        tested_somewhere = set()
        for f in ast.parse(slurp(run.__file__)).body:
            if not isinstance(f, ast.FunctionDef):
                continue
            tested = {n.left.value for n in ast.walk(f) if isinstance(n, ast.Compare)
                      and isinstance(n.ops[0], (ast.In, ast.NotIn))
                      and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str)}
            ran = {n.elts[1].value for n in ast.walk(f) if isinstance(n, ast.List) and len(n.elts) > 1
                   and isinstance(n.elts[1], ast.Constant) and n.elts[1].value in OUTPUT}
            printed = {k for m in ran for row in run.Suite.kv_lines(OUTPUT[m]) for k in row}
            self.assertLessEqual(tested, printed, "%s (runs %s)" % (f.name, sorted(ran)))
            tested_somewhere |= tested
        self.assertGreaterEqual(tested_somewhere, {"size", "gib", "ready"})


class Failures(unittest.TestCase):
    """What a check reports when its program is missing, crashes, or hangs: on the GPU machine
    there is no second look, so the report and the log must say it."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="cushim-gpu-fail.")
        d = self.dir.name
        os.makedirs(os.path.join(d, "bin"))
        self.log = os.path.join(d, "gpu-check.log")
        args = Namespace(outdir=os.path.join(d, "out"), root=ROOT, build=os.path.join(d, "build"),
                         bin=os.path.join(d, "bin"), dry_run=False, deadline=0.0, log=self.log)
        self.suite = run.Suite(args)
        self.suite.shim = ""
        self.suite.deadline = run.time.time() + 100

    def tearDown(self):
        run.shutil.rmtree(self.suite.tmp, ignore_errors=True)
        self.dir.cleanup()

    def program(self, body):
        path = os.path.join(self.dir.name, "bin", "prog")
        executable(path, "#!/bin/sh\n" + body)
        return path

    # gpu_checks' first line: whether the shim is in (LD_PRELOAD set, even to "", by Suite.env).
    SHIM_LINE = 'if [ -n "${LD_PRELOAD+x}" ]; then echo shim_loaded=1; else echo shim_loaded=0; fi\n'

    def as_static(self, body):
        """A stand-in gpu_checks_static with this body after its shim_loaded line."""
        static = os.path.join(self.dir.name, "bin", "gpu_checks_static")
        executable(static, "#!/bin/sh\n" + self.SHIM_LINE + body)
        self.suite.static = static
        return static

    def test_exit_failure_after_the_work_is_judged(self):
        """A crash at exit after the work (done=0 printed): the figures are returned and the exit
        is kept for the verdict, a pass becoming a fail that says why."""
        prog = self.as_static("echo size=1 shim_delta=1; echo done=0; exit 139\n")
        out = self.suite.run([prog, "exactness"])
        self.assertIn("size=1 shim_delta=1", out)
        self.assertEqual(self.suite.exit_failures, ["[shim] %s exactness exited 139 after its work" % prog])
        self.assertEqual(run.with_exit_failures("pass", self.suite.exit_failures),
                         "fail: [shim] %s exactness exited 139 after its work (its figures pass)" % prog)
        self.assertEqual(run.with_exit_failures("fail", ["x exited 1 after its work"]),
                         "fail; also x exited 1 after its work")
        self.assertEqual(run.with_exit_failures("pass", []), "pass")
        # Without done=0 it failed during its work: an error, as before.
        prog = self.as_static("echo size=1; exit 139\n")
        with self.assertRaises(run.ProgramFailed):
            self.suite.run([prog, "exactness"])

    def test_a_crash_at_load_is_a_crash(self):
        """A program that said nothing (the shim's constructor crashed) is an exit failure, not a
        refused preload."""
        static = os.path.join(self.dir.name, "bin", "gpu_checks_static")
        executable(static, "#!/bin/sh\necho 'Segmentation fault' >&2; exit 139\n")
        self.suite.static = static
        with self.assertRaises(run.ProgramFailed) as cm:
            self.suite.run([static, "exactness"])
        self.assertIn("exactness exited 139", str(cm.exception))
        self.assertNotIn("without the shim", str(cm.exception))

    def test_a_torch_probe_with_output_after_its_answer(self):
        """A torch whose exit prints after the answer: "none (unexpected answer ...)", and the run
        goes on (the probe's own error was a TypeError that stopped every check)."""
        fake = os.path.join(self.dir.name, "fake")
        os.makedirs(os.path.join(fake, "torch"))
        with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
            f.write("import atexit, types\n__version__ = '9.9'\nversion = types.SimpleNamespace(cuda='13.0')\n"
                    "cuda = types.SimpleNamespace(is_available=lambda: True)\n"
                    "atexit.register(lambda: print('bye'))\n")
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = fake
        try:
            self.suite.probe_torch_start()
            self.assertFalse(self.suite.has_torch())
            self.assertEqual(self.suite.platform["torch"], "none (unexpected answer '[\"9.9\", \"13.0\", true]\\nbye\\n')")
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old

    def test_a_refused_preload_is_no_run_under_the_shim(self):
        """The loader ignored the preload (shim_loaded=0 under LD_PRELOAD): not a run under the
        shim, whatever it printed."""
        static = os.path.join(self.dir.name, "bin", "gpu_checks_static")
        executable(static, "#!/bin/sh\necho shim_loaded=0; echo hash=0x00000000000001e5; echo done=0\n")
        self.suite.static = static
        with self.assertRaises(run.ProgramFailed) as cm:
            self.suite.run([static, "harmless"])
        self.assertIn("ran without the shim (shim_loaded=0)", str(cm.exception))
        self.assertEqual(run.Suite.kv(self.suite, self.suite.run([static, "harmless"], shim=False))["hash"],
                         "0x00000000000001e5")

    def test_crash_keeps_output(self):
        prog = self.program("echo size=1 shim_delta=1; echo 'Segmentation fault' >&2; exit 139\n")
        with self.assertRaises(run.ProgramFailed) as cm:
            self.suite.run([prog])
        self.assertIn("exited 139", str(cm.exception))
        self.assertIn("size=1 shim_delta=1", str(cm.exception))
        self.assertIn("Segmentation fault", str(cm.exception))
        log = slurp(self.log)
        self.assertIn("%s: exit 139" % prog, log)
        self.assertIn("Segmentation fault", log)

    def test_hang_is_cut_at_its_own_limit(self):
        prog = self.program("echo started; echo waiting >&2; exec sleep 20\n")
        t0 = run.time.monotonic()
        with self.assertRaises(run.ProgramFailed) as cm:
            self.suite.run([prog], timeout=1)
        self.assertLess(run.time.monotonic() - t0, 10)
        self.assertIn("ran past its 1 s", str(cm.exception))
        self.assertIn("started", str(cm.exception))
        self.assertIn("killed after 1 s", slurp(self.log))
        self.assertIn("waiting", slurp(self.log))

    def test_the_report_names_the_check_running(self):
        """While a check runs, the reports say which (a run killed from outside shows where it
        was); once it is recorded, that line is gone."""
        seen = []

        def check(suite):
            with open(os.path.join(suite.args.outdir, "gpu-report.md")) as f:
                seen.append(f.read())
            return "-", "-", "pass"
        saved = run.CHECKS
        run.CHECKS = [("probe_running", check, False, "the report while it runs")]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run.run_checks(self.suite, self.suite.args)
        finally:
            run.CHECKS = saved
        self.assertIn("- running: probe_running (started ", seen[0])
        with open(os.path.join(self.suite.args.outdir, "gpu-report.md")) as f:
            self.assertNotIn("running:", f.read())

    def test_only_runs_the_checks_named(self):
        """--only (GPU_CHECK_ONLY): the checks named run, the others are reported not run."""
        ran = []

        def check(suite):
            ran.append(1)
            return "-", "-", "pass"
        saved = run.CHECKS
        run.CHECKS = [("first", check, False, "one"), ("second", check, False, "two")]
        self.suite.args.only = "second"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run.run_checks(self.suite, self.suite.args)
        finally:
            run.CHECKS = saved
            del self.suite.args.only
        self.assertEqual(len(ran), 1)
        self.assertEqual([(r["check"], r["verdict"]) for r in self.suite.results],
                         [("first", "not run: not among --only's checks"), ("second", "pass")])

    def test_missing_program_and_shim(self):
        with self.assertRaises(run.NotBuilt) as cm:
            self.suite.run([os.path.join(self.dir.name, "bin", "gpu_checks_static"), "exactness"])
        self.assertEqual(str(cm.exception), "gpu_checks_static was not built (see the log)")
        prog = self.program("exit 0\n")
        self.suite.shim = os.path.join(self.dir.name, "build", "shim", "libcushim.so")
        with self.assertRaises(run.NotBuilt):
            self.suite.run([prog])
        self.assertEqual(self.suite.run([prog], shim=False), "")

    def test_stdout_line_buffered(self):
        """gpu_checks.cu makes stdout line-buffered first thing: into run.py's pipe it would be
        fully buffered, and a crash or hang in an exit handler (the shim's report) would lose every
        figure printed (glibc flushes stdout after the exit handlers and destructors)."""
        self.assertRegex(CU, r"int main\(int argc, char \*\*argv\)\n\{\n(?:\s*//[^\n]*\n)*"
                             r"\s*setvbuf\(stdout, NULL, _IOLBF, 0\);")

    def test_harmless_without_the_shared_build(self):
        """Only the shared-cudart program missing: the static half is still compared, and the
        check is not counted as passed."""
        self.as_static("echo hash=0x00000000000001e5\n")
        expected, measured, verdict = run.check_harmless(self.suite)
        self.assertEqual(verdict, "not run: gpu_checks_shared was not built (see the log) "
                                  "(the static cudart half is identical)")
        self.assertIn("plain 0x00000000000001e5, shim 0x00000000000001e5", measured)

    def test_overhead_keeps_cases_measured_before_the_deadline(self):
        """The deadline during the third case: the first two cases' ratios are reported."""
        prog = self.as_static("echo ns_per_pair=100.0\n")
        calls = []
        real_run = self.suite.run

        def run_until(cmd, **kw):
            calls.append(cmd)
            if len(calls) > 12:  # 2 cases x 3 rounds x (plain, shim)
                raise run.DeadlineReached("the run's deadline came")
            return real_run(cmd, **kw)
        self.suite.run = run_until
        expected, measured, verdict = run.check_bench_overhead(self.suite)
        self.assertEqual(measured["4 KiB"], "plain 100 ns, shim 100 ns, ratio 1.000, plain runs' spread 0.000; best 100 / 100 ns")
        self.assertEqual(measured["1 MiB"], "plain 100 ns, shim 100 ns, ratio 1.000, plain runs' spread 0.000; best 100 / 100 ns")
        self.assertEqual(measured["256 MiB"], "not run: deadline")
        self.assertEqual(verdict, "pass (2 of 4 cases; the rest not run: deadline)")

    def overhead_first_case(self, plain, shim):
        """check_bench_overhead's first case with these ns_per_pair figures, alternated (plain,
        shim, plain, ...); the deadline after it."""
        counter = os.path.join(self.dir.name, "calls")
        self.as_static('n=$(cat %s 2>/dev/null || echo 0); echo $((n + 1)) > %s\n'
                       'if [ -n "$LD_PRELOAD" ] || [ "${LD_PRELOAD+x}" = x ]; then set -- %s; else set -- %s; fi\n'
                       'shift $((n / 2)); echo ns_per_pair=$1.0\n' % (counter, counter, " ".join(map(str, shim)),
                                                                     " ".join(map(str, plain))))
        real_run, calls = self.suite.run, []

        def run_until(cmd, **kw):
            calls.append(cmd)
            if len(calls) > 6:
                raise run.DeadlineReached("the run's deadline came")
            return real_run(cmd, **kw)
        self.suite.run = run_until
        return run.check_bench_overhead(self.suite)

    def test_overhead_within_the_plain_runs_spread_is_inconclusive(self):
        """Ratio 1.03 where the runs without the shim differ by 4 % among themselves: no verdict
        on the shim's cost, and no failure counted."""
        expected, measured, verdict = self.overhead_first_case([100, 104, 100], [103, 103, 103])
        self.assertEqual(measured["4 KiB"], "plain 100 ns, shim 103 ns, ratio 1.030, plain runs' spread 0.040; best 100 / 103 ns")
        self.assertEqual(verdict, "inconclusive (benchmark target: over 1.01 by less than the plain runs' "
                                  "own spread) (1 of 4 cases; the rest not run: deadline)")

    def test_overhead_beyond_the_plain_runs_spread_fails(self):
        expected, measured, verdict = self.overhead_first_case([100, 101, 100], [103, 103, 103])
        self.assertEqual(measured["4 KiB"], "plain 100 ns, shim 103 ns, ratio 1.030, plain runs' spread 0.010; best 100 / 103 ns")
        self.assertEqual(verdict, "fail (benchmark target) (1 of 4 cases; the rest not run: deadline)")

    def test_instantiate_lookup_either_answer(self):
        """The driver may answer "cuGraphInstantiate" at 12000 with WithFlags or with v2: either
        passes when the launches do (through v2, with the free between them); neither fails."""
        tail = "echo rc_launch2=0 rc_sync=0 rc_free=0 rc_exec_destroy=0; echo done=0\n"
        cases = [("lookup_is_with_flags=1 lookup_is_v2=0", "rc_instantiate=0 rc_launch1=0", "pass"),
                 ("lookup_is_with_flags=0 lookup_is_v2=1", "rc_instantiate=0 rc_launch1=0 rc_sync1=0 rc_free1=0",
                  "pass"),
                 ("lookup_is_with_flags=0 lookup_is_v2=1", "rc_instantiate=0 rc_launch1=0 rc_sync1=0 rc_free1=1",
                  "fail"),
                 ("lookup_is_with_flags=0 lookup_is_v2=0", "rc_instantiate=-1", "fail")]
        for lookup, rcs, want in cases:
            with self.subTest(lookup=lookup, rcs=rcs):
                self.as_static("echo %s; echo %s; %s" % (lookup, rcs, tail if "-1" not in rcs else "echo done=0\n"))
                expected, measured, verdict = run.check_instantiate_lookup(self.suite)
                self.assertEqual(verdict, want, measured)
        self.assertIn("driver answers neither", measured)

    def test_offload_edges_without_an_exportable_pool(self):
        """A driver that makes no exportable pool (the program says rc_pool_create and stops there):
        the teardown part is judged alone, the pool part said not run; a failing teardown still fails."""
        pool = ("echo rc_current=0 rc_export=1 rc_share=0 rc_export_shared=0 pool_matches=1 "
                "offloaded_by_current=0 offloaded_left=0; ")
        for teardown, rc_pool, want in [("rc_thread=0 host_rounds_positive=1 host_errors=0", 801, "pass; "),
                                        ("rc_thread=3 host_rounds_positive=1 host_errors=0", 801, "fail"),
                                        ("rc_thread=0 host_rounds_positive=1 host_errors=0", 0, "pass")]:
            with self.subTest(teardown=teardown, rc_pool=rc_pool):
                self.as_static("echo %s; echo rc_pool_create=%d; %secho done=0\n" % (
                    teardown, rc_pool, pool if rc_pool == 0 else ""))
                expected, measured, verdict = run.check_offload_edges(self.suite)
                self.assertTrue(verdict == want or (want.endswith(" ") and verdict.startswith(want)), verdict)

    def test_offload_edges_export_answered_as_without_the_shim(self):
        """The pool's exports are judged against the same program without the shim: an export the
        driver refuses before the pool is shared passes when it refuses it alike without the shim;
        one the shim alone changes fails, as does an export of the shared pool that fails."""
        teardown = "echo rc_thread=0 host_rounds_positive=1 host_errors=0 rc_pool_create=0; "
        tail = " pool_matches=1 offloaded_by_current=0 offloaded_left=0; echo done=0\n"
        for shim, plain, want in [("rc_export=1 rc_share=0 rc_export_shared=0", "rc_export=1 rc_share=0 rc_export_shared=0", "pass"),
                                  ("rc_export=1 rc_share=0 rc_export_shared=0", "rc_export=0 rc_share=0 rc_export_shared=0", "fail"),
                                  ("rc_export=1 rc_share=0 rc_export_shared=1", "rc_export=1 rc_share=0 rc_export_shared=1", "fail")]:
            with self.subTest(shim=shim, plain=plain):
                self.as_static('%sif [ -n "$LD_PRELOAD" ] || [ "${LD_PRELOAD+x}" = x ]; then echo rc_current=0 %s%s; else echo rc_current=0 %s%s; fi\n'
                               % (teardown, shim, tail.split(";")[0], plain, tail.split(";")[0]) + "echo done=0\n")
                expected, measured, verdict = run.check_offload_edges(self.suite)
                self.assertEqual(verdict, want, measured)
                self.assertEqual(measured["plain"]["rc_export"], int(plain.split()[0].split("=")[1]))

    def test_torch_env_sets_the_older_name_only(self):
        """PYTORCH_CUDA_ALLOC_CONF is set; an inherited PYTORCH_ALLOC_CONF, which PyTorch would read
        first (and 2.9.1 ignores expandable_segments in), is removed."""
        old = os.environ.get("PYTORCH_ALLOC_CONF")
        os.environ["PYTORCH_ALLOC_CONF"] = "backend:cudaMallocAsync"
        try:
            env = self.suite.env(True, run.torch_env(expandable=True))
        finally:
            if old is None:
                del os.environ["PYTORCH_ALLOC_CONF"]
            else:
                os.environ["PYTORCH_ALLOC_CONF"] = old
        self.assertEqual(env["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True")
        self.assertNotIn("PYTORCH_ALLOC_CONF", env)
        self.assertEqual(env["TORCH_CUBLAS_WORKSPACE_CACHE"], "1")

    def test_async_backend_not_taken_is_not_run(self):
        """PyTorch that keeps its native allocator did not exercise the shim's async path: not run,
        not a failure; taken, the figures decide."""
        real = run.torch_run
        figures = {"torch_reserved": 2 * run.MiB, "torch_allocated": run.MiB, "shim_pool_reserved": 2 * run.MiB,
                   "shim_async_current": run.MiB, "shim_device_current": 0}
        try:
            run.torch_run = lambda suite, args, **kw: dict(figures, backend="native")
            verdict = run.check_torch_async_backend(self.suite)[2]
            self.assertEqual(verdict, "not run: PyTorch did not take backend:cudaMallocAsync "
                                      "(its allocator backend is native)")
            run.torch_run = lambda suite, args, **kw: dict(figures, backend="cudaMallocAsync")
            self.assertEqual(run.check_torch_async_backend(self.suite)[2], "pass")
            run.torch_run = lambda suite, args, **kw: dict(figures, backend="cudaMallocAsync",
                                                           shim_pool_reserved=run.MiB)
            self.assertEqual(run.check_torch_async_backend(self.suite)[2], "fail")
        finally:
            run.torch_run = real

    def test_probe_torch(self):
        """PyTorch is probed in another interpreter: a CPU-only build, one that sees no GPU and
        one whose import fails are "none (...)", so its checks say not run."""
        fake = os.path.join(self.dir.name, "fake")
        os.makedirs(os.path.join(fake, "torch"))
        cases = [("None", "False", "none (torch 9.9 is a CPU-only build)"),
                 ("'13.0'", "False", "none (torch 9.9, CUDA 13.0, sees no GPU: "
                                     "torch.cuda.is_available() is false)"),
                 ("'13.0'", "True", "9.9 (CUDA 13.0)"),
                 ("raise", "", "none (ImportError: no libcudart here)")]
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = fake
        try:
            for cuda, available, want in cases:
                with open(os.path.join(fake, "torch", "__init__.py"), "w") as f:
                    if cuda == "raise":
                        f.write("raise ImportError('no libcudart here')\n")
                    else:
                        f.write("import types\n__version__ = '9.9'\nversion = types.SimpleNamespace("
                                "cuda=%s)\ncuda = types.SimpleNamespace(is_available=lambda: %s)\n"
                                % (cuda, available))
                self.assertEqual(self.suite.probe_torch(), want)
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old

    def test_toolkit_newer_than_driver(self):
        """A toolkit of a newer CUDA major than the driver's is said in the report (its C programs
        cannot start); a newer minor, the same version or an unknown one is not."""
        nvcc13 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.48\n"
        nvcc128 = "Cuda compilation tools, release 12.8, V12.8.93\n"
        smi = "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |\n"
        self.assertEqual(run.toolkit_newer_than_driver(nvcc13, smi),
                         "the driver supports CUDA 12.4, older than nvcc's 13.0: the C checks' programs fail "
                         "with cudaErrorInsufficientDriver (35); the PyTorch checks use PyTorch's own runtime")
        self.assertIsNone(run.toolkit_newer_than_driver(nvcc128, smi))
        self.assertIsNone(run.toolkit_newer_than_driver(nvcc13, smi.replace("12.4", "13.0")))
        self.assertIsNone(run.toolkit_newer_than_driver(nvcc13, ""))
        self.assertIsNone(run.toolkit_newer_than_driver("", smi))
        self.assertEqual(run.cuda_version(r"CUDA Version:\s*(\d+)\.(\d+)", smi), (12, 4))

    def test_no_cublas(self):
        with open(os.path.join(self.dir.name, "bin", "no-cublas"), "w"):
            pass
        with self.assertRaises(run.NotBuilt) as cm:
            run.check_offload_sgemm(self.suite)
        self.assertIn("cuBLAS did not link", str(cm.exception))


def read_keys(func, roots):
    """String keys of the subscripts in `func` whose base (any depth) is a name in `roots`, or a
    call of one."""
    keys = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Call)):
                base = base.value if isinstance(base, ast.Subscript) else base.func
            if isinstance(base, ast.Name) and base.id in roots:
                keys |= {c.value for c in ast.walk(node.slice)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return keys


def functions(path):
    tree = ast.parse(slurp(path))
    return {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}


class Python38(unittest.TestCase):
    def test_grammar(self):
        """The GPU machine's Python may be as old as 3.8: the suite's files parse with 3.8's grammar
        (ast's feature_version; a 3.9+ form such as parenthesized context managers fails here).
        Grammar only: a newer library call would still pass (a review ran the suite under 3.8)."""
        for name in ("run.py", "torch_checks.py", "test_run_py.py"):
            with self.subTest(file=name):
                ast.parse(slurp(os.path.join(HERE, name)), filename=name, feature_version=(3, 8))
        with self.assertRaises(SyntaxError):
            ast.parse("with (open(a) as f, open(b) as g):\n    pass\n", feature_version=(3, 8))


class Torch(unittest.TestCase):
    def test_keys(self):
        """Every key a PyTorch check reads from torch_run(MODE) is a dict key of MODE's function."""
        emitted = {}
        tc = functions(os.path.join(HERE, "torch_checks.py"))
        for node in ast.walk(tc["main"]):  # if what == "peak": result = check_peak()
            if (isinstance(node, ast.If) and isinstance(node.test, (ast.Compare, ast.BoolOp))):
                mode = [c.value for c in ast.walk(node.test) if isinstance(c, ast.Constant)
                        and isinstance(c.value, str)]
                call = getattr(node.body[0], "value", None)
                if mode and isinstance(call, ast.Call):
                    body = list(ast.walk(tc[call.func.id]))
                    # the keys of its dict literals, and those it stores (result["k"] = ...)
                    emitted[mode[0]] = {k.value for d in body if isinstance(d, ast.Dict) for k in d.keys
                                        if isinstance(k, ast.Constant)} | {
                                        index(d).value for d in body if isinstance(d, ast.Subscript)
                                        and isinstance(d.ctx, ast.Store) and isinstance(index(d), ast.Constant)}
        self.assertEqual(set(emitted), {"peak", "graph", "forward", "async_backend"})
        runs = 0
        for name, func in functions(run.__file__).items():
            for node in ast.walk(func):  # r = torch_run(suite, ["peak"], ...)
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and getattr(node.value.func, "id", "") == "torch_run"):
                    mode = node.value.args[1].elts[0].value
                    read = read_keys(func, {node.targets[0].id})
                    runs += 1
                    self.assertTrue(read, name)
                    self.assertLessEqual(read, emitted[mode], "%s reads keys torch_checks.py %s "
                                         "does not emit" % (name, mode))
        self.assertGreaterEqual(runs, 5)

    def test_stat_keys(self):
        """Every key read from `cushim stat --json` is in docs/SUMMARY-JSON.md's example."""
        doc = slurp(os.path.join(ROOT, "docs", "SUMMARY-JSON.md"))
        read = read_keys(functions(run.__file__)["check_nvidia_smi"], {"stat", "d"})
        read |= read_keys(functions(os.path.join(HERE, "torch_checks.py"))["check_graph"],
                          {"st", "graphs", "cushim_stat"})
        self.assertGreaterEqual(read, {"devices", "device_total", "untracked_bytes", "graphs",
                                       "launches", "executable_graphs", "capture_bytes"})
        for key in read:
            self.assertIn('"%s"' % key, doc, key)

    def test_struct_layout(self):
        """torch_checks.py's ctypes structs have cushim.h's field names, offsets and size."""
        sys.modules.setdefault("torch", types.ModuleType("torch"))  # PyTorch is not needed here
        import torch_checks as tc
        lines = []
        for ctype, cname in ((tc.DeviceStats, "cushim_device_stats"), (tc.KindStats, "cushim_kind_stats")):
            lines.append('printf("%%zu\\n", sizeof(struct %s));' % cname)
            lines += ['printf("%%zu\\n", offsetof(struct %s, %s));' % (cname, f[0]) for f in ctype._fields_]
        lines += ['printf("%%d\\n", CUSHIM_MEM_%s);' % k.upper() for k in tc.KIND]
        lines.append('printf("%d\\n", CUSHIM_MEM_KIND_COUNT);')
        expected = []
        for ctype in (tc.DeviceStats, tc.KindStats):
            expected.append(ctypes.sizeof(ctype))
            expected += [getattr(ctype, f[0]).offset for f in ctype._fields_]
        expected += list(tc.KIND.values()) + [len(tc.KIND)]
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "layout.c")
            with open(src, "w") as f:
                f.write("#include <stddef.h>\n#include <stdio.h>\n#include \"cushim.h\"\n"
                        "int main(void) {\n%s\nreturn 0;\n}\n" % "\n".join(lines))
            exe = os.path.join(d, "layout")
            subprocess.run([os.environ.get("CC", "cc"), "-I", os.path.join(ROOT, "include"), src,
                            "-o", exe], check=True)
            got = [int(x) for x in subprocess.run([exe], check=True, capture_output=True,
                                                  text=True).stdout.split()]
        self.assertEqual(got, expected)


if __name__ == "__main__":
    unittest.main()
