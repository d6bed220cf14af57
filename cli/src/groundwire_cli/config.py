"""Where the local cluster keeps its files, and the settings file it reads.

**Home** (models, the embedded store, logs): ``GROUNDWIRE_HOME``; else, when the
command runs from a source checkout, the checkout's ``var/`` (found from this
package's location, never from the current folder); else
``$XDG_DATA_HOME/groundwire`` (``~/.local/share/groundwire``).

**Settings file** (``groundwire.toml``): ``--config FILE``; else ``GROUNDWIRE_CONFIG``;
else ``$XDG_CONFIG_HOME/groundwire/groundwire.toml`` (``~/.config/groundwire/…``) when
it exists. One table per service, named as the service, with its settings' names in
lower case, and a ``[common]`` table applied to every service::

    [common]
    log_level = "INFO"

    [orchestrator]
    anthropic_api_key = "sk-ant-…"

    [reranker]
    model_dir = "models/reranker"   # relative paths: from the file's folder

A service's setting comes from, first to last: a flag of ``groundwire up``
(``--model-dir``, ``--data-path``), the environment (``GROUNDWIRE_<SERVICE>_<NAME>``),
the file's service table, its ``[common]`` table, the service's default. The
cluster itself assigns what it must (host, port, peer addresses, the ready file).
"""

from __future__ import annotations

import difflib
import importlib
import json
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, SecretStr, ValidationError

from groundwire_core.errors import InvalidInput

SERVICES = ("embedder", "reranker", "retriever", "orchestrator", "gateway")
COMMON = "common"
SYNC_TABLE = "sync"
CONFIG_NAME = "groundwire.toml"
_PATH_SUFFIXES = ("_dir", "_path", "_file")
"""Settings whose relative values in the file are taken from the file's folder."""
_PATH_LIST_SUFFIXES = ("_roots",)
"""The same for each path of a list setting (``sync_roots``)."""


def prefix(service: str) -> str:
    """The environment prefix of a service's settings: ``GROUNDWIRE_ORCHESTRATOR_``."""
    return f"GROUNDWIRE_{service.upper()}_"


