"""flowra-otel overhead benchmark against the in-situ SDK floor: ``./dev bench``.

Measures, on a zero-latency scripted tool loop (20 LLM + tool iterations per run, 42 spans and 86
metric records when traced), with CPU time and many interleaved repeats:

* ``bare``        flowra alone;
* ``floor``       bare flowra + plain hook handlers making the plugin's very spans and metric records
                  with the raw SDK (captured from one plugin run; see ``floor.py``);
* ``plugin``      ``OtelHooks`` with the same SDK set-up; ``spans_only`` the same without metrics;
* ``untraced``    the plugin installed in the process, this run's registry without it;
* ``off``         ``OtelHooks`` with no-op providers;
* flowra 0.0.93's own tracer on the same workload (``flowra093_worker.py``, in the main ``.venv``,
  which has flowra 0.0.93; the full 0.0.93 comparison is ``run_093.py``, ``./dev bench-093``);
* memory growth per run (tracemalloc), the plugin's against bare flowra's own.

The last line sums it up: ``overhead_vs_floor`` = (plugin - bare) / (floor - bare).

    ./dev bench              full run (~4 min on a quiet 2-core machine)
    ./dev bench --quick      ~30 s, noisier: for development
    ./dev bench --scale      per-span cost at 1, 20, 200 iterations and 100 concurrent runs,
                             memory over 10 000 runs (~30 min)
    ./dev bench --profile    add a cProfile of the plugin run (per run, by tottime and cumtime)
    ./dev bench --save       also write the raw measurements to benchmarks/results/
    ./dev bench --skip-093   leave out flowra 0.0.93
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "worker.py"
WORKER_093 = HERE / "flowra093_worker.py"
VENV_093 = HERE / ".venv-flowra-0.0.93"
FLOWRA_093 = "0.0.93"
SPANS_093 = 105
"""Spans per run of flowra 0.0.93's tracer on this workload, its defaults (the timed comparison shows
what its exporter received: 105)."""

FLOOR_JOB = ("bare", "floor", "floor_spans")
PLUGIN_JOB = ("untraced", "plugin", "spans_only")
OFF_JOB = ("offbare", "off")

LABELS = {
    "bare": "bare flowra (processes that never import flowra_otel)",
    "floor": "floor: plain handlers, the plugin's spans + metric records, raw SDK",
    "floor_spans": "floor, spans only (no metric records)",
    "plugin": "plugin: OtelHooks, recording tracer + meter providers",
    "spans_only": "plugin, spans only",
    "untraced": "plugin installed, this run's registry has none",
    "offbare": "bare flowra beside off",
    "off": "OtelHooks(NoOpTracerProvider(), NoOpMeterProvider())",
}


@dataclass(frozen=True)
class Plan:
    rounds: int
    runs: int  # timed runs per variant per process
    warmup: int
    block: int
    runs_093: int
    procs_093: int
    mem_runs: int
    mem_warmup: int
    label: str


FULL = Plan(
    rounds=6, runs=100, warmup=10, block=5, runs_093=100, procs_093=2, mem_runs=300, mem_warmup=100, label="full"
)
QUICK = Plan(rounds=1, runs=25, warmup=3, block=5, runs_093=20, procs_093=1, mem_runs=20, mem_warmup=10, label="quick")


@dataclass(frozen=True)
class ScaleCase:
    label: str
    iterations: int
    concurrency: int
    runs: int
    block: int
    warmup: int


SCALE_CASES = (
    ScaleCase("1 iteration", 1, 1, runs=200, block=10, warmup=20),
    ScaleCase("20 iterations", 20, 1, runs=100, block=5, warmup=10),
    ScaleCase("200 iterations", 200, 1, runs=12, block=2, warmup=2),
    ScaleCase("100 concurrent runs x 20 it.", 20, 100, runs=6, block=1, warmup=1),
)
SCALE_ROUNDS = 3
SCALE_MEM_RUNS = 10_000
SCALE_MEM_WARMUP = 200


@dataclass
class Samples:
    """One variant's CPU times: per run (pooled), per block (mean per run), per process (median)."""

    cpu: list[int] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)
    wall: list[int] = field(default_factory=list)
    spans_per_run: float | None = None

    def add(self, result: dict[str, Any], name: str) -> None:
        self.cpu.extend(result["cpu_ns"][name])
        self.wall.extend(result["wall_ns"][name])
        self.blocks.extend(result["block_cpu_ns"][name])
        self.rounds.append(statistics.median(result["cpu_ns"][name]))
        self.spans_per_run = result["spans_per_run"].get(name)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.cpu) / 1e6

    @property
    def min_ms(self) -> float:
        return min(self.blocks) / 1e6

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall) / 1e6


