#!/usr/bin/python3
"""Runs one SQL query on many trace files and prints one table: SOURCE SQL.

After an incident the question is across the fleet ("which nodes had a task
blocked over a second at 12:03, and which task?"). trace_processor_shell
answers it for one file; this runs it on every file of SOURCE, in parallel
with Dask, and puts the answers in one table whose rows each start with the
file's own columns:

  file        the file's path below SOURCE
  machine     the machine's name (trace_processor's `machine` table, from
              the file's SystemInfo; else the sidecar's machine.name)
  boot_id     the kernel's boot id: trace_processor does not import it
              (ringside's SystemInfo field 1001), so it is read from the
              file's sidecar (<file>.json, written by the agent; ignored
              when its size_bytes is not the file's), else from
              `ringside inspect --json` when a ringside binary is found
              (--ringside); else empty
  file_start  the file's kernel events, first and last (trace_bounds), on
  file_end    the wall clock (to_realtime: the file's REALTIME clock
              snapshots), RFC 3339 UTC to the microsecond; empty for a file
              without events

SOURCE is a directory (searched below for --include, `*.pftrace` by default:
the shipped traces, with or without sidecars), one trace file, or an rclone
remote (`remote:path`, `:local:/dir`, anything rclone takes that is not a
local path): listed with `rclone lsf`, each file copied by the task that
queries it (`rclone copyto`) into a temporary directory, then deleted.

Each file is one trace_processor_shell run (`-q`), of the query and then of
the file's own columns, so a file is imported once. The query's last
statement gives the rows (trace_processor prints every statement's rows;
the others are dropped). A file that cannot be imported or queried is
listed on stderr with trace_processor's error, never dropped; so is one
whose columns differ from the other files'.

Wall-clock windows: with --around TIME [--window D], `{start_ns}` and
`{end_ns}` in the query become the window's ends in each file's trace time
(BOOTTIME ns), converted through the file's REALTIME clock snapshot nearest
to each end, so one query asks every file about the same moment.

Parallelism: by default the files are queried by Dask's threaded scheduler
(the work is in trace_processor_shell processes, so threads keep the CPUs
busy without the start-up of a process cluster), --workers at a time (one
per CPU). --scheduler HOST:PORT sends them to a Dask cluster instead
(dask-scheduler and dask-worker); each worker then needs
trace_processor_shell (--trace-processor names it for every worker) and the
files: SOURCE must be the same path on every worker, or an rclone remote
every worker's rclone is configured for.

Output: CSV on stdout (NULL is an empty field), or with --format json one
object {"columns", "rows" (one object per row), "failed"}. trace_processor's
CSV does not escape quotes inside strings: a string holding '",' or a quote
before a line break can be split wrongly. Exit status: 0 every file
answered, 1 some file failed (listed on stderr), 2 nothing was queried (a
usage error, no such program, the source unreadable or the scheduler not
reachable).

Python 3's standard library, Debian's python3-dask and python3-distributed
(run it with /usr/bin/python3, where Debian installs them), rclone for a
remote SOURCE.
"""

import argparse
import csv
import datetime
import decimal
import fnmatch
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

# The file's own columns, before the query's.
FILE_COLUMNS = ("file", "machine", "boot_id", "file_start", "file_end")
# Run after the query, on one line: its rows are the last result set.
FILE_SQL = ("SELECT (SELECT GROUP_CONCAT(name, ',') FROM machine WHERE name IS NOT NULL) "
            "AS machine, start_ts, end_ts, to_realtime(start_ts) AS start_real, "
            "to_realtime(end_ts) AS end_real FROM trace_bounds;")
FILE_SQL_COLUMNS = ["machine", "start_ts", "end_ts", "start_real", "end_real"]
# A time in trace time (ns) from one on the wall clock (Unix ns): through the
# file's REALTIME snapshot nearest to it.
TRACE_TIME_SQL = ("(SELECT ts + ({0} - clock_value) FROM clock_snapshot "
                  "WHERE clock_name = 'REALTIME' ORDER BY ABS(clock_value - {0}) LIMIT 1)")
PLACEHOLDERS = ("{start_ns}", "{end_ns}")
# trace_processor's stderr lines that are progress or logging, not errors.
NOISE_RE = re.compile(r"^(Loading trace:|\[\s*\d+\.\d+\]\s)")
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


