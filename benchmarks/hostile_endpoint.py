"""What a hostile endpoint can cost infertop: wall time and peak memory, per attack.

The hostile test server (tests/support/hostile_server.py) runs in a process of its own;
each case runs in a fresh child process that imports infertop, notes its RSS, performs
the one read the case names against the server, and reports the wall time of that read,
how it ended, and its peak RSS (``ru_maxrss``) above the RSS before it. Every case must
end by its bound (the deadline or the size cap) and the memory stays bounded by the cap.

Cases (the bound in brackets):

- stream-endless: an SSE stream whose one event never ends [16 MiB event cap]
- stream-drip:    an SSE event dripped a byte every 50 ms [stall timeout: 5 s here]
- whole-huge:     /v1/models answering 1 GiB, lean client [16 MiB body cap]
- whole-drip:     /v1/models dripped [connect + read timeout: 1 + 4 s here]
- scrape-huge:    a /metrics scrape answering 1 GiB [8 MiB scrape cap]
- scrape-drip:    a /metrics scrape dripped, head or body [its 2 s timeout]
- fleet-drip:     ``infertop fleet --once`` on a dripped body, a dripped head and an
                  endless body [--timeout 2]
- proxy-*:        `infertop proxy` against hostile clients and a hostile upstream, the
                  proxy's own memory (benchmarks/hostile_proxy.py)

Hostile files and numbers (made by the parent in a temporary folder before the child
starts, so the child's peak is the read's own):

- gguf-nested:    a 36 KB GGUF of arrays nested 3000 deep [4 levels]
- gguf-counts:    a GGUF array claiming 2**62 arrays of 2**62 bytes [the file's size]
- gguf-23mb:      the review's 23 MB shape: 5600 arrays of 4096 bytes [skipped by seeking]
- gguf-kept:      4096 arrays of 4096 bytes (short enough to keep) [262,144 values]
- scan-loop:      a GGUF scan of a folder of symlink loops and 2000 links [3 s, 20,000]
- dataset-digits: ``--dataset`` with a 5000-digit number [int()'s 4300 digits]
- models-digits:  a model list with 400- and 5000-digit sizes (hostile server's
                  long-numbers mode) [the one model's number left unsaid]

    python -m benchmarks.hostile_endpoint [--json FILE] [--only CASE,...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import smoke
from benchmarks.hostile_proxy import PROXY_CASES, proxy_case
from tests.support.fake_server import support_command, support_env

ROOT = Path(__file__).resolve().parents[1]

CASES = (
    "stream-endless",
    "stream-drip",
    "whole-huge",
    "whole-drip",
    "scrape-huge",
    "scrape-drip",
    "scrape-drip-head",
    "fleet-drip",
    "gguf-nested",
    "gguf-counts",
    "gguf-23mb",
    "gguf-kept",
    "scan-loop",
    "dataset-digits",
    "models-digits",
    *PROXY_CASES,
)
SMOKE_CASES = (
    "stream-endless",
    "whole-huge",
    "scrape-huge",
    "gguf-nested",
    "gguf-counts",
    "dataset-digits",
    "models-digits",
    "proxy-host-origin",
    "proxy-conn-cl",
)


def _make_files(d: Path) -> None:
    """The hostile files the file cases read, written in pieces (never whole in memory)."""
    import struct

    def s(b: bytes) -> bytes:
        return struct.pack("<Q", len(b)) + b

    def head(n_kv: int) -> bytes:
        return b"GGUF" + struct.pack("<IQQ", 3, 1, n_kv)

    def key(name: str, vtype: int) -> bytes:
        return s(name.encode()) + struct.pack("<I", vtype)

    value = struct.pack("<IQ", 0, 1) + b"\x07"
    for _ in range(3000):
        value = struct.pack("<IQ", 9, 1) + value
    (d / "nested.gguf").write_bytes(head(1) + key("k", 9) + value)
    (d / "counts.gguf").write_bytes(
        head(1) + key("k", 9) + struct.pack("<IQIQ", 9, 2**62, 0, 2**62)
    )
    for name, outer in (("23mb.gguf", 5600), ("kept.gguf", 4096)):
        one = struct.pack("<IQ", 0, 4096) + b"\x01" * 4096
        with (d / name).open("wb") as f:
            f.write(head(1) + key("k", 9) + struct.pack("<IQ", 9, outer))
            for _ in range(outer):
                f.write(one)
    loops = d / "loops"
    loops.mkdir()
    (loops / "self.gguf").symlink_to("self.gguf")
    for i in range(1000):
        (loops / f"a{i}.gguf").symlink_to(f"b{i}.gguf")
        (loops / f"b{i}.gguf").symlink_to(f"a{i}.gguf")
    (loops / "up").symlink_to("..", target_is_directory=True)
    (d / "dataset.jsonl").write_text('{"prompt": "hi", "n": ' + "9" * 5000 + "}\n")


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _file_case(name: str, base: str, d: Path) -> str:
    """One read of a hostile file in ``d`` (or of the long-numbers model list); how it
    ended, in words."""
    from tui.bench.run.dataset import DatasetError, load_dataset
    from tui.engines.base import EngineError, EngineSpec
    from tui.engines.files.gguf import read_gguf_metadata
    from tui.engines.files.gguf_scan import scan_ggufs
    from tui.engines.servers.server_models import list_server_models

    gguf = {"gguf-nested": "nested", "gguf-counts": "counts", "gguf-23mb": "23mb"}
    gguf["gguf-kept"] = "kept"
    try:
        if name in gguf:
            meta = read_gguf_metadata(d / f"{gguf[name]}.gguf")
            return f"read: keys {sorted(meta)}"
        if name == "scan-loop":
            scan = scan_ggufs([d / "loops"])
            return f"scanned: {len(scan.files)} files, notes {scan.notes}"
        if name == "dataset-digits":
            load_dataset(d / "dataset.jsonl")
            return "loaded (!)"
        if name == "models-digits":
            models = list_server_models(EngineSpec("h", "vllm", url=f"{base}/long-numbers"))
            return "; ".join(f"{m.name}: {m.details() or '-'}" for m in models)
    except (EngineError, DatasetError) as e:
        return f"{type(e).__name__}: {e}"
    raise SystemExit(f"unknown case {name}")


def _case(name: str, base: str, files: Path | None = None) -> dict[str, object]:
    """In the child: one read against ``base`` (the hostile server), or of a file."""
    # (the file cases' modules too: imported before the RSS is noted, so the peak is
    # the read's, not the imports')
    import asyncio

    import tui.bench.run.dataset
    import tui.engines.files.gguf_scan
    import tui.engines.servers.server_models  # noqa: F401
    from tui.engines.base import EngineError, EngineSpec, GenerationRequest
    from tui.engines.http.openai_compat import OpenAICompatEngine
    from tui.transport.prometheus import ScrapeError, get_text

    def engine(mode: str, **kw: object) -> OpenAICompatEngine:
        spec = EngineSpec(name="h", kind="openai", url=f"{base}/{mode}", model="m", **kw)  # type: ignore[arg-type]
        return OpenAICompatEngine(spec)

    async def stream(e: OpenAICompatEngine) -> str:
        req = GenerationRequest.from_prompt("hi", max_tokens=8)
        last = None
        try:
            async for ev in e.stream(req):
                last = ev
        finally:
            await e.close()
        return str(getattr(last, "message", last))

    async def load(e: OpenAICompatEngine) -> str:
        try:
            await e.load()
        except EngineError as err:
            return str(err)
        finally:
            await e.close()
        return "loaded (!)"

    before = _rss_kib()
    t0 = time.perf_counter()
    if name == "stream-endless":
        ended = asyncio.run(stream(engine("endless-stream")))
    elif name == "stream-drip":
        ended = asyncio.run(stream(engine("drip-stream", stall_timeout_s=5.0)))
    elif name == "whole-huge":
        ended = asyncio.run(load(engine("huge")))
    elif name == "whole-drip":
        ended = asyncio.run(load(engine("drip", connect_timeout_s=1.0, read_timeout_s=4.0)))
    elif files is not None and name.split("-")[0] in ("gguf", "scan", "dataset", "models"):
        ended = _file_case(name, base, files)
    elif name.startswith("scrape-"):
        mode = {"scrape-huge": "huge", "scrape-drip": "drip", "scrape-drip-head": "drip-head"}
        try:
            get_text(f"{base}/{mode[name]}/metrics", 2.0)
            ended = "scraped (!)"
        except ScrapeError as err:
            ended = str(err)
    elif name in PROXY_CASES:
        return proxy_case(name, base)
    else:
        raise SystemExit(f"unknown case {name}")
    took = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"case": name, "wall_s": took, "rss_before_mib": before / 1024,
            "peak_over_mib": max(0, peak - before) / 1024, "ended": ended[:160]}  # fmt: skip


def _fleet(base: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INFERTOP_CONFIG": ""}
    argv = [sys.executable, "-m", "tui", "fleet", "--once", "--timeout", "2", "--gap", "0.1"]
    for mode in ("drip", "drip-head", "endless"):
        argv += ["--url", f"{base}/{mode}"]
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    downs = sum(" down " in ln for ln in p.stdout.splitlines())
    return {"case": "fleet-drip", "wall_s": took, "rss_before_mib": None,
            "peak_over_mib": None, "peak_process_mib": peak / 1024,
            "ended": f"exit {p.returncode}, {downs} rows down"}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--only", help="comma-separated cases to run (default: all)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    smoke.add_flag(parser)
    args = parser.parse_args()
    if args.case:  # the child
        files = Path(args.files) if args.files else None
        print(json.dumps(_case(args.case, args.base, files)))
        return 0
    cases = CASES if not args.only else tuple(c for c in CASES if c in args.only.split(","))
    if args.smoke:  # one attack of each kind that ends at a cap, not at a timeout
        cases = SMOKE_CASES
    server = subprocess.Popen(
        support_command("hostile_server"), stdout=subprocess.PIPE, text=True, env=support_env()
    )
    tmp = tempfile.TemporaryDirectory(prefix="hostile-files-")
    try:
        _make_files(Path(tmp.name))
        assert server.stdout is not None
        base = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        results = []
        for case in cases:
            if case == "fleet-drip":
                results.append(_fleet(base))
                continue
            argv = [sys.executable, "-m", "benchmarks.hostile_endpoint", "--case", case]
            argv += ["--base", base, "--files", tmp.name]
            child = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
            if child.returncode != 0:
                print(child.stderr, file=sys.stderr)
                return 1
            results.append(json.loads(child.stdout.strip().splitlines()[-1]))
    finally:
        server.terminate()
        server.wait(10)
        tmp.cleanup()
    print(f"{'case':<18} {'wall s':>7} {'peak RSS over start MiB':>24}  how it ended")
    for r in results:
        over = r["peak_over_mib"]
        shown = (
            f"{over:.1f}" if isinstance(over, float) else f"(process {r['peak_process_mib']:.0f})"
        )
        print(f"{r['case']:<18} {r['wall_s']:>7.2f} {shown:>24}  {r['ended']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.smoke:  # every case ran and ended by its bound ("(!)": an attack got through)
        smoke.check([r["case"] for r in results] == list(cases), f"{len(results)} cases ran")
        smoke.check(not [r for r in results if "(!)" in r["ended"]], "an attack was not bounded")
        smoke.passed(f"{len(results)} attacks, each ended by its bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