def service_of(variable: str) -> str | None:
    """The service whose setting ``variable`` is, or None for any other variable."""
    return next((s for s in SERVICES if variable.startswith(prefix(s))), None)


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None when it is installed."""
    root = Path(__file__).resolve().parents[3]
    if (root / "cli" / "pyproject.toml").is_file() and (root / "services").is_dir():
        return root
    return None


def groundwire_home(environ: Mapping[str, str]) -> Path:
    """The folder that holds models/, qdrant/ and run/ (see the module's docstring)."""
    if environ.get("GROUNDWIRE_HOME"):
        return Path(environ["GROUNDWIRE_HOME"]).expanduser().resolve()
    root = checkout_root()
    if root is not None:
        return root / "var"
    data = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser().resolve() / "groundwire"


def default_model_dir(environ: Mapping[str, str]) -> Path:
    """The offline MiniLM model's folder under the home, from any working folder."""
    return groundwire_home(environ) / "models" / "minilm"


def config_path(explicit: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The settings file to read, or None when there is none. Raises FileNotFoundError
    when one named by ``--config`` or ``GROUNDWIRE_CONFIG`` does not exist."""
    named = explicit
    if named is None and environ.get("GROUNDWIRE_CONFIG"):
        named = Path(environ["GROUNDWIRE_CONFIG"])
    if named is not None:
        named = named.expanduser()
        if not named.is_file():
            raise FileNotFoundError(f"no settings file at {named}")
        return named.resolve()
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    default = Path(base).expanduser() / "groundwire" / CONFIG_NAME
    return default.resolve() if default.is_file() else None


@dataclass(frozen=True)
class FileSettings:
    """The settings file, read: per table (a service or ``common``), the environment
    value of each setting, keyed by its upper-case name."""

    path: Path | None = None
    tables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def for_service(self, service: str) -> dict[str, str]:
        """The file's settings of ``service``: ``[common]``, then its own table over it."""
        return {**self.tables.get(COMMON, {}), **self.tables.get(service, {})}


def _env_value(value: Any) -> str:
    """A TOML value as the environment spells it (pydantic-settings parses it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, default=str)


def load_file(path: Path | None) -> FileSettings:
    """Reads the settings file. Raises InvalidInput for bad TOML, an unknown table, a
    value that is a table, or (when the services' settings classes are importable) a
    setting the service does not have."""
    if path is None:
        return FileSettings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"{path} is not valid TOML: {error}") from None
    tables: dict[str, dict[str, str]] = {}
    for table, values in data.items():
        if table == SYNC_TABLE:  # `groundwire sync`'s source definitions: cli sync.py reads them
            continue
        if table not in (COMMON, *SERVICES) or not isinstance(values, dict):
            raise InvalidInput(
                f"{path}: unknown table or top-level key {table!r}; the file has one table "
                f"per service ({', '.join(SERVICES)}) and [common]"
            )
        out: dict[str, str] = {}
        for key, value in values.items():
            if isinstance(value, dict):
                raise InvalidInput(f"{path}: [{table}] {key} is a table; settings are values")
            _check_known(path, table, key)
            text = _env_value(value)
            if key.endswith(_PATH_SUFFIXES) and isinstance(value, str) and value:
                candidate = Path(value).expanduser()
                text = str(candidate if candidate.is_absolute() else path.parent / candidate)
            elif key.endswith(_PATH_LIST_SUFFIXES) and isinstance(value, list):
                paths = [Path(str(v)).expanduser() for v in value]
                text = json.dumps([str(p if p.is_absolute() else path.parent / p) for p in paths])
            out[key.upper()] = text
        tables[table] = out
    return FileSettings(path, tables)


def _check_known(path: Path, table: str, key: str) -> None:
    names = [
        set(cls.model_fields)
        for s in (SERVICES if table == COMMON else (table,))
        if (cls := settings_class(s)) is not None
    ]
    if not names:
        return  # the services are not installed beside the CLI: nothing to check against
    # a [common] setting must exist in at least one service (log_level exists in all)
    if any(key in n for n in names):
        return
    known = sorted(set().union(*names))
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidInput(f"{path}: [{table}] has no setting {key!r}{hint}")


def user_settings(service: str, environ: Mapping[str, str], file: FileSettings) -> dict[str, str]:
    """The user's settings of one service (upper-case names without the prefix): the
    file's, with the environment's over them."""
    own = prefix(service)
    settings = file.for_service(service)
    settings.update({k[len(own) :]: v for k, v in environ.items() if k.startswith(own)})
    return settings


def resolve_path(
    flag: Path | None,
    service: str,
    name: str,
    environ: Mapping[str, str],
    file: FileSettings,
    default: Path,
) -> Path:
    """A path setting by flag > environment > file > default."""
    if flag is not None:
        return flag
    value = user_settings(service, environ, file).get(name.upper())
    return Path(value).expanduser() if value else default


def settings_class(service: str) -> Any | None:
    """The service's pydantic settings class, or None when it is not installed here."""
    try:
        module = importlib.import_module(f"groundwire_{service}.settings")
    except ImportError:
        return None
    return next(
        (
            obj
            for obj in vars(module).values()
            if isinstance(obj, type)
            and issubclass(obj, BaseModel)
            and obj.__module__ == module.__name__
            and obj.__name__.endswith("Settings")
            and obj.model_config.get("env_prefix") == prefix(service)
        ),
        None,
    )


class _Cluster(Protocol):
    """What the effective settings are read from (a LocalCluster, not started)."""

    file: FileSettings

    def assigned(self, name: str) -> dict[str, str]: ...

    def user_settings(self, name: str) -> dict[str, str]: ...


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    origin: str
    """default, file, file [common], environment, or groundwire up (assigned)."""


def _origin(service: str, key: str, cluster: _Cluster, environ_keys: set[str]) -> str:
    if key in cluster.assigned(service):
        return "groundwire up"
    if prefix(service) + key in environ_keys:
        return "environment"
    if key in cluster.file.tables.get(service, {}):
        return "file"
    if key in cluster.file.tables.get(COMMON, {}):
        return "file [common]"
    return "default"


def _values(service: str, cluster: _Cluster) -> dict[str, str]:
    """The child's settings as `up` passes them (names in lower case)."""
    merged = {**cluster.user_settings(service), **cluster.assigned(service)}
    return {k.lower(): v for k, v in merged.items()}


def _as_child_reads(cls: Any, values: dict[str, str]) -> dict[str, Any]:
    """``values`` as the child's environment source reads them: a list or table
    setting (``sync_roots``) is JSON in its variable, so it is decoded here too (as
    keyword arguments the text would be refused: "Input should be a valid tuple")."""
    out: dict[str, Any] = dict(values)
    for name, value in values.items():
        info = cls.model_fields.get(name)
        if info is not None and _is_collection(info.annotation):
            try:
                out[name] = json.loads(value)
            except json.JSONDecodeError:
                pass  # left as text: the settings class names the setting it refuses
    return out


def _is_collection(annotation: Any) -> bool:
    """A list, tuple, set or dict type (or an optional one)."""
    kinds = (list, tuple, set, frozenset, dict)
    if annotation in kinds or typing.get_origin(annotation) in kinds:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_collection(a) for a in typing.get_args(annotation) if a is not type(None))
    return False


def _instance(service: str, cls: Any, cluster: _Cluster) -> Any:
    """The service's settings object as the child will build it. Raises InvalidInput
    naming each setting the service would refuse (never echoing its value)."""
    try:
        return cls(**_as_child_reads(cls, _values(service, cluster)))
    except ValidationError as error:
        reasons = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        )
        raise InvalidInput(f"{service} would refuse its settings: {reasons}") from None


def validate(cluster: _Cluster) -> None:
    """Checks every service's settings before any starts, where the services' settings
    classes are importable. Raises InvalidInput naming the service and the setting."""
    for service in SERVICES:
        cls = settings_class(service)
        if cls is not None:
            _instance(service, cls, cluster)


def effective(service: str, cluster: _Cluster, environ: Mapping[str, str]) -> list[Setting]:
    """Every setting of ``service`` under `groundwire up`, secrets masked: all of the
    settings class's fields with their defaults when it is importable, else only the
    settings given. Raises InvalidInput when the service would refuse them."""
    keys = set(environ)
    cls = settings_class(service)
    if cls is None:
        return [
            Setting(
                k,
                _MASK if _looks_secret(k) else masked_credentials(v),
                _origin(service, k.upper(), cluster, keys),
            )
            for k, v in sorted(_values(service, cluster).items())
        ]
    instance = _instance(service, cls, cluster)
    out = []
    for name in cls.model_fields:
        value = getattr(instance, name)
        if isinstance(value, SecretStr):
            shown = _MASK if value.get_secret_value() else "(empty)"
        else:
            shown = "(unset)" if value is None else masked_credentials(str(value))
        out.append(Setting(name, shown, _origin(service, name.upper(), cluster, keys)))
    return out


_MASK = "**********"


_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^@/\s?#]+)@")
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;][^=&;\s]*(?:key|secret|token|password|passwd|pwd)[^=&;\s]*=)[^&;\s]*",
    re.IGNORECASE,
)


