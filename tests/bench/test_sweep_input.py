"""``bench --sweep`` / ``--perplexity`` input: every mistake is a one-line error, exit 2,
before anything is loaded or started; and the perplexity windows' arithmetic."""

from __future__ import annotations

import pytest

from tui.__main__ import main
from tui.bench.run.plan import BenchError
from tui.bench.sweep.perplexity import default_text, windows
from tui.bench.sweep.study import parse_sweep

CONFIG = """
[engines.local]
kind = "llamacpp"
model = "default"

[engines.remote]
kind = "llama-server"
url = "http://127.0.0.1:9"

[engines.olla]
kind = "ollama"
url = "http://127.0.0.1:9"
"""


@pytest.fixture
def bench(tmp_path, capsys):
    cfg = tmp_path / "infertop.toml"
    cfg.write_text(CONFIG)

    def run(*args: str) -> tuple[int, str]:
        code = main(["bench", "--config", str(cfg), "--out", str(tmp_path / "out"), *args])
        return code, capsys.readouterr().err

    return run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "n_ctx=1,2"], "--sweep 'n_ctx=1,2' does not parse: expected KEY=V1,V2,..."),
        (["--sweep", "n_threads"], "does not parse"),
        (["--sweep", "n_threads=1,two"], "--sweep n_threads: 'two' is not an integer"),
        (["--sweep", "n_threads=0,1"], "--sweep n_threads: 0 is below the least value 1"),
        (["--sweep", "n_gpu_layers=-2"], "below the least value -1"),
        (["--sweep", "n_threads=1,,2"], "expected values separated by commas"),
        (["--sweep", "model=/no/such.gguf"], "--sweep model: model file not found: /no/such.gguf"),
        (["--sweep", "model=Q9_9"], "not found: Q9_9 (nor is it a quantization name: F16,"),
        (
            ["--engine", "remote", "--sweep", "n_threads=1,2"],
            "engine 'remote' is a llama-server already running at http://127.0.0.1:9",
        ),
        (["--engine", "olla", "--sweep", "n_threads=1,2"], "engine 'olla' is of kind 'ollama'"),
        (["--engine", "olla", "--perplexity"], "--perplexity: engine 'olla' is of kind"),
        (["--perplexity", "/no/such.txt"], "--perplexity /no/such.txt: cannot read"),
        (["--perplexity", "--perplexity-window", "8"], "--perplexity-window must be at least"),
    ],
)
def test_bad_sweep_input_is_refused_up_front(bench, tmp_path, args, message):
    code, err = bench(*args)
    assert code == 2
    assert err.startswith("infertop bench: error: ") and err.count("\n") == 1
    assert message in err
    assert not (tmp_path / "out").exists()  # nothing was run or written


def test_parse_sweep_keeps_order_and_drops_duplicates():
    s = parse_sweep("n_threads=4, 1,4,2")
    assert (s.key, s.values) == ("n_threads", ("4", "1", "2"))
    assert s.typed("4") == 4
    assert parse_sweep("model=default,Q8_0").typed("Q8_0") == "Q8_0"
    with pytest.raises(BenchError):
        parse_sweep("=1")


@pytest.mark.parametrize(
    ("n", "window", "stride"), [(10, 4, 2), (11, 4, 3), (3, 8, 4), (100, 16, 1)]
)
def test_windows_score_every_token_but_the_first_exactly_once(n, window, stride):
    plan = windows(n, window, stride)
    scored = [i for w in plan for i in range(w.first, w.end)]
    assert scored == list(range(1, n))
    for w in plan:
        assert w.end - w.begin <= window
        assert w.begin < w.first  # a scored token always has its predecessor in the window
        if w is not plan[0]:
            assert w.first - w.begin >= window - stride  # context of at least W − S tokens


def test_windows_refuse_impossible_shapes():
    with pytest.raises(ValueError, match="window must be at least 2"):
        windows(10, 1, 1)
    with pytest.raises(ValueError, match="stride must be between"):
        windows(10, 4, 4)


def test_default_text_ships_in_the_package():
    text = default_text()
    assert text.startswith("PRIDE AND PREJUDICE, by Jane Austen")
    assert 3000 < len(text.encode()) < 20000


def test_n_gpu_layers_points_carry_the_value_to_each_engine(model_path):
    """No GPU here: the points are checked as built (the llama-server command, the
    in-process spec), without starting anything."""
    import sys

    from tui.bench.sweep.study import plan_points
    from tui.engines.base import EngineSpec
    from tui.engines.http.llama_server_launch import LaunchedLlamaServerEngine

    specs = [
        EngineSpec(
            name="ls", kind="llama-server", model="default", options={"binary": sys.executable}
        ),
        EngineSpec(name="local", kind="llamacpp", model="default", n_gpu_layers=5),
    ]
    points = plan_points(specs, parse_sweep("n_gpu_layers=0,-1"), "--sweep n_gpu_layers")
    assert [p.name for p in points] == [
        "ls n_gpu_layers=0",
        "ls n_gpu_layers=-1",
        "local n_gpu_layers=0",
        "local n_gpu_layers=-1",
    ]
    assert [p.spec.n_gpu_layers for p in points] == [0, -1, 0, -1]
    assert all(p.model_path == model_path for p in points)
    command = LaunchedLlamaServerEngine(points[1].spec).command()
    assert command[0] == sys.executable
    assert command[command.index("-ngl") + 1] == "-1"
    assert command[command.index("-m") + 1] == str(model_path)
    assert specs[1].n_gpu_layers == 5  # the configured engine itself is left as it was


def test_compare_spec_is_a_spec_type_sweep_of_a_server_infertop_starts(bench, tmp_path):
    code, err = bench("--engine", "remote", "--compare-spec", "ngram-simple")
    assert code == 2 and "engine 'remote' is a llama-server already running" in err
    code, err = bench("--engine", "local", "--compare-spec", "ngram-simple")
    assert code == 2 and "speculative decoding is swept on a llama-server infertop starts" in err
    code, err = bench("--compare-spec", "ngram-simple", "--sweep", "n_threads=1")
    assert code == 2 and "give it or --sweep, not both" in err
    code, err = bench("--sweep", "spec_type=none,warp-drive")
    assert code == 2 and "'warp-drive' is not one of none, ngram-simple" in err
    assert parse_sweep("spec_type=none,draft-simple").typed("draft-simple") == "draft-simple"
    assert not (tmp_path / "out").exists()


def test_a_spec_point_starts_llama_server_with_its_draft(tmp_path):
    from tui.bench.sweep.study import plan_points
    from tui.engines.base import EngineSpec
    from tui.engines.files.default_model import default_model_path
    from tui.engines.http.llama_server_launch import LaunchedLlamaServerEngine

    spec = EngineSpec("srv", "llama-server", model="default", options={"binary": "/bin/true"})
    points = plan_points([spec], parse_sweep("spec_type=none,draft-simple"), "--sweep spec_type")
    assert [p.name for p in points] == ["srv spec_type=none", "srv spec_type=draft-simple"]
    none, draft = (LaunchedLlamaServerEngine(p.spec).command() for p in points)
    assert "--spec-type" not in none
    assert draft[draft.index("--spec-type") + 1] == "draft-simple"
    assert draft[draft.index("-md") + 1] == str(default_model_path())
