"""Textual's private names, used only on a Textual they fit (tui/app/textual_private).

The app runs and draws with the fast paths off, however they came to be off (the switch,
another Textual version, a private name renamed); the choice never raises; ``infertop
doctor`` says which path is in use and why; and nothing else in ``tui`` touches a private
Textual name, so that one package is all a Textual upgrade has to look at.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from textual._compositor import ChopsUpdate, Compositor
from textual.css.styles import RenderStyles
from textual.widget import Widget

import tui
from tests.app.app_support import SIZE, gen
from tests.app.screen_text import screen_text
from tui.app import textual_private
from tui.app.textual_private import SWITCH, TESTED, FastPaths, check
from tui.app.textual_private.compositor import CroppedCompositor
from tui.app.widgets.engine_bar import EngineBar

pytestmark = pytest.mark.private_paths  # again with the Textual fallback (docs/testing.md)

WORDS = "lighthouse keepers watch the storm roll over the harbour wall at night"
SYNTH = f"""
[engines.synth]
kind = "synthetic"
options = {{ tokens_per_s = 200, ttft_ms = 15, text = "{WORDS}" }}
"""
TUI = Path(tui.__file__).parent
GATE = TUI / "app" / "textual_private"


@pytest.fixture(autouse=True)
def switch_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests decide the fast paths themselves: the switch is theirs to set (the
    suite's run with INFERTOP_TEXTUAL_PRIVATE=0 included)."""
    monkeypatch.delenv(SWITCH, raising=False)


def test_the_tested_textual_is_the_installed_one():
    """The fast paths are on in this environment (pyproject pins TESTED)."""
    assert textual_private.textual_version() == TESTED
    assert check({}) == FastPaths(True, TESTED, "tested version")


# -- the app with the fast paths off ---------------------------------------------------


