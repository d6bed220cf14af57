"""The environment a child service of the local cluster starts with.

The one place the CLI reads its own environment: a child inherits it (PATH, locale,
proxies, GROUNDWIRE_* settings of other services), minus any setting with its own
prefix, which the cluster decides; then the caller's overrides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def child_environment(
    prefix: str, settings: Mapping[str, str], overrides: Mapping[str, str]
) -> dict[str, str]:
    """``settings`` (keys without ``prefix``) over the inherited environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    env.update({prefix + k: v for k, v in settings.items()})
    env.update(overrides)
    env["PYTHONUNBUFFERED"] = "1"
    return env