class UsageError(Exception):
    """Nothing can be queried: exit 2."""


# --- trace_processor's output ----------------------------------------------------


def parse_results(text):
    """trace_processor's result sets, in order: [(columns, rows)].

    Result sets are separated by a blank line; a string is in quotes, NULL
    is "[NULL]", a number bare.
    """
    sets, columns, rows, row, i = [], None, [], [], 0
    while i < len(text):
        if not row and text[i] == "\n":  # A blank line ends a result set.
            sets.append((columns, rows))
            columns, rows, i = None, [], i + 1
            continue
        value, i = read_field(text, i)
        row.append(value)
        if text.startswith(",", i):
            i += 1
            continue
        if columns is None:
            columns = row
        else:
            rows.append(row)
        row, i = [], i + 1
    if columns is not None:
        sets.append((columns, rows))
    return sets


def read_field(text, i):
    """The field that starts at text[i], and where it ends: at its comma or
    its line's end. Quotes inside a string are not escaped, so a string
    ends at the first quote followed by a comma or a line end."""
    if text[i] != '"':
        ends = (text.find(",", i), text.find("\n", i), len(text))
        end = min(j for j in ends if j >= 0)
        return number(text[i:end]), end
    end = i
    while True:
        end = text.find('"', end + 1)
        if end < 0:
            raise ValueError(f"a string without its closing quote at byte {i}")
        if text[end + 1:end + 2] in ("", ",", "\n"):
            value = text[i + 1:end]
            return (None if value == "[NULL]" else value), end + 1


def number(token):
    """A bare token: an integer, a real, or (a blob, say) its text."""
    for kind in (int, float):
        try:
            return kind(token)
        except ValueError:
            pass
    return token or None


def error_text(stderr):
    """trace_processor's stderr without its progress and log lines."""
    lines = [l.rstrip() for l in re.split(r"[\r\n]", stderr)]
    return "\n".join(l for l in lines if l and not NOISE_RE.match(l)) or "(no message)"