def log(message: str) -> None:
    """Progress goes to stderr; the report (and its RESULT line last) goes to stdout."""
    print(message, file=sys.stderr, flush=True)


def out(message: str = "") -> None:
    print(message, flush=True)


class WorkerError(RuntimeError):
    pass


SNAPSHOT: list[Path] = []
"""``--instructions``: the folder holding the copy of ``flowra_otel`` every worker imports."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if SNAPSHOT:
        env["PYTHONPATH"] = str(SNAPSHOT[0])  # before site-packages and the editable install's path
    env["PYTHONHASHSEED"] = "0"  # same dict/set layouts in every worker process
    return env


def _parse(script: Path, args: Sequence[str], code: int, stdout: str, stderr: str) -> dict[str, Any]:
    if code != 0:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise WorkerError(f"{script.name} {' '.join(args)} exited {code}:\n{tail}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise WorkerError(f"{script.name} printed no JSON: {stdout[-500:]!r} {stderr[-500:]!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run_worker(python: str | Path, script: Path, args: Sequence[str], timeout: float = 7200) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python), str(script), *args], capture_output=True, text=True, timeout=timeout, env=_env(), check=False
    )
    return _parse(script, args, proc.returncode, proc.stdout, proc.stderr)


def run_workers_side_by_side(jobs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """Several workers at once (memory checks, where only bytes count, not time)."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
        for args in jobs
    ]
    results = []
    for proc, args in zip(procs, jobs, strict=True):
        stdout, stderr = proc.communicate()
        results.append(_parse(WORKER, args, proc.returncode, stdout, stderr))
    return results


def pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


# ------------------------------------------------------------------------------------- timing


def capture(folder: Path, iterations: int) -> Path:
    path = folder / f"plan-{iterations}.pickle"
    if not path.exists():
        info = run_worker(sys.executable, WORKER, ["capture", "--iterations", str(iterations), "--out", str(path)])
        log(
            f"  captured one plugin run of {iterations} iterations: {info['spans']} spans, {info['metric_records']} "
            f"metric records, {info['events_with_work']} events with work"
        )
    return path


@dataclass
class Timing:
    samples: dict[str, Samples]
    per_round: list[dict[str, float]]  # each round's per-variant medians (ns), over its processes
    info: dict[str, Any]


