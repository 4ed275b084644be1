"""Helpers shared by the headless subcommands: errors, engine selection."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from tui.config import Config, ConfigError, load_config
from tui.core.safe_text import terminal_label
from tui.engines.base import EngineError, EngineSpec


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 2) -> int:
    """Print one error line (terminal-safe: it may quote a server) and return ``code``."""
    print(f"infertop: error: {terminal_label(message, 2000)}", file=sys.stderr)
    return code


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", metavar="NAME", help="engine name from config (default: config's)")
    p.add_argument("--url", metavar="URL", help="a server URL; its kind is auto-detected")
    add_insecure_argument(p)
    p.add_argument("--model", metavar="MODEL", help="GGUF path (llamacpp) or model name (server)")
    p.add_argument(
        "--api",
        choices=APIS,
        help="the API to speak to the server: chat (/v1/chat/completions, the default), "
        "completions, responses (the OpenAI Responses API) or messages (Anthropic's "
        "/v1/messages); with --url the server's kind is still detected",
    )


APIS = ("chat", "completions", "responses", "messages")

INSECURE_HELP = (
    "with --url: accept a TLS certificate that cannot be verified (self-signed, wrong "
    "host). This turns certificate checking OFF for that server: anyone on the network "
    "path could read or change the traffic, API key included"
)


def add_insecure_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--insecure", action="store_true", help=INSECURE_HELP)


def load(args: argparse.Namespace) -> Config:
    """The config the arguments name (or the lookup order finds); its notices (a
    ``./infertop.toml`` skipped as untrusted) are printed to stderr."""
    try:
        cfg = load_config(getattr(args, "config", None))
    except ConfigError as e:
        raise CLIError(str(e)) from None
    show_notices(cfg)
    return cfg


def show_notices(cfg: Config) -> None:
    """Each of the config's notices as one ``infertop: note:`` line on stderr."""
    for note in cfg.notices:
        print(f"infertop: note: {terminal_label(note, 2000)}", file=sys.stderr)


def engine_spec(args: argparse.Namespace, cfg: Config) -> EngineSpec:
    """The engine the arguments ask for: --url, else --engine, else the config default;
    spoken to in the API --api names."""
    if getattr(args, "url", None):
        try:
            from tui.engines.servers.detect import spec_from_url
        except ImportError:
            raise CLIError("HTTP engines are not available in this install") from None
        try:
            spec = spec_from_url(
                args.url, model=args.model, verify_tls=not getattr(args, "insecure", False)
            )
        except EngineError as e:
            raise CLIError(str(e), code=1) from None
    else:
        name = getattr(args, "engine", None) or cfg.default_engine
        try:
            spec = cfg.engine(name)
        except ConfigError as e:
            raise CLIError(str(e)) from None
        if getattr(args, "model", None):
            spec = replace(spec, model=args.model)
    api = getattr(args, "api", None)
    return spec if api is None else with_api(spec, api)


def with_api(spec: EngineSpec, api: str) -> EngineSpec:
    """``spec`` spoken to in ``api`` (:data:`APIS`): ``messages`` is the anthropic kind,
    the others an OpenAI-compatible kind's endpoint. CLIError for an engine that speaks
    none of them (in-process engines, Ollama's native API)."""
    from tui.engines.kinds import find_kind

    kind = find_kind(spec.kind)
    if kind is None or not kind.http or spec.kind == "ollama":
        raise CLIError(f"--api {api}: engine {spec.name!r} ({spec.kind}) speaks no such API")
    if api == "messages":
        return replace(spec, kind="anthropic", endpoint="chat")
    if spec.kind == "anthropic":
        return replace(spec, kind="openai", endpoint=api)
    return replace(spec, endpoint=api)
