"""Config discovery, validation and every error path (messages name file, key, line)."""

import re
from pathlib import Path

import pytest

from tui.config import (
    ConfigError,
    find_config,
    load_config,
    parse_config,
    save_config,
)
from tui.config_trust import set_trust

GOOD = """
default_engine = "tiny"

[generation]
max_tokens = 64
temperature = 0

[ui]
theme = "infertop-light"

[telemetry]
interval_s = 1

[engines.tiny]
kind = "llamacpp"
model = "default"
n_threads = 2
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "infertop.toml"
    p.write_text(text)
    return p


def test_good_config(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.default_engine == "tiny"
    assert cfg.engines["tiny"].n_threads == 2
    assert cfg.generation.max_tokens == 64
    assert cfg.generation.temperature == 0.0 and isinstance(cfg.generation.temperature, float)
    assert cfg.telemetry.interval_s == 1.0
    assert cfg.ui.theme == "infertop-light"


def test_example_config_is_valid():
    example = Path(__file__).resolve().parents[1] / "config.example.toml"
    cfg = load_config(example)
    assert cfg.default_engine in cfg.engines
    # every [ledger] key is documented there, at its default
    from tui.config import LEDGER_KEYS, LedgerSettings

    text = example.read_text()
    for key in LEDGER_KEYS:
        assert f"\n{key} = " in text or f"\n# {key} = " in text, key
    assert cfg.ledger == LedgerSettings() and cfg.clients == {}


@pytest.mark.parametrize(
    "text, words",
    [
        ('[clients]\n"alice" = "x"\n', "not a key fingerprint"),
        ('[clients]\n"k:0123456789AB" = "x"\n', "not a key fingerprint"),
        ('[clients]\n"k:0123456789ab" = ""\n', "a name of 1 to 200"),
        ('[clients]\n"k:0123456789ab" = 3\n', "expected str"),
        ("[ledger]\nkeep_days = 0\n", "ledger.keep_days"),
        ("[ledger]\ntop_clients = 5000\n", "ledger.top_clients"),
        ('[ledger]\nenabled = "yes"\n', "ledger.enabled"),
    ],
)
def test_ledger_and_clients_keys_are_checked(tmp_path, text, words):
    with pytest.raises(ConfigError, match=words):
        load_config(write(tmp_path, text))


def test_unknown_key_names_file_key_and_line(tmp_path):
    p = write(tmp_path, GOOD.replace("n_threads = 2", "n_threads = 2\nn_thread = 4"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert str(p) in msg and "engines.tiny.n_thread" in msg and "unknown key" in msg
    line = (
        GOOD.replace("n_threads = 2", "n_threads = 2\nn_thread = 4")
        .splitlines()
        .index("n_thread = 4")
        + 1
    )
    assert f":{line}:" in msg


def test_unknown_top_level_key(tmp_path):
    with pytest.raises(ConfigError, match="key 'colour': unknown key"):
        load_config(write(tmp_path, 'colour = "red"\n'))


def test_wrong_type_names_the_key(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, GOOD.replace("max_tokens = 64", 'max_tokens = "lots"')))
    assert "generation.max_tokens" in str(e.value) and "expected int" in str(e.value)
    assert ":5:" in str(e.value)


def test_bool_is_not_an_int(tmp_path):
    with pytest.raises(ConfigError, match="engines.tiny.n_threads"):
        load_config(write(tmp_path, GOOD.replace("n_threads = 2", "n_threads = true")))


def test_broken_toml_names_file_and_line(tmp_path):
    p = write(tmp_path, "[engines.x\nkind = 'llamacpp'\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(p) in str(e.value) and "invalid TOML" in str(e.value) and "line 1" in str(e.value)


def test_unknown_engine_kind(tmp_path):
    with pytest.raises(ConfigError, match="engines.tiny.kind.*unknown kind 'gpt5'"):
        load_config(write(tmp_path, GOOD.replace('kind = "llamacpp"', 'kind = "gpt5"')))


def test_engine_table_needs_a_kind(tmp_path):
    with pytest.raises(ConfigError, match="missing required key 'kind'"):
        load_config(write(tmp_path, GOOD.replace('kind = "llamacpp"\n', "")))


def test_default_engine_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="default_engine"):
        load_config(
            write(tmp_path, GOOD.replace('default_engine = "tiny"', 'default_engine = "big"'))
        )


def test_bad_values(tmp_path):
    with pytest.raises(ConfigError, match="generation.max_tokens.*must be >= 1"):
        load_config(write(tmp_path, GOOD.replace("max_tokens = 64", "max_tokens = 0")))


@pytest.mark.parametrize(
    "text, key, why",
    [
        ("[generation]\ntop_p = 0\n", "generation.top_p", "must be > 0 and <= 1"),
        ("[generation]\ntop_p = 1.5\n", "generation.top_p", "must be > 0 and <= 1"),
        ("[generation]\ntemperature = -1\n", "generation.temperature", "must be >= 0"),
        ("[ui]\nrefresh_hz = 0\n", "ui.refresh_hz", "must be > 0"),
        ("[telemetry]\ninterval_s = -2\n", "telemetry.interval_s", "must be > 0"),
        ('[engines.e]\nkind = "llamacpp"\nn_ctx = 0\n', "engines.e.n_ctx", "must be >= 1"),
        ('[engines.e]\nkind = "llamacpp"\nn_threads = 0\n', "engines.e.n_threads", ">= 1"),
        (
            '[engines.e]\nkind = "openai"\nurl = "http://x"\nread_timeout_s = 0\n',
            "engines.e.read_timeout_s",
            "must be > 0",
        ),
        (
            '[engines.e]\nkind = "openai"\nurl = "http://x"\nconnect_timeout_s = -1\n',
            "engines.e.connect_timeout_s",
            "must be > 0",
        ),
        (
            '[engines.e]\nkind = "openai"\nurl = "http://x"\nstall_timeout_s = 0\n',
            "engines.e.stall_timeout_s",
            "must be > 0",
        ),
    ],
)
def test_numbers_out_of_range_name_the_key(tmp_path, text, key, why):
    head = 'default_engine = "e"\n' if "[engines.e]" in text else ""
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, head + text))
    msg = str(err.value)
    assert f"key '{key}'" in msg and why in msg and str(tmp_path) in msg


@pytest.mark.parametrize(
    "options, needle",
    [
        (
            "{ quiet_stderr = true, seeed = 3 }",
            "options.seeed': unknown option for kind 'llamacpp'",
        ),
        ('{ isolate = "yes" }', "options.isolate': expected bool, got str"),
        ("{ tokens_per_s = 5 }", "options.tokens_per_s': unknown option for kind 'llamacpp'"),
    ],
)
def test_engine_options_are_checked_per_kind(tmp_path, options, needle):
    text = f'default_engine = "e"\n[engines.e]\nkind = "llamacpp"\noptions = {options}\n'
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(write(tmp_path, text))


def test_the_options_each_kind_accepts_load(tmp_path):
    text = (
        'default_engine = "s"\n'
        '[engines.s]\nkind = "synthetic"\noptions = { tokens_per_s = 50, isolate = true }\n'
        '[engines.l]\nkind = "llamacpp"\noptions = { use_extra_bufts = "auto", seed = 1 }\n'
        '[engines.o]\nkind = "ollama"\nurl = "http://x"\noptions = { keep_alive = "5m" }\n'
    )
    cfg = load_config(write(tmp_path, text))
    assert cfg.engines["s"].options == {"tokens_per_s": 50, "isolate": True}
    assert cfg.engines["l"].options == {"use_extra_bufts": "auto", "seed": 1}
    assert cfg.engines["o"].options == {"keep_alive": "5m"}


@pytest.mark.parametrize(
    "headers, needle",
    [
        ('{ "X-A" = "ok\\r\\nX-Injected: 1" }', "cannot hold CR, LF or NUL"),
        ('{ "X-A" = 5 }', "expected str, got int"),
        ('{ "X A" = "v" }', "is not an HTTP header name"),
    ],
)
def test_header_values_are_checked(tmp_path, headers, needle):
    text = (
        'default_engine = "e"\n[engines.e]\nkind = "openai"\nurl = "http://x"\n'
        f"headers = {headers}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    msg = str(err.value)
    assert "engines.e.headers." in msg and needle in msg and str(tmp_path) in msg


def test_lookup_order(tmp_path, monkeypatch):
    explicit = write(tmp_path, GOOD)
    env_file = tmp_path / "env.toml"
    env_file.write_text('default_engine = "local"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERTOP_CONFIG", str(env_file))
    assert find_config(explicit) == explicit
    assert find_config() == env_file
    monkeypatch.delenv("INFERTOP_CONFIG")
    # ./infertop.toml only once trusted (tests/trust/test_config_trust.py says why)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr("tui.config.user_config_path", lambda: tmp_path / "none.toml")
    notices: list[str] = []
    assert find_config(notices=notices) is None
    assert "infertop trust" in notices[0]
    set_trust(Path("infertop.toml"), Path("infertop.toml").read_bytes())
    assert find_config() == Path("infertop.toml")
    with pytest.raises(ConfigError, match="config file not found"):
        find_config(tmp_path / "nope.toml")


def test_no_file_gives_builtin_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERTOP_CONFIG", raising=False)
    monkeypatch.setattr("tui.config.user_config_path", lambda: tmp_path / "none.toml")
    cfg = load_config()
    assert cfg.path is None and cfg.engines["local"].kind == "llamacpp"


def test_save_round_trips(tmp_path):
    out = tmp_path / "sub" / "config.toml"
    save_config({"default_engine": "local", "ui": {"theme": "infertop-dark"}}, out)
    cfg = parse_config(out.read_text(), out)
    assert cfg.ui.theme == "infertop-dark"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        # float(10**400) raised OverflowError
        ("[telemetry]\npeak_bandwidth_gbs = 1" + "0" * 400, "telemetry.peak_bandwidth_gbs"),
        # tomllib raised ValueError (int over 4300 digits), not TOMLDecodeError
        ("[generation]\nseed = " + "1" * 5000, "invalid TOML"),
        # a wrong type's message did repr(huge int): ValueError again
        ("[ui]\ntheme = 0x" + "f" * 5000, "ui.theme"),
        ("[generation]\nmax_tokens = 0x" + "f" * 20, "generation.max_tokens"),
        # tomllib raised RecursionError
        ("a = " + "[" * 3000 + "]" * 3000, "nested too deeply"),
        ("[engines.x.options" + ".a" * 40 + "]\nb = 1", "nested more than 32 deep"),
    ],
    ids=["float-overflow", "int-digits", "hex-repr", "int-64-bit", "deep-array", "deep-table"],
)
def test_hostile_numbers_and_nesting_are_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as e:
        parse_config(text, Path("f.toml"))
    assert str(e.value).startswith("f.toml")


@pytest.mark.parametrize(
    ("table", "line", "needle"),
    [
        ("[telemetry]\ninterval_s = nan", "interval_s = nan", "finite"),
        ("[generation]\ntemperature = inf", "temperature = inf", "finite"),
        ("[ui]\nrefresh_hz = 0", "refresh_hz = 0", "must be > 0"),
        ("[engines.local]\nkind = 'llamacpp'\nread_timeout_s = -1", "read_timeout_s = -1", "> 0"),
        ("[engines.local]\nkind = 'llamacpp'\nheaders = {X = 1}", "headers = {X = 1}", "str"),
        ("[engines.local]\nkind = 'llamacpp'\nheaders = {X = \"a\\r\\nB: c\"}", "headers", "CR"),
        ("[engines.local]\nkind = 'llamacpp'\nheaders = {'a b' = 'c'}", "headers", "header"),
    ],
    ids=["nan", "inf", "zero-hz", "negative-timeout", "header-int", "header-crlf", "header-name"],
)
def test_values_no_engine_can_use_name_key_and_line(table: str, line: str, needle: str) -> None:
    # nan/inf/0/-1 passed (a NaN sampling interval), headers failed later inside httpx
    with pytest.raises(ConfigError, match=needle) as e:
        parse_config(table + "\n", Path("f.toml"))
    n = next(i for i, t in enumerate(table.splitlines(), 1) if t.startswith(line))
    assert str(e.value).startswith(f"f.toml:{n}: key '")


def test_a_quoted_engine_name_is_found_on_its_own_line() -> None:
    # "engines.b.c.kind" once searched for [engines.b.c], fell back to the top of the
    # file and named engine a's kind line
    text = '[engines.a]\nkind = "llamacpp"\n\n[engines."b.c"]\nkind = 5\n'
    with pytest.raises(ConfigError) as e:
        parse_config(text, Path("f.toml"))
    assert str(e.value).startswith("f.toml:5: key 'engines.\"b.c\".kind': expected str")


def test_a_missing_kind_names_the_engine_table_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"infertop.toml:14: key 'engines.tiny': missing"):
        load_config(write(tmp_path, GOOD.replace('kind = "llamacpp"\n', "")))


def test_an_unreadable_file_is_a_config_error(tmp_path, monkeypatch) -> None:
    p = write(tmp_path, GOOD)

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(ConfigError, match="cannot read the config file: Permission denied"):
        load_config(p)


# -- telemetry = "..." in [engines.NAME]: whose hardware the panel shows ----------------------
@pytest.mark.parametrize(
    "value", ["local", "ssh://gpu-box", "ssh://alice@10.0.0.5:2222", "http://dgx:9400"]
)
def test_engine_telemetry_sources_load(tmp_path, value):
    cfg = load_config(write(tmp_path, GOOD + f'telemetry = "{value}"\n'))
    assert cfg.engines["tiny"].telemetry == value


@pytest.mark.parametrize(
    "value, needle",
    [
        ("gpu-box", "expected 'local', ssh://"),
        ("ssh://-oProxyCommand=x", "expected ssh://"),
        ("ssh://box:http", "port is not a number"),
        ("http://dgx:99999", "port is not a number"),
        ("ftp://x", "expected 'local'"),
    ],
)
def test_a_bad_telemetry_source_names_file_key_and_line(tmp_path, value, needle):
    text = GOOD + f'telemetry = "{value}"\n'
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    line = text.splitlines().index(f'telemetry = "{value}"') + 1
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: key 'engines.tiny.telemetry'"), msg
    assert needle in msg and "\n" not in msg


def test_telemetry_must_be_a_string(tmp_path):
    with pytest.raises(ConfigError, match=r"engines.tiny.telemetry'.*expected str"):
        load_config(write(tmp_path, GOOD + "telemetry = 5\n"))


def test_an_exporter_password_stays_out_of_reports(tmp_path):
    from tui.bench.run.results import spec_for_report
    from tui.telemetry.sources import parse_source

    cfg = load_config(write(tmp_path, GOOD + 'telemetry = "http://u:s3cret@dgx:9400"\n'))
    assert "s3cret" not in str(spec_for_report(cfg.engines["tiny"]))
    src = parse_source(cfg.engines["tiny"].telemetry or "")
    assert "s3cret" not in src.label and "s3cret" not in repr(src) and src.auth


@pytest.mark.parametrize(
    ("ui", "schedule"),
    [
        ("", "auto"),
        ('ab_schedule = "sequential"', "sequential"),
        ('ab_schedule = "concurrent"', "concurrent"),
        ("ab_concurrent = true", "concurrent"),  # the older key still means what it said
        ("ab_concurrent = false", "sequential"),
    ],
)
def test_ab_schedule(tmp_path, ui, schedule):
    cfg = load_config(write(tmp_path, GOOD.replace('theme = "infertop-light"', ui)))
    assert cfg.ui.ab_schedule == schedule


@pytest.mark.parametrize(
    ("ui", "needle"),
    [
        ('ab_schedule = "fast"', "ui.ab_schedule': must be one of auto, sequential, concurrent"),
        ('ab_schedule = "auto"\nab_concurrent = true', "ui.ab_concurrent': set ab_schedule or"),
    ],
)
def test_a_bad_ab_schedule_names_the_key(tmp_path, ui, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(write(tmp_path, GOOD.replace('theme = "infertop-light"', ui)))


def test_discovery_settings(tmp_path):
    path = tmp_path / "c.toml"
    cfg = parse_config("", path)
    assert cfg.discovery.enabled is True
    assert cfg.discovery.port_list() == [11434, 8080, 8000, 30000, 1234, 5001, 1337, 3000]
    cfg = parse_config(
        "[discovery]\nenabled = false\nports = [9999]\ntimeout_s = 0.25\ngguf_dirs = ['~/m']\n",
        path,
    )
    assert (cfg.discovery.enabled, cfg.discovery.port_list()) == (False, [9999])
    assert cfg.discovery.timeout_s == 0.25
    assert cfg.discovery.gguf_roots() == [Path("~/m").expanduser()]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[discovery]\nports = [70000]\n", "discovery.ports': not a TCP port: 70000"),
        ("[discovery]\nports = ['8080']\n", "discovery.ports': expected int"),
        ("[discovery]\nports = 8080\n", "discovery.ports': expected list"),
        ("[discovery]\ntimeout_s = 0\n", "discovery.timeout_s': must be > 0"),
        ("[discovery]\ngguf_dirs = [1]\n", "discovery.gguf_dirs': expected str"),
        ("[discovery]\nhosts = ['10.0.0.1']\n", "discovery.hosts': unknown key"),
    ],
)
def test_discovery_settings_refused(tmp_path, text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(text, tmp_path / "c.toml")