def _switch_off(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(SWITCH, "0")
    return f"{SWITCH}=0"


def _another_version(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(textual_private, "textual_version", lambda: "9.0.0")
    return f"tested on {TESTED}"


def _compositor_module_renamed(monkeypatch: pytest.MonkeyPatch) -> str:
    # as if Textual renamed it: a new import of the name fails (Textual's own modules
    # imported it already, as they would have imported the new name)
    monkeypatch.setitem(sys.modules, "textual._compositor", None)
    return "no textual._compositor"


@pytest.mark.parametrize("turn_off", [_switch_off, _another_version, _compositor_module_renamed])
async def test_the_app_streams_and_draws_with_the_fast_paths_off(
    monkeypatch, make_config, build_app, wait_for, turn_off
):
    """Fails on the old code: the app kept the cropped compositor whatever the switch,
    and a renamed ``textual._compositor`` stopped it from importing at all."""
    reason = turn_off(monkeypatch)
    app = build_app(make_config('default_engine = "synth"\n' + gen(160) + SYNTH))
    assert not app.fast_paths.on and app.fast_paths.reason == reason
    written: list[str] = []  # what each partial update tells the terminal
    async with app.run_test(size=SIZE) as pilot:
        comp = app.screen._compositor
        assert type(comp) is Compositor  # Textual's own, not CroppedCompositor
        partial = comp.render_partial_update

        def recorded():  # type: ignore[no-untyped-def]
            update = partial()
            if update is not None:
                written.append(update.render_segments(app.console))
            return update

        comp.render_partial_update = recorded  # type: ignore[method-assign]
        await wait_for(pilot, lambda: "ready" in app.chat.query_one(EngineBar).plain(), 30)
        await app.chat.submit_text("Tell me about the lighthouse.")
        await wait_for(pilot, lambda: not app.chat.busy, 60)
        await pilot.pause()
        text = screen_text(app)
    assert "lighthouse keepers watch the storm" in text, text  # the conversation
    # the metrics panel: a TTFT for the answer, then the p50 of the history
    assert re.search(r"TTFT ms .*\d+\.\d │ p50 +\d+\.\d", text), text
    # the stream drew itself as it came, in partial updates by Textual's compositor
    assert len(written) >= 3 and "harbour wall" in "".join(written)


async def test_with_the_fast_paths_on_the_chat_screen_has_the_cropped_compositor(
    make_config, build_app
):
    app = build_app(make_config('default_engine = "synth"\n' + gen(8) + SYNTH))
    assert app.fast_paths == FastPaths(True, TESTED, "tested version")
    async with app.run_test(size=SIZE):
        assert type(app.screen._compositor) is CroppedCompositor


# -- the choice: never raises, says why ------------------------------------------------


@pytest.mark.parametrize(
    ("env", "version", "on", "reason"),
    [
        ({}, TESTED, True, "tested version"),
        ({SWITCH: ""}, TESTED, True, "tested version"),
        ({SWITCH: "0"}, TESTED, False, f"{SWITCH}=0"),
        ({SWITCH: "1"}, TESTED, True, "tested version"),
        ({}, "8.3.0", False, f"tested on {TESTED}"),
        ({}, "unknown", False, f"tested on {TESTED}"),
        ({SWITCH: "1"}, "8.3.0", True, f"{SWITCH}=1; tested on {TESTED}"),
        ({SWITCH: "0"}, "8.3.0", False, f"{SWITCH}=0"),
        ({SWITCH: "yes"}, TESTED, True, f"tested version; {SWITCH}='yes' is not 0 or 1, ignored"),
        ({SWITCH: "yes"}, "9", False, f"tested on {TESTED}; {SWITCH}='yes' is not 0 or 1, ignored"),
    ],
)
def test_the_switch_and_the_version_decide(env, version, on, reason):
    assert check(env, version) == FastPaths(on, version, reason)


def _drop(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
    monkeypatch.delattr(owner, name)


def _widget_attribute(name: str, value: object):  # type: ignore[no-untyped-def]
    """Widget.__init__ that leaves instance attribute ``name`` as ``value`` (None: none)."""
    init = Widget.__init__

    def patched(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        if value is None:
            del self.__dict__[name]
        else:
            self.__dict__[name] = value

    return patched


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda mp: _drop(mp, Compositor, "_get_renders"), "Compositor._get_renders is not (crop)"),
        (
            lambda mp: mp.setattr(Compositor, "_regions_to_spans", lambda self, regions: None),
            "Compositor._regions_to_spans is not (regions)",
        ),
        (lambda mp: mp.setattr(Compositor, "cuts", []), "Compositor.cuts is not a property"),
        (
            lambda mp: mp.setattr(ChopsUpdate, "__init__", lambda self, chops, spans: None),
            "ChopsUpdate is not (chops, spans, chop_ends)",
        ),
        (lambda mp: _drop(mp, RenderStyles, "_cache_key"), "no int RenderStyles._cache_key"),
        (
            lambda mp: mp.setattr(Widget, "__init__", _widget_attribute("_layout_updates", None)),
            "no int Widget._layout_updates",
        ),
        (
            lambda mp: mp.setattr(Widget, "__init__", _widget_attribute("_anchor_released", 0)),
            "no bool Widget._anchor_released",
        ),
        (
            lambda mp: mp.setattr(textual_private, "_probe_widget", lambda: 1 / 0),
            "probing Textual's private names failed: ZeroDivisionError: division by zero",
        ),
    ],
)
def test_a_missing_or_reshaped_private_name_turns_the_fast_paths_off(monkeypatch, change, said):
    """Fails with the names unchecked (the version alone would say on)."""
    change(monkeypatch)
    got = check({}, TESTED)
    assert got == FastPaths(False, TESTED, said)
    assert got.summary() == (
        f"Textual {TESTED}: fast paths off ({said}), using Textual's own compositor"
    )


def test_the_decision_is_made_at_app_start_or_first_use(monkeypatch):
    monkeypatch.setattr(textual_private, "_decided", None)
    monkeypatch.setenv(SWITCH, "0")
    assert not textual_private.fast_paths().on  # first use decides
    monkeypatch.setenv(SWITCH, "1")
    assert not textual_private.fast_paths().on  # kept for the process
    assert textual_private.decide().on  # an app start decides again


# -- infertop doctor ---------------------------------------------------------------------


def test_doctor_says_which_path_is_in_use_and_why(monkeypatch, capsys):
    from tui.cli import doctor

    monkeypatch.delenv(SWITCH, raising=False)
    doctor._check_textual()
    monkeypatch.setenv(SWITCH, "0")
    doctor._check_textual()
    monkeypatch.delenv(SWITCH)
    monkeypatch.setattr(textual_private, "textual_version", lambda: "9.1.0")
    doctor._check_textual()
    assert capsys.readouterr().out.splitlines() == [
        f"[ok] TUI fast paths       Textual {TESTED}: private fast paths on (tested version)",
        f"[  ] TUI fast paths       Textual {TESTED}: fast paths off ({SWITCH}=0), "
        "using Textual's own compositor",
        f"[!!] TUI fast paths       Textual 9.1.0: fast paths off (tested on {TESTED}), "
        "using Textual's own compositor",
    ]


def test_the_doctor_command_prints_the_line(cli_env):
    """Fails on the old code: no such line."""
    env = {**cli_env, SWITCH: "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "doctor", "--no-load"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    (line,) = [ln for ln in proc.stdout.splitlines() if "TUI fast paths" in ln]
    assert line.endswith(f"fast paths off ({SWITCH}=0), using Textual's own compositor"), line


# -- nothing else in tui touches a private Textual name ----------------------------------


def _outside_the_gate() -> list[Path]:
    return [p for p in sorted(TUI.rglob("*.py")) if GATE not in p.parents]


def test_no_private_textual_module_is_imported_outside_the_gate():
    """Fails on the old code: tui/app/compositor.py imported textual._compositor and
    tui/app/widgets/metric_lines.py textual.renderables._blend_colors."""
    found = []
    for path in _outside_the_gate():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "textual" and any(p.startswith("_") for p in parts):
                    found.append(f"{path.relative_to(TUI.parent)}:{node.lineno} {module}")
    assert not found, "\n".join(found)


def _textual_private_names() -> set[str]:
    """``_name``s Textual's own code defines or reads as attributes (its source's
    function and class bodies), dunders aside."""
    import textual

    names: set[str] = set()
    for path in Path(textual.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _our_names() -> set[str]:
    """``_name``s ``tui`` gives a value of its own: assigned (``x._name = ...``, a class
    or module level ``_name``) or defined (a function or a method)."""
    names: set[str] = set()
    for path in sorted(TUI.rglob("*.py")):
        if GATE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Attribute):
                            names.add(t.attr)
                        elif isinstance(t, ast.Name):
                            names.add(t.id)
    return {n for n in names if n.startswith("_")}


def _imports_textual(tree: ast.Module) -> bool:
    return any(
        (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "textual")
        or (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] == "textual" for a in node.names)
        )
        for node in ast.walk(tree)
    )


