#!/usr/bin/python3
"""tools/fleet_query.py runs one query on a fleet's files and gives one table.

The fleet is recorded here: 10 agents at once, each under its own machine
name, each streaming into its own directory and rotating files every 250 ms,
5 files each kept (with the sidecars the agent wrote, but for one machine's,
removed to take the other way to the boot id), as ringside-ship leaves them
on a remote (one directory per node); and one file that is no trace. Needs
root (the agents record the kernel), the ringside binary ($RINGSIDE, else
build/ringside), Perfetto's trace_processor_shell ($TRACE_PROCESSOR, else
../shared/bin/trace_processor_shell beside the source tree) and Debian's
python3-dask and python3-distributed (run it with /usr/bin/python3); skips,
naming what is missing. Run by `make test`; about 25 s.
"""

import collections
import contextlib
import csv
import importlib.util
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import warnings

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(REPO, "tools", "fleet_query.py")
RINGSIDE = os.path.abspath(os.environ.get("RINGSIDE", os.path.join(REPO, "build", "ringside")))
TRACE_PROCESSOR = os.path.abspath(os.environ.get(
    "TRACE_PROCESSOR", os.path.join(REPO, "..", "shared", "bin", "trace_processor_shell")))
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).

MACHINES = [f"node-{i:02d}" for i in range(10)]
FILES_PER_MACHINE = 5
NO_SIDECARS = "node-09"  # Its sidecars are removed: its boot id comes from ringside inspect.
BROKEN = "node-00/broken.pftrace"
STREAM_CONFIG = """buffers { size_kb: 1024 }
data_sources { config { name: "linux.bpf" bpf_config { sched: true process: true } } }
write_into_file: true
file_write_period_ms: 100
file_rotation_period_ms: 250
"""
SIZE_SQL = "SELECT int_value AS size_bytes FROM metadata WHERE name = 'trace_size_bytes'"
MS = 10**6


