"""Settings under `groundwire up`: each child gets its own settings (flag >
environment > file > default) and never another service's; the settings file; the
home folder; `groundwire config show`; the command list in the top-level help."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from groundwire_cli.__main__ import build_parser, main
from groundwire_cli.child_settings import child_environment
from groundwire_cli.cluster import LocalCluster
from groundwire_cli.config import (
    FileSettings,
    checkout_root,
    config_path,
    groundwire_home,
    load_file,
    resolve_path,
    user_settings,
)
from groundwire_core.errors import InvalidInput

ENVIRON = {
    "PATH": "/usr/bin",
    "GROUNDWIRE_HOME": "/data/gw",
    "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "sk-orchestrator-only",
    "GROUNDWIRE_ORCHESTRATOR_PORT": "1234",
    "GROUNDWIRE_GATEWAY_ADMIN_API_KEYS": "ops:gateway-only-key",
    "GROUNDWIRE_RERANKER_MODEL_DIR": "/models/rerank",
    "GROUNDWIRE_RETRIEVER_QDRANT_API_KEY": "retriever-only-key",
}


def test_a_child_gets_its_own_settings_and_no_other_services() -> None:
    settings = user_settings("orchestrator", ENVIRON, FileSettings())
    env = child_environment(
        "orchestrator",
        ENVIRON,
        settings,
        {"PORT": "50054", "HOST": "127.0.0.1"},
        {"GROUNDWIRE_GATEWAY_REDIS_URL": "redis://x", "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "a"},
    )
    assert env["GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY"] == "sk-orchestrator-only"
    assert env["GROUNDWIRE_ORCHESTRATOR_PORT"] == "50054", "the cluster assigns the port"
    assert env["GROUNDWIRE_ORCHESTRATOR_LLM_ORDER"] == "a"
    assert env["PATH"] == "/usr/bin" and env["GROUNDWIRE_HOME"] == "/data/gw"
    assert not [k for k in env if k.startswith(("GROUNDWIRE_GATEWAY_", "GROUNDWIRE_RE"))]
    assert "gateway-only-key" not in env.values()


def test_the_file_gives_common_then_service_then_the_environment_wins(tmp_path: Path) -> None:
    config = tmp_path / "groundwire.toml"
    config.write_text(
        "[common]\nlog_level = 'DEBUG'\nshutdown_grace_s = 3\n\n"
        "[orchestrator]\nlog_level = 'WARNING'\nanthropic_api_key = 'from-file'\n"
        "rerank_threshold = 0.25\nlog_json = true\n\n"
        "[reranker]\nmodel_dir = 'models/rerank'\n"
    )
    file = load_file(config)
    orchestrator = user_settings("orchestrator", ENVIRON, file)
    assert orchestrator["LOG_LEVEL"] == "WARNING", "a service table beats [common]"
    assert orchestrator["SHUTDOWN_GRACE_S"] == "3"
    assert orchestrator["RERANK_THRESHOLD"] == "0.25" and orchestrator["LOG_JSON"] == "true"
    assert orchestrator["ANTHROPIC_API_KEY"] == "sk-orchestrator-only", "environment > file"
    assert user_settings("embedder", {}, file)["LOG_LEVEL"] == "DEBUG"
    # a relative path in the file is taken from the file's folder, not the current one
    assert user_settings("reranker", {}, file)["MODEL_DIR"] == str(tmp_path / "models/rerank")


def test_a_path_setting_is_flag_then_environment_then_file_then_default(tmp_path: Path) -> None:
    config = tmp_path / "groundwire.toml"
    config.write_text(f"[embedder]\nmodel_dir = '{tmp_path / 'file-model'}'\n")
    file = load_file(config)
    env = {"GROUNDWIRE_EMBEDDER_MODEL_DIR": "/env-model"}
    default = tmp_path / "default"
    args = ("embedder", "model_dir")
    assert resolve_path(Path("/flag"), *args, env, file, default) == Path("/flag")
    assert resolve_path(None, *args, env, file, default) == Path("/env-model")
    assert resolve_path(None, *args, {}, file, default) == tmp_path / "file-model"
    assert resolve_path(None, *args, {}, FileSettings(), default) == default


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[orchestrator\n", "not valid TOML"),
        ("[llm]\nkey = 'x'\n", "unknown table or top-level key 'llm'"),
        ("log_level = 'DEBUG'\n", "unknown table or top-level key 'log_level'"),
        ("[orchestrator]\nanthropic_key = 'x'\n", "did you mean 'anthropic_api_key'?"),
        ("[gateway.limits]\nx = 1\n", "[gateway] limits is a table"),
    ],
)
def test_a_bad_settings_file_names_what_is_wrong(tmp_path: Path, text: str, reason: str) -> None:
    config = tmp_path / "groundwire.toml"
    config.write_text(text)
    with pytest.raises(InvalidInput) as error:
        load_file(config)
    assert reason in error.value.message and str(config) in error.value.message


def test_the_settings_file_is_found_by_flag_then_variable_then_xdg(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "groundwire").mkdir(parents=True)
    default = xdg / "groundwire" / "groundwire.toml"
    named = tmp_path / "named.toml"
    named.write_text("")
    env = {"XDG_CONFIG_HOME": str(xdg)}
    assert config_path(None, env) is None, "no file: none is read"
    default.write_text("")
    assert config_path(None, env) == default
    assert config_path(None, {**env, "GROUNDWIRE_CONFIG": str(named)}) == named
    assert config_path(named, env) == named
    with pytest.raises(FileNotFoundError, match="no settings file at"):
        config_path(tmp_path / "missing.toml", env)


def test_home_is_the_variable_else_the_checkouts_var_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert checkout_root() == repo_root
    assert groundwire_home({}) == repo_root / "var"
    assert groundwire_home({"GROUNDWIRE_HOME": str(tmp_path / "h")}) == tmp_path / "h"


def test_up_says_which_of_your_settings_it_assigns(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "run", tmp_path / "m", tmp_path / "q")
    file = FileSettings(tables={"gateway": {"PORT": "9999", "CHAT_TIMEOUT_S": "5"}})
    cluster.file = file
    notes = cluster.overridden()
    assert notes == ["gateway GROUNDWIRE_GATEWAY_PORT=9999 (uses 8080)"]


def test_config_show_masks_secrets_and_says_where_each_value_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "groundwire.toml"
    config.write_text("[common]\nlog_level = 'DEBUG'\n[gateway]\nchat_timeout_s = 33\n")
    monkeypatch.setenv("GROUNDWIRE_GATEWAY_ADMIN_API_KEYS", "ops:very-secret-admin-key")
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as exited:
        main(["config", "show", "gateway", "--config", str(config)])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "very-secret-admin-key" not in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    assert lines["admin_api_keys"].split()[1:] == ["**********", "(environment)"]
    assert lines["chat_timeout_s"].split()[1:] == ["33.0", "(file)"]
    assert lines["log_level"].split()[1:] == ["DEBUG", "(file", "[common])"]
    assert lines["port"].split()[1:] == ["8080", "(groundwire", "up)"]
    assert lines["api_keys"].split()[1:] == ["(empty)", "(default)"]
    assert f"settings file: {config}" in out and "[orchestrator]" not in out


def test_a_setting_the_service_would_refuse_stops_up_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "groundwire-model.json").write_text("{}")
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GROUNDWIRE_GATEWAY_ADMIN_API_KEYS", "ops:short")
    with pytest.raises(SystemExit) as exited:
        main(["up", "--model-dir", str(model), "--free-ports"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "gateway would refuse its settings: admin_api_keys" in err
    assert "ops:short" not in err
    assert not (tmp_path / "home" / "run" / "logs").exists(), "no service was started"


def test_the_top_level_help_lists_every_command() -> None:
    parser = build_parser()
    text = parser.format_help()
    match = re.search(r"\{([a-z,]+)\}", parser.format_usage())
    assert match is not None
    commands = match.group(1).split(",")
    for name in commands:
        assert f"groundwire {name}" in (parser.description or ""), name
        assert name in text
    assert {"up", "down", "chat", "config", "load", "ingest"} <= set(commands)


def test_the_demo_reads_the_checkouts_samples_from_any_folder(repo_root: Path) -> None:
    from groundwire_cli.demo import DEFAULT_CORPUS, DEFAULT_QUESTIONS

    assert DEFAULT_CORPUS == repo_root / "samples" / "corpus" and DEFAULT_CORPUS.is_dir()
    assert DEFAULT_QUESTIONS.is_file()


def test_make_install_cli_links_the_command_and_says_when_path_lacks_it(
    tmp_path: Path, repo_root: Path
) -> None:
    bin_dir = tmp_path / "bin"
    done = subprocess.run(
        ["make", "-s", "-o", "setup", "install-cli", f"BIN={bin_dir}"],
        cwd=repo_root,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    link = bin_dir / "groundwire"
    assert link.resolve() == (repo_root / ".venv" / "bin" / "groundwire").resolve()
    assert f'export PATH="{bin_dir}:$PATH"' in done.stdout
    helped = subprocess.run([str(link), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "groundwire up" in helped.stdout
