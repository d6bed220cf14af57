"""The environment a child service of the local cluster starts with.

The one place the CLI reads its own environment (``user_environment``). A child
gets the variables that belong to no service (PATH, locale, proxies,
``GROUNDWIRE_HOME``…), its own settings — the user's, from the environment over the
settings file — then what the cluster assigns (host, port, peer addresses, the ready
file), then the caller's overrides that are its own. It never gets another service's
``GROUNDWIRE_<SERVICE>_*`` variables: the gateway's admin keys have no business in
the embedder's environment, nor the orchestrator's API key in the gateway's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from groundwire_cli.config import prefix, service_of


def user_environment() -> Mapping[str, str]:
    """The environment the command was started with."""
    return os.environ


def child_environment(
    service: str,
    environ: Mapping[str, str],
    settings: Mapping[str, str],
    assigned: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The child's environment: ``environ`` without any service's settings, then
    ``settings`` (the user's, names without the prefix), then ``assigned`` (the
    cluster's, names without the prefix), then the ``overrides`` (full names) that
    are not another service's."""
    own = prefix(service)
    env = {k: v for k, v in environ.items() if service_of(k) is None}
    env.update({own + k: v for k, v in settings.items()})
    env.update({own + k: v for k, v in assigned.items()})
    env.update({k: v for k, v in (overrides or {}).items() if service_of(k) in (None, service)})
    env["PYTHONUNBUFFERED"] = "1"
    return env