def utc(unix_ns):
    if unix_ns is None:
        return None
    t = datetime.datetime.fromtimestamp(unix_ns // 10**9, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{unix_ns % 10**9 // 1000:06d}Z"


# --- One file, on whichever worker runs it ----------------------------------------


def query_file(item, job):
    """Queries one file: a dict of the file's columns, `columns` and `rows`
    of the query, `notes` (not failures) and `error` (None when answered)."""
    kind, root, name, has_sidecar = item
    result = {"file": name, "machine": None, "boot_id": None, "file_start": None,
              "file_end": None, "columns": None, "rows": [], "notes": [], "error": None}
    try:
        with tempfile.TemporaryDirectory(prefix="fleet_query.") as scratch:
            path, sidecar = local_copy(kind, root, name, has_sidecar, scratch)
            query_local_file(path, sidecar, job, scratch, result)
    except Exception as e:  # Any failure is this file's, never the run's.
        result["error"] = f"{type(e).__name__}: {e}"
    if result["error"]:
        result["error"] += f" (on {socket.gethostname()})" if job["on_cluster"] else ""
    return result


def local_copy(kind, root, name, has_sidecar, scratch):
    """The file's local path and its sidecar's (or None): fetched with rclone
    into `scratch` from a remote."""
    if kind != "rclone":
        path = os.path.join(root, name) if kind == "dir" else root
        return path, path + ".json" if has_sidecar else None
    local = os.path.join(scratch, os.path.basename(name))
    wanted = [(name, local)] + ([(name + ".json", local + ".json")] if has_sidecar else [])
    for remote_name, to in wanted:
        r = subprocess.run(["rclone", "copyto", remote_path(root, remote_name), to],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"rclone copyto failed (exit {r.returncode}): "
                               f"{r.stderr.strip()}")
    return local, local + ".json" if has_sidecar else None


def remote_path(root, name):
    return root + name if root.endswith(":") else root.rstrip("/") + "/" + name


def query_local_file(path, sidecar, job, scratch, result):
    if os.path.getsize(path) == 0:  # trace_processor imports it as a trace of nothing.
        result["error"] = "an empty file (0 bytes)"
        return
    sql_path = os.path.join(scratch, "query.sql")
    with open(sql_path, "w", encoding="utf-8") as f:
        f.write(job["sql"] + "\n;\n" + FILE_SQL + "\n")
    r = subprocess.run([job["trace_processor"], "-q", sql_path, path], capture_output=True,
                       text=True, errors="replace")
    if r.returncode != 0:
        status = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        result["error"] = f"trace_processor_shell ({status}): {error_text(r.stderr)}"
        return
    sets = parse_results(r.stdout)
    if not sets or sets[-1][0] != FILE_SQL_COLUMNS:
        raise ValueError(f"trace_processor printed no file columns: {r.stdout[-300:]!r}")
    machine, _, end_ts, start_real, end_real = sets[-1][1][0]
    result["machine"] = machine
    if end_ts:  # 0: no events, and to_realtime(0) is the boot's wall time.
        result["file_start"], result["file_end"] = utc(start_real), utc(end_real)
    if len(sets) < 2:
        result["error"] = "the query gave no table: its last statement must be a SELECT"
        return
    result["columns"], result["rows"] = sets[-2]
    read_boot_id(path, sidecar, job, result)


def read_boot_id(path, sidecar, job, result):
    """The boot id (and a missing machine name) from the sidecar, else from
    `ringside inspect --json`; notes why when neither gives it."""
    facts = None
    if sidecar:
        with open(sidecar, encoding="utf-8") as f:
            facts = json.load(f)
        if facts.get("size_bytes") != os.path.getsize(path):
            result["notes"].append(f"sidecar ignored: it describes a file of "
                                   f"{facts.get('size_bytes')} bytes, this one has "
                                   f"{os.path.getsize(path)}")
            facts = None
    ringside = shutil.which(job["ringside"]) if job["ringside"] else None
    if facts is None and ringside:
        r = subprocess.run([ringside, "inspect", "--json", path], capture_output=True,
                           text=True, errors="replace")
        try:
            facts = json.loads(r.stdout)
        except ValueError:
            result["notes"].append(f"ringside inspect (exit {r.returncode}): "
                                   f"{r.stderr.strip()[:300]}")
    if facts is None:
        result["notes"].append("boot id unknown: no sidecar, and no ringside binary to read "
                               "the file with (--ringside)")
        return
    if facts.get("error"):  # Where the file stops being readable: cut, or corrupt.
        result["notes"].append(f"ringside reads it up to byte {facts['error'].get('offset')}: "
                               f"{facts['error'].get('message')}")
    machine = facts.get("machine") or {}
    result["boot_id"] = machine.get("boot_id") or None
    result["machine"] = result["machine"] or machine.get("name") or None


# --- The files, and who queries them ----------------------------------------------


def list_files(source, include):
    """[(kind, root, name, has_sidecar)] of the traces in SOURCE, by name."""
    if os.path.isfile(source):
        return [("file", source, os.path.basename(source), os.path.isfile(source + ".json"))]
    if os.path.isdir(source):
        kind, names = "dir", set()
        for folder, dirs, files in os.walk(source):
            dirs[:] = [d for d in dirs if not d.startswith(".")]  # .ringside-ship/: claims
            names.update(os.path.relpath(os.path.join(folder, f), source) for f in files)
    elif ":" in source.split("/")[0]:
        kind, names = "rclone", set(rclone_list(source, include))
    else:
        raise UsageError(f"{source}: no such file or directory, nor an rclone remote "
                         "(remote:path)")
    traces = sorted(n for n in names if fnmatch.fnmatch(os.path.basename(n), include)
                    and not any(part.startswith(".") for part in n.split("/")))
    return [(kind, source, n, n + ".json" in names) for n in traces]


def rclone_list(remote, include):
    try:
        r = subprocess.run(["rclone", "lsf", "-R", "--files-only", "--include", include,
                            "--include", include + ".json", remote], capture_output=True,
                           text=True)
    except FileNotFoundError:
        raise UsageError(f"{remote} is an rclone remote, and rclone is not installed "
                         "(Debian's rclone)") from None
    if r.returncode != 0:
        raise UsageError(f"rclone lsf {remote} failed (exit {r.returncode}): "
                         f"{r.stderr.strip()}")
    return r.stdout.splitlines()


def run_local(items, job, workers):
    """Each item's result, queried by Dask's threaded scheduler."""
    dask = import_dask("dask")
    tasks = [dask.delayed(query_file, pure=False)(item, job) for item in items]
    return list(dask.compute(*tasks, scheduler="threads", num_workers=workers))


def run_on_cluster(items, job, address, workers):
    """Each item's result, queried on the Dask cluster at `address`, at most
    `workers` at a time when given (else as many as its workers run)."""
    distributed = import_dask("distributed")
    try:
        client = distributed.Client(address, timeout="20s")
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    with client:
        pending, submitted, results = iter(items), {}, []
        running = distributed.as_completed()

        def submit_next():
            item = next(pending, None)
            if item is not None:
                future = client.submit(query_file, item, job, pure=False)
                submitted[future] = item
                running.add(future)

        for _ in range(workers or len(items)):
            submit_next()
        for future in running:
            item = submitted.pop(future)
            try:
                results.append(future.result())
            except Exception as e:  # A worker died under it, say: the file's failure.
                results.append({"file": item[2], "notes": [], "error": f"Dask task: {e!r}"})
            submit_next()
        return results


def import_dask(module):
    try:
        return __import__(module)
    except ImportError:
        raise UsageError(f"no Python module {module} in {sys.executable}: install Debian's "
                         "python3-dask and python3-distributed and run this with "
                         "/usr/bin/python3") from None


# --- One table ----------------------------------------------------------------------


def combine(results):
    """(the query's columns, the table's rows, the failed results), by file.

    The columns are those of the first file answered; a file whose columns
    differ fails, as it would not fit the table."""
    results.sort(key=lambda r: r["file"])
    columns = next((r["columns"] for r in results if not r["error"]), [])
    rows, failed = [], []
    for r in results:
        if not r["error"] and r["columns"] != columns:
            r["error"] = (f"its columns ({', '.join(r['columns'])}) differ from the other "
                          f"files' ({', '.join(columns)})")
        if r["error"]:
            failed.append(r)
            continue
        lead = [r[c] for c in FILE_COLUMNS]
        rows.extend(lead + row for row in r["rows"])
    return columns, rows, failed


def write_table(columns, rows, failed, fmt, out):
    header = list(FILE_COLUMNS) + columns
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    else:
        json.dump({"columns": header, "rows": [dict(zip(header, row)) for row in rows],
                   "failed": [{"file": r["file"], "error": r["error"]} for r in failed]},
                  out, indent=1)
        out.write("\n")


def report(results, rows, failed, err):
    """On `err`: each note once with (some of) its files, each failure's
    error once with every file it failed, then a summary line."""
    notes = grouped((note, r["file"]) for r in results for note in r["notes"])
    for note, files in notes.items():
        more = [f"and {len(files) - 3} more"] if len(files) > 3 else []
        print_lines(err, f"note ({counted(len(files), 'file')}): {note}", files[:3] + more)
    for error, files in grouped((r["error"], r["file"]) for r in failed).items():
        print_lines(err, f"failed ({counted(len(files), 'file')}): {error}", files)
    machines = {r.get("machine") for r in results if r.get("machine")}
    print(f"fleet_query: {counted(len(results), 'file')} of {counted(len(machines), 'machine')}: "
          f"{len(results) - len(failed)} answered ({counted(len(rows), 'row')}), "
          f"{len(failed)} failed",
          file=err)


def grouped(pairs):
    """{text: [files]}, texts in sorted order, files in the order given."""
    groups = {}
    for text, name in pairs:
        groups.setdefault(text, []).append(name)
    return dict(sorted(groups.items()))


def counted(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def print_lines(err, text, names):
    print("fleet_query: " + text.replace("\n", "\n    "), file=err)
    for name in names:
        print(f"  {name}", file=err)


# --- Arguments -------------------------------------------------------------------------


def parse_time_ns(text):
    """Unix ns of RFC 3339 with its zone, or of Unix seconds."""
    try:
        return int(decimal.Decimal(text) * 10**9)
    except decimal.InvalidOperation:
        pass
    try:
        t = datetime.datetime.fromisoformat(text)
    except ValueError:
        t = None
    if t is None or t.tzinfo is None:
        raise UsageError(f"--around '{text}': expected RFC 3339 with a zone "
                         "(2026-12-04T12:03:00Z, 2026-12-04T13:03:00+01:00) or Unix seconds")
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (t - epoch) // datetime.timedelta(microseconds=1) * 1000


def parse_duration_ns(text):
    match = DURATION_RE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"--window '{text}': expected a duration above 0 (500ms, 10s, 2m, 1h)")
    return int(decimal.Decimal(match.group(1)) * UNIT_NS[match.group(2)])


def with_window(sql, around, window):
    """`sql` with {start_ns} and {end_ns} as SQL that gives the window's ends
    in each file's trace time."""
    used = [p for p in PLACEHOLDERS if p in sql]
    if around is None:
        if used:
            raise UsageError(f"the query uses {used[0]}: give the window with --around TIME")
        return sql
    if not used:
        raise UsageError("--around is given, but the query uses neither {start_ns} nor "
                         "{end_ns}")
    middle, half = parse_time_ns(around), parse_duration_ns(window) // 2
    for placeholder, unix_ns in zip(PLACEHOLDERS, (middle - half, middle + half)):
        sql = sql.replace(placeholder, TRACE_TIME_SQL.format(unix_ns))
    return sql


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        epilog="The columns, sources and exit status: see the top of this file, and "
               "docs/analysing.md#one-query-over-a-fleets-files.")
    parser.add_argument("source", help="a directory, a trace file, or an rclone remote:path")
    parser.add_argument("sql", nargs="?", help="the query (or -f FILE)")
    parser.add_argument("-f", "--sql-file", help="read the query from this file")
    parser.add_argument("--include", default="*.pftrace",
                        help="the file names to query, a glob (default: *.pftrace)")
    parser.add_argument("--format", choices=("csv", "json"), default="csv")
    parser.add_argument("--workers", type=int,
                        help="files queried at once (default: one per CPU; on a cluster, "
                             "as many as its workers run)")
    parser.add_argument("--scheduler", metavar="HOST:PORT",
                        help="query on this Dask cluster (default: threads here)")
    parser.add_argument("--trace-processor", default="trace_processor_shell",
                        help="trace_processor_shell's path (default: on PATH)")
    parser.add_argument("--ringside", default="ringside",
                        help="ringside's path, for the boot id of a file without a sidecar "
                             "(default: on PATH)")
    parser.add_argument("--around", metavar="TIME",
                        help="a wall-clock moment (RFC 3339 or Unix seconds), for "
                             "{start_ns} and {end_ns} in the query")
    parser.add_argument("--window", default="30s",
                        help="the window's length, TIME in its middle (default: 30s)")
    args = parser.parse_intermixed_args(argv)  # Options after SOURCE, before SQL too.
    if (args.sql is None) == (args.sql_file is None):
        parser.error("give the query as an argument or with -f FILE (one of them)")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv, out=sys.stdout, err=sys.stderr):
    args = parse_args(argv)
    try:
        if args.sql_file:
            with open(args.sql_file, encoding="utf-8") as f:
                args.sql = f.read()
        job = {"sql": with_window(args.sql, args.around, args.window),
               "trace_processor": args.trace_processor, "ringside": args.ringside,
               "on_cluster": args.scheduler is not None}
        if not args.scheduler:  # A cluster's workers find it on their own PATH.
            job["trace_processor"] = shutil.which(args.trace_processor)
            if not job["trace_processor"]:
                raise UsageError(f"{args.trace_processor}: not found (Perfetto's "
                                 "trace_processor_shell: on PATH, or --trace-processor PATH)")
        items = list_files(args.source, args.include)
        if not items:
            raise UsageError(f"{args.source}: no files named {args.include}")
        if args.scheduler:
            results = run_on_cluster(items, job, args.scheduler, args.workers)
        else:
            results = run_local(items, job, args.workers or os.cpu_count())
        columns, rows, failed = combine(results)
        if set(columns) & set(FILE_COLUMNS):
            raise UsageError(f"the query's columns ({', '.join(columns)}) reuse a name of the "
                             f"file's own ({', '.join(FILE_COLUMNS)}): rename it (AS ...)")
    except (UsageError, OSError) as e:
        print(f"fleet_query: {e}", file=err)
        return 2
    write_table(columns, rows, failed, args.format, out)
    report(results, rows, failed, err)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
