"""End users: the signed token an application passes for the person it asks for.

An application in front of Groundwire sends ``X-Groundwire-User-Token: <JWT>`` next
to its API key. The token is verified with PyJWT (a kept library: the algorithm
confusions and claim checks of JWT are easy to get wrong by hand) against what the
operator configured: an HS256 shared secret, or RS256/ES256 public keys from a PEM
file or a JWKS file. Expiry and audience are always checked, the issuer when one is
configured. The verified claims give the user id and groups that the retriever's
access lists are matched against (``groundwire_core.identity``).

Every refusal is ``Unauthenticated`` (401) with a message naming the failed check and
nothing from the token itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from groundwire_core.errors import BackendFailure, Unauthenticated
from groundwire_core.identity import Identity
from groundwire_gateway.settings import GatewaySettings

log = logging.getLogger("groundwire.gateway.end_users")

USER_TOKEN_HEADER = "x-groundwire-user-token"

_SYMMETRIC = ("HS256",)
_ASYMMETRIC = ("RS256", "ES256")


@dataclass(frozen=True)
class EndUser:
    """The person a request is made for, from a verified token."""

    user: str
    groups: frozenset[str]


class EndUserVerifier:
    """Checks end-user tokens against the configured keys.

    Construction reads nothing; the key file is read on the first token (or by
    :meth:`load`), so a gateway without end users never touches it.
    """

    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._keys: dict[str, Any] | None = None  # kid ("" = the only key) -> key

    @property
    def enabled(self) -> bool:
        s = self._settings
        return bool(s.user_token_secret.get_secret_value() or s.user_token_key_file)

    def load(self) -> None:
        """Read the public key file. Raises ``OSError``, ``ValueError`` or
        ``jwt.PyJWTError`` for an unreadable or malformed file: a configuration error,
        met on the first RS256/ES256 token (or at start-up where the gateway calls
        this)."""
        keys: dict[str, Any] = {}
        path = self._settings.user_token_key_file
        if path:
            text = Path(path).read_text(encoding="utf-8")
            if text.lstrip().startswith("{"):
                for key in jwt.PyJWKSet.from_dict(json.loads(text)).keys:
                    keys[key.key_id or ""] = key.key
            else:
                keys[""] = text
        self._keys = keys

    def verify(self, token: str) -> EndUser:
        """The end user a token names. Raises ``Unauthenticated`` when it is
        malformed, signed with a key or algorithm not configured, expired, not yet
        valid, for another audience or issuer, or carries no user id."""
        if not self.enabled:
            raise Unauthenticated(
                "end-user tokens are not accepted here: no verification key is configured"
            )
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the user token is malformed") from None
        algorithm = str(header.get("alg", ""))
        key = self._key_for(algorithm, str(header.get("kid") or ""))
        s = self._settings
        try:
            claims: Mapping[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=s.user_token_audience,
                issuer=s.user_token_issuer or None,
                leeway=s.user_token_leeway_s,
                options={"require": ["exp", "aud"]},
            )
        except jwt.PyJWTError as error:
            raise Unauthenticated(_reason(error)) from None
        user = claims.get(s.user_token_user_claim)
        if not isinstance(user, str) or not user.strip():
            raise Unauthenticated("the user token carries no user id")
        raw_groups = claims.get(s.user_token_groups_claim) or []
        if isinstance(raw_groups, str):
            raw_groups = [raw_groups]
        if not isinstance(raw_groups, list):
            raise Unauthenticated("the user token's groups claim is not a list")
        groups = frozenset(str(g) for g in raw_groups if str(g).strip())
        return EndUser(user=user.strip(), groups=groups)

    def _key_for(self, algorithm: str, kid: str) -> Any:
        # The key follows the algorithm the operator configured for it, never the
        # token's say-so: an RSA public key is never tried as an HMAC secret.
        if algorithm in _SYMMETRIC:
            secret = self._settings.user_token_secret.get_secret_value()
            if secret:
                return secret
        elif algorithm in _ASYMMETRIC and self._settings.user_token_key_file:
            if self._keys is None:
                try:
                    self.load()
                except (OSError, ValueError, jwt.PyJWTError):
                    log.exception("the end-user key file cannot be read")
                    raise BackendFailure(
                        "end-user tokens cannot be checked: the key file is unreadable "
                        "(GROUNDWIRE_GATEWAY_USER_TOKEN_KEY_FILE)"
                    ) from None
            assert self._keys is not None
            key = self._keys.get(kid)
            if key is None and len(self._keys) == 1:  # a single key needs no kid
                key = next(iter(self._keys.values()))
            if key is not None:
                return key
            raise Unauthenticated("the user token is signed with an unknown key")
        raise Unauthenticated("the user token's signing algorithm is not accepted")


def _reason(error: jwt.PyJWTError) -> str:
    if isinstance(error, jwt.ExpiredSignatureError):
        return "the user token has expired"
    if isinstance(error, jwt.ImmatureSignatureError):
        return "the user token is not valid yet"
    if isinstance(error, jwt.InvalidAudienceError):
        return "the user token is not meant for this service (audience)"
    if isinstance(error, jwt.InvalidIssuerError):
        return "the user token's issuer is not accepted"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"the user token lacks the required claim {error.claim!r}"
    if isinstance(error, jwt.InvalidSignatureError):
        return "the user token's signature is not valid"
    return "the user token is not valid"


def identity_for(tenant: str, end_user: EndUser | None, *, unrestricted: bool) -> Identity:
    """What travels down the hops for a caller: its tenant, its end user if any, and
    whether it sees every document (a tenant admin or the operator)."""
    return Identity(
        tenant=tenant,
        user=end_user.user if end_user else "",
        groups=end_user.groups if end_user else frozenset(),
        unrestricted=unrestricted,
    )