def load_tool():
    spec = importlib.util.spec_from_file_location("fleet_query", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet_query = load_tool()


def missing():
    """What the recorded fleet needs and this machine lacks, or None."""
    if os.geteuid() != 0:
        return "root (the agents record the kernel)"
    try:
        subprocess.run([RINGSIDE, "version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:  # Missing, or another ARCH's.
        return f"a ringside binary that runs here ({RINGSIDE}; $RINGSIDE): {e}"
    if not os.access(TRACE_PROCESSOR, os.X_OK):
        return (f"Perfetto's trace_processor_shell ({TRACE_PROCESSOR}; $TRACE_PROCESSOR, or "
                "../shared/bin/trace_processor_shell beside the source tree)")
    for module in ("dask", "distributed"):
        if importlib.util.find_spec(module) is None:
            return (f"the Python module {module} in {sys.executable} (Debian's python3-dask "
                    "and python3-distributed, with /usr/bin/python3)")
    return None


def record_fleet(root):
    """Streams MACHINES at once into root/<machine>/, until each has
    FILES_PER_MACHINE finished files; keeps the first FILES_PER_MACHINE."""
    config = os.path.join(root, "stream.pbtxt")
    with open(config, "w") as f:
        f.write(STREAM_CONFIG)
    agents = {}
    try:
        for machine in MACHINES:
            out, run = os.path.join(root, "fleet", machine), os.path.join(root, "run", machine)
            os.makedirs(out, mode=0o700)
            os.makedirs(run)
            with open(os.path.join(run, "log"), "w") as log:
                agents[machine] = subprocess.Popen(
                    [RINGSIDE, "agent", "-c", config, "--machine-name", machine, "--run-dir",
                     run, "--socket", os.path.join(run, "control.sock"), "--output-dir", out],
                    stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not all(len(finished(root, m)) >= FILES_PER_MACHINE for m in MACHINES):
            for machine, agent in agents.items():
                if agent.poll() is not None:
                    raise AssertionError(f"the agent of {machine} exited ({agent.returncode}): "
                                         + open(os.path.join(root, "run", machine, "log")).read())
            if time.monotonic() > deadline:
                raise AssertionError("the agents wrote too few files in 60 s")
            time.sleep(0.1)
    finally:
        stop(agents.values())
    for machine in MACHINES:  # Whatever the agents wrote after those goes.
        kept = finished(root, machine)[:FILES_PER_MACHINE]
        kept += [name + ".json" for name in kept]
        for name in set(os.listdir(os.path.join(root, "fleet", machine))) - set(kept):
            os.remove(os.path.join(root, "fleet", machine, name))


def stop(agents):
    for agent in agents:
        agent.send_signal(signal.SIGTERM)
    for agent in agents:
        try:
            agent.wait(timeout=20)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def finished(root, machine):
    """The machine's traces that have their sidecar, oldest first."""
    names = os.listdir(os.path.join(root, "fleet", machine))
    return sorted(n for n in names if n.endswith(".pftrace") and n + ".json" in names)


def run_tool(*args):
    return subprocess.run([sys.executable, TOOL, "--trace-processor", TRACE_PROCESSOR,
                           "--ringside", RINGSIDE, *args], capture_output=True, text=True,
                          timeout=120)


class FleetQueryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        lacking = missing()
        if lacking:
            raise unittest.SkipTest(f"needs {lacking}")
        cls.tmp = tempfile.TemporaryDirectory(prefix="fleet_query_test.")
        cls.root = os.path.join(cls.tmp.name, "fleet")
        cls.before_ns = time.time_ns()
        try:
            record_fleet(cls.tmp.name)
        except BaseException:
            cls.tmp.cleanup()
            raise
        cls.after_ns = time.time_ns()
        cls.sidecars = {}  # file below root -> its sidecar, read before any is removed.
        for machine in MACHINES:
            for name in finished(cls.tmp.name, machine):
                path = os.path.join(cls.root, machine, name)
                with open(path + ".json") as f:
                    cls.sidecars[f"{machine}/{name}"] = json.load(f)
                if machine == NO_SIDECARS:
                    os.remove(path + ".json")
        with open(os.path.join(cls.root, BROKEN), "w") as f:
            f.write("not a trace\n")
        with open("/proc/sys/kernel/random/boot_id") as f:
            cls.boot_id = f.read().strip()
        # The table the other runs are compared with.
        cls.sizes = run_tool("--format", "json", cls.root, SIZE_SQL)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def query_json(self, *args):
        r = run_tool("--format", "json", *args)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        return r, json.loads(r.stdout)

    def assert_only_broken_failed(self, r, table):
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual([f["file"] for f in table["failed"]], [BROKEN])
        self.assertIn("Unknown trace type", table["failed"][0]["error"])
        self.assertIn("failed (1 file): trace_processor_shell (exit 1): ", r.stderr)
        self.assertIn(f"\n  {BROKEN}\n", r.stderr)

    def test_each_file_one_row_with_its_machine_boot_and_window(self):
        r = self.sizes
        table = json.loads(r.stdout)
        self.assert_only_broken_failed(r, table)
        self.assertEqual(table["columns"], list(fleet_query.FILE_COLUMNS) + ["size_bytes"])
        self.assertEqual(sorted(row["file"] for row in table["rows"]), sorted(self.sidecars))
        self.assertEqual(collections.Counter(row["machine"] for row in table["rows"]),
                         {m: FILES_PER_MACHINE for m in MACHINES})
        for row in table["rows"]:
            with self.subTest(file=row["file"]):
                path = os.path.join(self.root, row["file"])
                self.assertEqual(row["size_bytes"], os.path.getsize(path))
                self.assertEqual(row["machine"], row["file"].split("/")[0])
                self.assertEqual(row["boot_id"], self.boot_id)
                self.assert_window_is_the_files(row, self.sidecars[row["file"]]["time_range"])
        self.assertIn("fleet_query: 51 files of 10 machines: 50 answered (50 rows), 1 failed",
                      r.stderr)

    def assert_window_is_the_files(self, row, time_range):
        """Its kernel events' span, as the agent's sidecar has it: the same
        last event; the first, or one a little later (trace_processor leaves
        out a few of a rotated file's first events, which ringside counts)."""
        if time_range["events_realtime_first_ns"] is None:  # A file without events.
            self.assertEqual((row["file_start"], row["file_end"]), (None, None))
            return
        start, end = (fleet_query.parse_time_ns(row[c]) for c in ("file_start", "file_end"))
        self.assertLessEqual(self.before_ns, start)
        self.assertLessEqual(start, end)
        self.assertLessEqual(end, self.after_ns)
        self.assertGreaterEqual(start, time_range["events_realtime_first_ns"] - MS)
        self.assertAlmostEqual(end, time_range["events_realtime_last_ns"], delta=MS)

    def test_csv_is_the_same_table(self):
        r = run_tool(self.root, SIZE_SQL)
        self.assertEqual(r.returncode, 1, r.stderr)
        table = json.loads(self.sizes.stdout)
        rows = list(csv.reader(io.StringIO(r.stdout)))
        self.assertEqual(rows[0], table["columns"])
        as_text = [["" if v is None else str(v) for v in row.values()] for row in table["rows"]]
        self.assertEqual(rows[1:], as_text)

    def test_a_query_error_fails_each_file_with_its_message(self):
        r, table = self.query_json(self.root, "SELECT no_such_column FROM sched")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(table["rows"], [])
        self.assertEqual(len(table["failed"]), 51)
        self.assertIn("failed (50 files): trace_processor_shell (exit 1): ", r.stderr)
        self.assertIn("no such column: no_such_column", r.stderr)

    def test_around_puts_a_wall_clock_window_on_each_files_trace_time(self):
        middle = min(s["time_range"]["realtime_first_ns"] for s in self.sidecars.values())
        around = fleet_query.utc(middle)  # To the microsecond.
        middle = middle // 1000 * 1000
        r, table = self.query_json(self.root, "--around", around, "--window", "2s",
                                   "SELECT {start_ns} AS start_ns, {end_ns} AS end_ns")
        self.assert_only_broken_failed(r, table)
        self.assertEqual(len(table["rows"]), 50)
        for row in table["rows"]:
            with self.subTest(file=row["file"]):
                # The sidecar's REALTIME less BOOTTIME at the file's first and
                # last clock snapshots. The window opens before every file's
                # start, so through its first snapshot; it closes through the
                # snapshot nearest its end, which may be a later one: the two
                # clocks drift apart while the file is written (NTP slews
                # REALTIME; CI saw 0.43 ms within one file).
                t = self.sidecars[row["file"]]["time_range"]
                first = t["realtime_first_ns"] - t["first_ns"]
                last = t["realtime_last_ns"] - t["last_ns"]
                self.assertAlmostEqual(row["start_ns"], middle - 10**9 - first, delta=MS / 4)
                end_offset = middle + 10**9 - row["end_ns"]
                self.assertGreaterEqual(end_offset, min(first, last) - MS / 4)
                self.assertLessEqual(end_offset, max(first, last) + MS / 4)

    def test_a_sidecar_of_another_file_is_ignored(self):
        names = sorted(self.sidecars)
        # A file of another size than the sidecar's: that is how fleet_query
        # tells (two recordings of the same config can come out the same size).
        size = lambda name: os.path.getsize(os.path.join(self.root, name))
        other = next((n for n in names[1:] if size(n) != size(names[0])), None)
        self.assertIsNotNone(other, "every recorded file has the same size")
        with tempfile.TemporaryDirectory(prefix="fleet_query_test.") as d:
            shutil.copy(os.path.join(self.root, other), os.path.join(d, "t.pftrace"))
            shutil.copy(os.path.join(self.root, names[0] + ".json"),
                        os.path.join(d, "t.pftrace.json"))
            r, table = self.query_json(d, SIZE_SQL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("note (1 file): sidecar ignored: it describes a file of ", r.stderr)
        self.assertEqual([row["boot_id"] for row in table["rows"]], [self.boot_id])

    @unittest.skipUnless(shutil.which("rclone"), "needs rclone (Debian's rclone)")
    def test_an_rclone_remote_gives_the_same_rows(self):
        r, remote = self.query_json(":local:" + self.root, "--include", "node-0[89]-*.pftrace",
                                    SIZE_SQL)
        self.assertEqual(r.returncode, 0, r.stderr)
        local = [row for row in json.loads(self.sizes.stdout)["rows"]
                 if row["machine"] in ("node-08", "node-09")]
        self.assertEqual(len(remote["rows"]), 2 * FILES_PER_MACHINE)
        self.assertEqual(remote["rows"], local)

    def test_a_dask_cluster_gives_the_same_table(self):
        import distributed
        with contextlib.ExitStack() as stack:
            # Debian's distributed 2022.12 on its tornado: not ours to fix.
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore", DeprecationWarning)
            cluster = stack.enter_context(distributed.LocalCluster(
                n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
                host="127.0.0.1", dashboard_address=None))
            r, table = self.query_json("--scheduler", cluster.scheduler_address,
                                       "--workers", "3", self.root, SIZE_SQL)
        self.assert_only_broken_failed(r, table)
        self.assertIn(f"(on {socket.gethostname()})", table["failed"][0]["error"])
        self.assertEqual(table["rows"], json.loads(self.sizes.stdout)["rows"])


class ParseResultsTest(unittest.TestCase):
    """trace_processor's CSV, as v58.2 prints it."""

    def test_result_sets_strings_numbers_and_null(self):
        text = ('"a","b"\n1,"x"\n\n"c","d","e"\n"[NULL]",1.500000,"two\nlines"\n'
                '"",-3,17960000000000000001\n')
        self.assertEqual(fleet_query.parse_results(text), [
            (["a", "b"], [[1, "x"]]),
            (["c", "d", "e"], [[None, 1.5, "two\nlines"], ["", -3, 17960000000000000001]])])

    def test_an_unescaped_quote_inside_a_string(self):
        self.assertEqual(fleet_query.parse_results('"s","n"\n"say "hi" now",2\n'),
                         [(["s", "n"], [['say "hi" now', 2]])])

    def test_a_bare_token_that_is_no_number_stays_text(self):
        self.assertEqual(fleet_query.parse_results('"a","b"\n<blob>,\n'),
                         [(["a", "b"], [["<blob>", None]])])

    def test_a_set_without_rows(self):
        self.assertEqual(fleet_query.parse_results('"a"\n\n"b"\n7\n'),
                         [(["a"], []), (["b"], [[7]])])

    def test_a_string_without_its_closing_quote(self):
        with self.assertRaisesRegex(ValueError, "closing quote"):
            fleet_query.parse_results('"a"\n"cut\n')


class WindowTest(unittest.TestCase):
    def test_placeholders_become_each_files_trace_time(self):
        sql = fleet_query.with_window("SELECT {start_ns}, {end_ns}", "1970-01-01T00:00:10Z",
                                      "2s")
        self.assertIn("ts + (9000000000 - clock_value)", sql)
        self.assertIn("ts + (11000000000 - clock_value)", sql)
        self.assertEqual(sql, fleet_query.with_window("SELECT {start_ns}, {end_ns}", "10", "2s"))

    def test_a_window_needs_both_the_time_and_the_placeholders(self):
        for sql, around, window, message in [
                ("SELECT {start_ns}", None, "30s", "give the window with --around"),
                ("SELECT 1", "10", "30s", "uses neither"),
                ("SELECT {end_ns}", "2026-12-04T12:03:00", "30s", "with a zone"),
                ("SELECT {end_ns}", "10", "0s", "a duration above 0")]:
            with self.assertRaisesRegex(fleet_query.UsageError, message):
                fleet_query.with_window(sql, around, window)


if __name__ == "__main__":
    unittest.main()