def test_no_private_textual_attribute_is_read_outside_the_gate():
    """An ``x._name`` outside the gate names something ``tui`` defines itself, never one
    only Textual does. Fails on the old code: ``styles._cache_key``, ``_nodes._updates``,
    ``_layout_updates``, ``_anchor_released``, ``_require_update_dimensions``, ..."""
    textual_only = _textual_private_names() - _our_names()
    found = []
    for path in _outside_the_gate():
        tree = ast.parse(path.read_text(), str(path))
        if TUI / "app" not in path.parents and not _imports_textual(tree):
            continue  # holds no Textual object (and os._exit is no concern here)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in textual_only:
                found.append(f"{path.relative_to(TUI.parent)}:{node.lineno} .{node.attr}")
    assert not found, "\n".join(found)


def _textual_subclasses() -> list[type]:
    import textual.dom
    import textual.message

    out = []
    for module in pkgutil.walk_packages([str(TUI / "app")], "tui.app."):
        if module.name.startswith("tui.app.textual_private"):
            continue
        loaded = importlib.import_module(module.name)
        for value in vars(loaded).values():
            if (
                isinstance(value, type)
                and value.__module__ == module.name
                and issubclass(value, (textual.dom.DOMNode, textual.message.Message))
            ):
                out.append(value)
    return out


def test_no_private_textual_method_is_overridden_outside_the_gate():
    """A class of ours defines no ``_name`` that a Textual class it derives from defines:
    overriding one is using it. Fails on the old code: PromptInput._on_key,
    ABTable._on_idle."""
    found = []
    classes = _textual_subclasses()
    assert len(classes) > 40  # the widgets, screens and messages were found
    for cls in classes:
        textual_bases = [b for b in cls.__mro__ if b.__module__.split(".")[0] == "textual"]
        given = set(vars(type("Probe", (cls,), {})))  # what Textual gives every class
        for name in set(vars(cls)) - given:
            if name.startswith("_") and not name.startswith("__"):
                if any(name in vars(base) for base in textual_bases):
                    found.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    assert not found, "\n".join(found)
