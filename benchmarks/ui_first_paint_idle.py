"""(c) idle CPU and (d) time to first paint of the real app in a real terminal (tmux).

(d) first paint: from starting ``python -m tui`` to the engine bar being on the screen
(polled every 5 ms with tmux capture-pane), median of N starts. Goal < 1 s.
(c) idle CPU: the app process's CPU (all threads, /proc) over 10 s while it sits idle
with the model loaded, the hardware sampler at its default 2 Hz and the UI at default
refresh. Goal < 2 % of one core.

    .venv/bin/python benchmarks/ui_first_paint_idle.py [--starts 5] [--idle-s 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ui_common import TmuxApp, cpu_share, write_config

CONFIG = """
[engines.local]
kind = "llamacpp"
model = "default"
n_threads = 2
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=10.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="infertop-bench-"))
    cfg = write_config(tmp / "c.toml", CONFIG)
    env = {"XDG_STATE_HOME": str(tmp / "state"), "XDG_DATA_HOME": str(tmp / "data")}
    paints = []
    for _ in range(args.starts):
        app = TmuxApp(["--config", str(cfg)], env=env)
        try:
            app.wait(lambda s: "A ●" in s, 30, poll=0.005)
            paints.append(time.perf_counter() - app.t_start)
        finally:
            app.close()
    med = statistics.median(paints)
    print(
        f"(d) time to first paint: median {med * 1000:.0f} ms over {len(paints)} starts "
        f"(min {min(paints) * 1000:.0f}, max {max(paints) * 1000:.0f}); goal < 1000 ms; "
        f"ratio to goal {med / 1.0:.2f}"
    )

    app = TmuxApp(["--config", str(cfg)], env=env)
    try:
        app.wait(lambda s: "ready" in s, 60)
        time.sleep(3.0)  # let start-up work settle
        share = cpu_share(app.pid, args.idle_s)
    finally:
        app.close()
    print(
        f"(c) idle CPU: {share * 100:.2f} % of one core over {args.idle_s:.0f} s "
        f"(sampler 2 Hz, model loaded); goal < 2 %; ratio to goal {share / 0.02:.2f}"
    )


if __name__ == "__main__":
    main()