def measure(
    jobs: Sequence[Sequence[str]],
    rounds: int,
    runs: int,
    common: Sequence[str],
    plan_path: Path,
) -> Timing:
    """``rounds`` rounds; in each, one live process per job, and blocks of runs sent to them in turn.

    Only one process runs at a time; the variants (of all processes) take turns block by block,
    rotating which goes first, so slow drifts and bursts of load on the machine hit all alike.
    """
    samples: dict[str, Samples] = {}
    per_round: list[dict[str, float]] = []
    info: dict[str, Any] = {"flowra_changed": {}}
    block = int(common[list(common).index("--block") + 1])
    for index in range(rounds):
        started = time.perf_counter()
        procs: dict[str, subprocess.Popen[str]] = {}
        owner: dict[str, subprocess.Popen[str]] = {}
        cpu: dict[str, list[int]] = {}
        wall: dict[str, list[int]] = {}
        blocks: dict[str, list[float]] = {}
        try:
            for job in jobs:
                args = ["serve", "--variants", ",".join(job), *common]
                if any(v.startswith("floor") for v in job):
                    args += ["--plan", str(plan_path)]
                proc = subprocess.Popen(
                    [sys.executable, str(WORKER), *args],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=_env(),
                )
                procs[",".join(job)] = proc
                for variant in job:
                    owner[variant] = proc
                    cpu[variant], wall[variant], blocks[variant] = [], [], []
            for name, proc in procs.items():
                _read(proc, name)  # {"ready": ...}
            variants = [v for job in jobs for v in job]
            for turn in range(max(1, runs // block)):
                first = turn % len(variants)
                for variant in variants[first:] + variants[:first]:
                    proc = owner[variant]
                    assert proc.stdin is not None
                    proc.stdin.write(f"run {variant}\n")
                    proc.stdin.flush()
                    reply = _read(proc, variant)
                    cpu[variant].extend(reply["cpu_ns"])
                    wall[variant].extend(reply["wall_ns"])
                    blocks[variant].append(sum(reply["cpu_ns"]) / len(reply["cpu_ns"]))
            finals = {}
            for name, proc in procs.items():
                stdout, stderr = proc.communicate("end\n", timeout=600)
                finals[name] = _parse(WORKER, [name], proc.returncode, stdout, stderr)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
        medians: dict[str, float] = {}
        for name, final in finals.items():
            result = {"cpu_ns": cpu, "wall_ns": wall, "block_cpu_ns": blocks, "spans_per_run": final["spans_per_run"]}
            for variant in name.split(","):
                samples.setdefault(variant, Samples()).add(result, variant)
                medians[variant] = statistics.median(cpu[variant])
            info.update(final.get("info", {}))
            info["flowra_changed"][name] = final["flowra_changed_count"]
        per_round.append(medians)
        log(
            f"  round {index + 1}/{rounds} {time.perf_counter() - started:5.1f}s  "
            + "  ".join(f"{n}={m / 1e6:.2f}ms" for n, m in medians.items())
        )
    return Timing(samples, per_round, info)


def _read(proc: subprocess.Popen[str], name: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("{"):
        _, stderr = proc.communicate(timeout=60)
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise WorkerError(f"worker {name} stopped: {line!r}\n{tail}")
    data: dict[str, Any] = json.loads(line)
    return data


def overhead_vs_floor(bare: float, floor: float, plugin: float) -> float:
    return (plugin - bare) / (floor - bare) if floor > bare else float("inf")


def report_timing(t: Timing, spans: int) -> dict[str, float]:
    s = t.samples
    out("CPU ms per run (process_time of the worker, all threads; span export flushed inside each block):")
    out(f"  {'variant':<72} {'median':>8} {'min':>8} {'wall':>8} {'spans':>6}  per-process medians")
    for name in (*FLOOR_JOB, *PLUGIN_JOB, *OFF_JOB):
        if name not in s:
            continue
        v = s[name]
        rounds = " ".join(f"{r / 1e6:.2f}" for r in v.rounds)
        spans_text = f"{v.spans_per_run:.0f}" if v.spans_per_run else "-"
        out(
            f"  {name:<12}{LABELS[name]:<60} {v.median_ms:8.3f} {v.min_ms:8.3f} {v.wall_ms:8.3f} "
            f"{spans_text:>6}  {rounds}"
        )
    out("  (median: over all timed runs; min: the fastest block of 5 runs, mean per run; wall: median wall time)")
    out()
    bare = s["bare"]
    r: dict[str, float] = {}

    def both(name: str, stat: str) -> float:
        return getattr(s[name], stat) / getattr(bare, stat) - 1  # type: ignore[no-any-return]

    for stat in ("median_ms", "min_ms"):
        key = stat.split("_")[0]
        b, f, p = getattr(bare, stat), getattr(s["floor"], stat), getattr(s["plugin"], stat)
        r[f"vs_floor_{key}"] = overhead_vs_floor(b, f, p)
        r[f"spans_vs_floor_{key}"] = overhead_vs_floor(
            b, getattr(s["floor_spans"], stat), getattr(s["spans_only"], stat)
        )
        for name in ("floor", "floor_spans", "plugin", "spans_only", "untraced"):
            r[f"{name}_{key}"] = both(name, stat)
    round_ratios = [
        overhead_vs_floor(m["bare"], m["floor"], m["plugin"])
        for m in t.per_round
        if {"bare", "floor", "plugin"} <= m.keys()
    ]
    off_patched = t.info["flowra_changed"].get(",".join(OFF_JOB), 0) > 0
    off_base = "bare" if off_patched else "offbare"
    r["off"] = s["off"].median_ms / s[off_base].median_ms - 1
    r["off_min"] = s["off"].min_ms / s[off_base].min_ms - 1
    r["cross_process"] = s["offbare"].median_ms / bare.median_ms - 1
    per_span = {
        name: (s[name].median_ms - bare.median_ms) / spans * 1e3
        for name in ("floor", "plugin", "spans_only", "floor_spans")
    }
    r.update({f"{k}_us_per_span": v for k, v in per_span.items()})
    out("Over bare flowra (median | min):")
    rows = (
        ("floor", "floor: the SDK's own cost of the plugin's telemetry, in situ"),
        ("floor_spans", "floor, spans only"),
        ("plugin", "plugin (spans + metrics)"),
        ("spans_only", f"plugin, spans only ({t.info.get('spans_only', '?')})"),
        ("untraced", "plugin installed, this run untraced"),
    )
    for name, text in rows:
        out(
            f"  {text:<64} {pct(r[name + '_median']):>7} | {pct(r[name + '_min']):>7}   "
            f"{per_span.get(name, 0):6.1f} us/span"
            if name in per_span
            else f"  {text:<64} {pct(r[name + '_median']):>7} | {pct(r[name + '_min']):>7}"
        )
    out(
        f"  {'tracing off, against ' + ('bare (creating it changed flowra)' if off_patched else 'bare beside it'):<64} "
        f"{pct(r['off']):>7} | {pct(r['off_min']):>7}"
    )
    out()
    out("Against the floor, (plugin - bare) / (floor - bare):")
    spread = f"per round {min(round_ratios):.2f} .. {max(round_ratios):.2f}" if round_ratios else ""
    out(f"  spans + metrics  {r['vs_floor_median']:.2f}x (min: {r['vs_floor_min']:.2f}x; {spread})")
    out(f"  spans only       {r['spans_vs_floor_median']:.2f}x (min: {r['spans_vs_floor_min']:.2f}x)")
    out(
        f"  bare flowra in two kinds of process (offbare / bare): {pct(r['cross_process'])}: the process-to-process "
        "noise that the plugin, untraced and off figures carry (bare and floor share a process)"
        if not off_patched
        else ""
    )
    out()
    return r


# ------------------------------------------------------------------------------------- flowra 0.0.93


def find_python() -> str | None:
    """A Python >= 3.12 with venv, searched like ``./dev``'s find_python."""
    candidates: list[str] = []
    if os.environ.get("FLOWRA_OTEL_PYTHON"):
        candidates.append(os.environ["FLOWRA_OTEL_PYTHON"])
    candidates += ["python3.13", "python3.12", "python3", "python"]
    roots: list[str] = []
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError):
            roots.append(subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip())
    roots += [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"]
    roots += ["/usr/local/pyenv", "/opt/pyenv"]
    for root in roots:
        versions = Path(root) / "versions" if root else None
        if versions is None or not versions.is_dir():
            continue
        found = [p for p in versions.glob("3.1[2-9]*") if (p / "bin" / "python").exists()]
        found.sort(key=lambda p: [int(x) if x.isdigit() else 0 for x in p.name.replace("-", ".").split(".")])
        candidates += [str(p / "bin" / "python") for p in reversed(found)]
    candidates += [
        "/usr/local/bin/python3.13",
        "/usr/local/bin/python3.12",
        "/usr/bin/python3.13",
        "/usr/bin/python3.12",
    ]
    check = "import sys, venv; sys.exit(sys.version_info < (3, 12))"
    for candidate in candidates:
        path = shutil.which(candidate)
        if path and subprocess.run([path, "-c", check], capture_output=True, check=False).returncode == 0:
            return path
    return None


def ensure_venv_093(sdk_version: str) -> Path:
    """The main environment, ``.venv``, when it has flowra 0.0.93 and this SDK version (it is the
    locked one now); else ``benchmarks/.venv-flowra-0.0.93``, built with them."""
    main = ROOT / ".venv" / "bin" / "python"
    versions = "import importlib.metadata as m; print(m.version('flowra'), m.version('opentelemetry-sdk'))"
    if main.exists():
        probe = subprocess.run([str(main), "-c", versions], capture_output=True, text=True, check=False)
        if probe.stdout.split() == [FLOWRA_093, sdk_version]:
            return main
    python = VENV_093 / "bin" / "python"
    want = f"flowra=={FLOWRA_093} opentelemetry-sdk=={sdk_version}"
    stamp = VENV_093 / ".stamp"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return python
    base = find_python()
    if base is None:
        raise WorkerError("no Python >= 3.12 found (PATH, pyenv versions, /usr/local/bin, /usr/bin)")
    log(f"  building {VENV_093.relative_to(ROOT)} with {base} ({want})")
    shutil.rmtree(VENV_093, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(VENV_093)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    proc = subprocess.run([*pip, *want.split()], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        noise = "is ignored: it is neither"
        why = "\n".join(line for line in proc.stderr.splitlines() if line.strip() and noise not in line)
        raise WorkerError(f"pip install {want} failed:\n{why[-1500:]}")
    stamp.write_text(want + "\n")
    return python


def measure_093(plan: Plan, sdk_version: str) -> tuple[dict[str, Samples], dict[str, Any]]:
    python = ensure_venv_093(sdk_version)
    samples: dict[str, Samples] = {}
    info: dict[str, Any] = {}
    for index in range(plan.procs_093):
        started = time.perf_counter()
        args = ["--runs", str(plan.runs_093), "--warmup", str(plan.warmup), "--block", str(plan.block)]
        result = run_worker(python, WORKER_093, args)
        block = plan.block
        for name, cpu in result["cpu_ns"].items():
            entry = samples.setdefault(name, Samples())
            entry.cpu.extend(cpu)
            entry.wall.extend(result["wall_ns"][name])
            entry.blocks.extend(sum(cpu[i : i + block]) / block for i in range(0, len(cpu), block))
            entry.rounds.append(statistics.median(cpu))
            entry.spans_per_run = result["spans_per_run"].get(name)
        info = {k: v for k, v in result.items() if k not in {"cpu_ns", "wall_ns", "spans_per_run"}}
        log(
            f"  process {index + 1}/{plan.procs_093}: {time.perf_counter() - started:5.1f}s  "
            + "  ".join(f"{n}={statistics.median(c) / 1e6:.2f}ms" for n, c in result["cpu_ns"].items())
        )
    return samples, info


def report_093(s: dict[str, Samples], info: dict[str, Any], ours: dict[str, float]) -> float:
    bare = s["bare"].median_ms
    out(
        f"flowra {info.get('flowra_version', FLOWRA_093)}'s own tracer ({info.get('install')}), "
        "same workload on TurnAgent,"
    )
    out(
        "the same recording tracer set-up as the global provider (it takes no provider argument; "
        "it records no metrics):"
    )
    out(f"  {'variant':<40} {'median':>8} {'min':>8} {'spans':>6} {'overhead':>9} {'us/span':>8}")
    per_span = {}
    for name in ("bare", "tracer", "tracer_nosteps"):
        if name not in s:
            continue
        v = s[name]
        spans = v.spans_per_run
        extra = (v.median_ms - bare) / spans * 1e3 if spans else None
        per_span[name] = extra
        over = pct(v.median_ms / bare - 1) if name != "bare" else ""
        spans_text = f"{spans:.0f}" if spans else "-"
        out(
            f"  {name:<40} {v.median_ms:8.3f} {v.min_ms:8.3f} {spans_text:>6} {over:>9} "
            f"{f'{extra:.1f}' if extra else '':>8}"
        )
    out(
        f"  flowra-otel spans only: {ours['spans_only_us_per_span']:.1f} us/span, {pct(ours['spans_only_median'])}; "
        f"with metrics: {ours['plugin_us_per_span']:.1f} us/span; bare flowra 0.0.93 is "
        f"{bare / ours['bare_ms']:.1f}x slower than 0.0.8, which shrinks its ratios"
    )
    out()
    return per_span.get("tracer") or float("nan")


# ------------------------------------------------------------------------------------- memory


def measure_memory(runs: int, warmup: int, plan_path: Path) -> dict[str, dict[str, Any]]:
    jobs = [
        ["memory", "--variant", v, "--runs", str(runs), "--warmup", str(warmup), "--plan", str(plan_path)]
        for v in ("plugin", "bare")
    ]
    plugin, bare = run_workers_side_by_side(jobs)
    return {"plugin": plugin, "bare": bare}


def report_memory(m: dict[str, dict[str, Any]]) -> float:
    plugin, bare = m["plugin"], m["bare"]
    diff = float(plugin["slope_bytes_per_run"]) - float(bare["slope_bytes_per_run"])
    out(
        f"Memory (tracemalloc on from process start; growth per run = least-squares slope through ~21 checkpoints, "
        f"each after a span flush and a full gc), {plugin['runs']} runs after {plugin['warmup']} warm-up runs:"
    )
    for name, r in (("plugin", plugin), ("bare", bare)):
        top = "; ".join(f"{t['where']} {t['bytes']:+d} B" for t in r["top_growth"][:3])
        out(
            f"  {name:<7} {r['slope_bytes_per_run']:+8.1f} B/run (end - start {r['growth_bytes'] / 1024:+.1f} KiB, "
            f"peak {r['peak_traced_bytes'] / 2**20:.1f} MiB, {r['seconds']:.0f}s)  grows at: {top}"
        )
    out(f"  plugin - bare = {diff:+.1f} B/run (one leaked span alone is > 1 KiB)")
    out()
    return diff


# ------------------------------------------------------------------------------------- profile


def report_profile(runs: int, plan_path: Path) -> None:
    out(
        f"cProfile, ms per run over {runs} runs (cProfile inflates everything ~2.5x: "
        "compare the columns, not with the timings):"
    )
    results = {
        v: run_worker(
            sys.executable, WORKER, ["profile", "--variant", v, "--runs", str(runs), "--plan", str(plan_path)]
        )
        for v in ("bare", "floor", "plugin")
    }
    packages = sorted(
        {p for r in results.values() for p in r["by_package_ms_per_run"]},
        key=lambda p: -results["plugin"]["by_package_ms_per_run"].get(p, 0.0),
    )
    out(f"  {'self time by package':<30}" + "".join(f"{v:>10}" for v in results))
    for package in packages:
        out(
            f"  {package:<30}"
            + "".join(f"{r['by_package_ms_per_run'].get(package, 0.0):10.2f}" for r in results.values())
        )
    out(f"  {'total':<30}" + "".join(f"{r['profiled_ms_per_run']:10.2f}" for r in results.values()))
    plugin = results["plugin"]
    for title, key in (("by self time (tottime)", "plugin_by_self"), ("by cumulative time (cumtime)", "plugin_by_cum")):
        out(f"  flowra_otel functions in the plugin run, {title}:")
        for row in plugin[key][:15]:
            out(f"    self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out("  heaviest functions of any package in the plugin run, by self time:")
    for row in plugin["all_by_self"][:12]:
        out(f"    self {row['self_ms']:6.3f}  cum {row['cum_ms']:7.3f}  calls {row['calls']:6.1f}  {row['where']}")
    out()


# ------------------------------------------------------------------------------------- scale


def run_scale(folder: Path, save: dict[str, Any], rounds: int, mem_runs: int) -> None:
    out("Scale: cost per span as runs grow and run concurrently (median CPU ms per 'run'; a concurrent 'run' is")
    out(f"100 runs under asyncio.gather); {rounds} rounds of a bare+floor process and a plugin process each")
    out(
        f"  {'case':<30} {'spans':>6} {'bare ms':>9} {'floor':>8} {'plugin':>8} {'floor us/span':>14} "
        f"{'plugin us/span':>15} {'vs floor':>9}"
    )
    summary = []
    for case in SCALE_CASES:
        log(f"[scale] {case.label}")
        plan_path = capture(folder, case.iterations)
        common = [
            "--warmup",
            str(case.warmup),
            "--block",
            str(case.block),
            "--iterations",
            str(case.iterations),
            "--concurrency",
            str(case.concurrency),
        ]
        t = measure([("bare", "floor"), ("plugin",)], rounds, case.runs, common, plan_path)
        s = t.samples
        spans = s["plugin"].spans_per_run or 0.0
        total_spans = spans * case.concurrency
        b, f, p = s["bare"].median_ms, s["floor"].median_ms, s["plugin"].median_ms
        floor_us, plugin_us = (f - b) / total_spans * 1e3, (p - b) / total_spans * 1e3
        ratio = overhead_vs_floor(b, f, p)
        summary.append((case, plugin_us, ratio))
        out(
            f"  {case.label:<30} {total_spans:6.0f} {b:9.2f} {pct(f / b - 1):>8} {pct(p / b - 1):>8} {floor_us:14.1f} "
            f"{plugin_us:15.1f} {ratio:8.2f}x"
        )
        save[case.label] = {k: v.__dict__ for k, v in s.items()}
    out()
    log(f"[scale] memory: {mem_runs} runs of plugin and of bare flowra, side by side")
    memory = measure_memory(mem_runs, SCALE_MEM_WARMUP, capture(folder, 20))
    mem = report_memory(memory)
    save["memory"] = memory
    per_span = ",".join(
        f"{c.iterations}{'x' + str(c.concurrency) if c.concurrency > 1 else ''}:{u:.1f}" for c, u, _ in summary
    )
    ratios = ",".join(
        f"{c.iterations}{'x' + str(c.concurrency) if c.concurrency > 1 else ''}:{r:.2f}" for c, _, r in summary
    )
    out(f"SCALE plugin_us_per_span={per_span} overhead_vs_floor={ratios} mem_per_run={mem:+.0f}B")


# ------------------------------------------------------------------------------------- main


# ------------------------------------------------------------------------------------- instructions

INSTR_VARIANTS = ("bare", "floor", "floor_spans", "plugin", "spans_only", "untraced")
INSTR_WARMUP = 5
INSTR_RUNS = (4, 24)


def _callgrind_total(variant: str, runs: int, plan_path: Path) -> subprocess.Popen[str]:
    worker = [str(WORKER), "runs", "--variant", variant, "--plan", str(plan_path)]
    return _callgrind(sys.executable, worker, runs)


def _callgrind(python: str | Path, worker: list[str], runs: int) -> subprocess.Popen[str]:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        str(python),
        *worker,
        "--runs",
        str(runs),
        "--warmup",
        str(INSTR_WARMUP),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def _collected(proc: subprocess.Popen[str]) -> int:
    _, stderr = proc.communicate()
    for line in stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise WorkerError(f"callgrind printed no total (exit {proc.returncode}): {stderr[-800:]}")


def instructions_093(sdk_version: str) -> tuple[float, float] | None:
    """flowra 0.0.93's bare run and its own tracer (its defaults), in instructions per run, counted
    the same way in an environment with flowra 0.0.93; None when there is none."""
    try:
        python = ensure_venv_093(sdk_version)
    except Exception as exc:  # no registry access, say: the rest of the report stands
        log(f"  flowra {FLOWRA_093}: no venv ({exc}); its instructions are left out")
        return None
    per_run: dict[str, float] = {}
    low, high = INSTR_RUNS
    for variant in ("bare", "tracer"):
        log(f"  callgrind: flowra {FLOWRA_093} {variant} ({low} and {high} runs)")
        procs = [_callgrind(python, [str(WORKER_093), "--only", variant], n) for n in (low, high)]
        a, b = (_collected(p) for p in procs)
        per_run[variant] = (b - a) / (high - low)
    return per_run["bare"], per_run["tracer"]


def run_instructions(folder: Path, sdk_version: str, skip_093: bool) -> None:
    """Instructions per run of each variant, counted by callgrind: the same for the same code
    whatever else the machine does, so small differences are visible where CPU time is noise.

    Each variant runs twice (``INSTR_RUNS`` runs after the same warm-up); the difference of the
    two totals, divided by the difference of the run counts, is one run's instructions, with
    start-up, imports and warm-up cancelled out. Two processes at a time (one per core).
    """
    if shutil.which("valgrind") is None:
        out("instructions: valgrind is not installed here (its callgrind tool counts instructions)")
        return
    out("instructions per run (callgrind; same code, same count on any load), side by side:")
    # One copy of the package for every worker: edits to the tree during the count do not mix in.
    shutil.copytree(ROOT / "flowra_otel", folder / "code" / "flowra_otel", ignore=shutil.ignore_patterns("__pycache__"))
    SNAPSHOT.append(folder / "code")
    plan_path = capture(folder, 20)
    per_run: dict[str, float] = {}
    low, high = INSTR_RUNS
    for variant in INSTR_VARIANTS:
        log(f"  callgrind: {variant} ({low} and {high} runs)")
        procs = [_callgrind_total(variant, n, plan_path) for n in (low, high)]
        a, b = (_collected(p) for p in procs)
        per_run[variant] = (b - a) / (high - low)
    bare = per_run["bare"]
    out(f"  {'variant':<14}{'instructions/run':>18}{'over bare':>11}")
    for variant, count in per_run.items():
        over = "" if variant == "bare" else pct(count / bare - 1)
        out(f"  {variant:<14}{count / 1e6:>16.2f} M{over:>11}")
    vs_floor = (per_run["plugin"] - bare) / (per_run["floor"] - bare)
    spans_vs_floor = (per_run["spans_only"] - bare) / (per_run["floor_spans"] - bare)
    untraced = per_run["untraced"] / bare - 1
    spans_per_span = (per_run["spans_only"] - bare) / 42
    theirs = None if skip_093 else instructions_093(sdk_version)
    their_per_span = float("nan")
    if theirs is not None:
        bare_093, tracer_093 = theirs
        their_per_span = (tracer_093 - bare_093) / SPANS_093
        out(
            f"  flowra {FLOWRA_093}: bare {bare_093 / 1e6:.2f} M, its own tracer {tracer_093 / 1e6:.2f} M "
            f"({pct(tracer_093 / bare_093 - 1)}, {SPANS_093} spans): {their_per_span / 1e3:.1f} K per span; "
            f"flowra-otel spans only: {spans_per_span / 1e3:.1f} K per span (42 spans)"
        )
    out()
    out(
        f"instructions: overhead_vs_floor={vs_floor:.2f}x spans_only_vs_floor={spans_vs_floor:.2f}x "
        f"untraced={untraced * 100:+.2f}% spans_only_per_span={spans_per_span / 1e3:.1f}K "
        f"flowra093_per_span={their_per_span / 1e3:.1f}K"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a ~30 s run: fewer rounds and runs")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="per-span cost at 1/20/200 iterations and 100 concurrent runs, memory over 10 000 runs",
    )
    parser.add_argument("--rounds", type=int, help="timing rounds (one process of each kind per round)")
    parser.add_argument("--runs", type=int, help="timed runs per variant per process")
    parser.add_argument("--mem-runs", type=int, help="runs in the memory check")
    parser.add_argument("--skip-093", action="store_true", help="skip the flowra 0.0.93 comparison")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the plugin run")
    parser.add_argument("--save", action="store_true", help="write raw results to benchmarks/results/")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="instructions per run under callgrind (deterministic on a noisy machine; ~8 min)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    overrides: dict[str, Any] = {}
    if args.rounds:
        overrides["rounds"] = args.rounds
    if args.runs:
        overrides["runs"] = overrides["runs_093"] = args.runs
    if args.mem_runs:
        overrides["mem_runs"] = args.mem_runs
    if overrides:
        plan = Plan(**{**plan.__dict__, **overrides})
    sdk_version = importlib.metadata.version("opentelemetry-sdk")
    started = time.perf_counter()
    out("flowra-otel against the in-situ SDK floor: zero-latency scripted tool loop on AgentRuntime + ToolLoopAgent")
    out(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"flowra {importlib.metadata.version('flowra')}, opentelemetry-sdk {sdk_version}, "
        f"flowra-otel {importlib.metadata.version('flowra-otel')}"
    )
    saved: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="flowra-otel-bench-") as tmp:
        folder = Path(tmp)
        if args.instructions:
            run_instructions(folder, sdk_version, args.skip_093)
            out(f"({time.perf_counter() - started:.0f}s)")
            return 0
        if args.scale:
            run_scale(folder, saved, args.rounds or SCALE_ROUNDS, args.mem_runs or SCALE_MEM_RUNS)
            if args.save:
                save(saved)
            return 0
        out(
            f"plan ({plan.label}): {plan.rounds} rounds, each with one live process of ({', '.join(FLOOR_JOB)}), "
            f"({', '.join(PLUGIN_JOB)}) and ({', '.join(OFF_JOB)}); {plan.runs} timed runs per variant per round, "
            f"in blocks of {plan.block} that all variants take in turn; {plan.warmup} warm-up runs"
        )
        out()
        log("[1/4] capture and timing")
        plan_path = capture(folder, 20)
        common = ["--warmup", str(plan.warmup), "--block", str(plan.block)]
        timing = measure([FLOOR_JOB, PLUGIN_JOB, OFF_JOB], plan.rounds, plan.runs, common, plan_path)
        spans = timing.samples["plugin"].spans_per_run or 42.0
        ratios = report_timing(timing, int(spans))
        ratios["bare_ms"] = timing.samples["bare"].median_ms
        saved["timing"] = {k: v.__dict__ for k, v in timing.samples.items()}
        theirs = float("nan")
        if args.skip_093:
            out("flowra 0.0.93: skipped (--skip-093)")
            out()
        else:
            log(f"[2/4] flowra {FLOWRA_093}: {plan.procs_093} process(es)")
            try:
                samples093, info093 = measure_093(plan, sdk_version)
                theirs = report_093(samples093, info093, ratios)
                saved["flowra093"] = {k: v.__dict__ for k, v in samples093.items()}
            except (WorkerError, OSError, subprocess.SubprocessError) as exc:
                out(f"flowra {FLOWRA_093}: not measured here: {exc}")
                out()
        log(f"[3/4] memory: {plan.mem_runs} runs of plugin and of bare flowra")
        memory = measure_memory(plan.mem_runs, plan.mem_warmup, plan_path)
        mem = report_memory(memory)
        saved["memory"] = memory
        if args.profile:
            log("[4/4] profile")
            report_profile(30 if args.quick else 100, plan_path)
    out(f"({time.perf_counter() - started:.0f}s)")
    if args.save:
        saved["ratios"] = ratios
        save(saved)
    out(
        f"overhead_vs_floor={ratios['vs_floor_median']:.2f}x overhead_vs_bare={ratios['plugin_median'] * 100:+.1f}% "
        f"untraced={ratios['untraced_median'] * 100:+.1f}% off={ratios['off'] * 100:+.1f}% "
        f"spans_only_us_per_span={ratios['spans_only_us_per_span']:.1f} flowra093_us_per_span={theirs:.1f} "
        f"mem_per_run={mem:+.0f}B"
    )
    return 0


def save(data: dict[str, Any]) -> None:
    folder = HERE / "results"
    folder.mkdir(exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"bench-{stamp}.json"
    path.write_text(json.dumps(data))
    log(f"raw results: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