def masked_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden (#31: `config show`
    printed the passwords inside ``redis_url``, ``qdrant_url``, ``openai_base_url``):
    a password after ``user:`` masked (the user kept, to tell accounts apart), a
    userinfo without one (a token as the user) masked whole, and query parameters
    named like a key, secret, token or password masked."""

    def userinfo(match: re.Match[str]) -> str:
        user, colon, _ = match["info"].partition(":")
        return f"{match['scheme']}{user}:{_MASK}@" if colon else f"{match['scheme']}{_MASK}@"

    return _SECRET_PARAM.sub(lambda m: m["name"] + _MASK, _USERINFO.sub(userinfo, text))


def _looks_secret(name: str) -> bool:
    return any(word in name.upper() for word in ("KEY", "SECRET", "TOKEN", "PASSWORD"))


def render(cluster: _Cluster, service: str | None, environ: Mapping[str, str]) -> str:
    """`groundwire config show`: per service, each setting, its value and its origin."""
    where = cluster.file.path or "none"
    lines = [f"# settings file: {where}"]
    for name in (service,) if service else SERVICES:
        settings = effective(name, cluster, environ)
        width = max((len(s.name) for s in settings), default=0)
        lines.append(f"\n[{name}]  (environment prefix {prefix(name)})")
        lines += [f"  {s.name:<{width}}  {s.value}  ({s.origin})" for s in settings]
    return "\n".join(lines)
