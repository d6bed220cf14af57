"""End-user tokens: HS256 with a shared secret, RS256 with a PEM key, ES256 from a
JWKS file; expiry, audience and issuer checked; every refusal a 401 that leaks nothing
of the token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from groundwire_core.errors import BackendFailure, Unauthenticated
from groundwire_gateway.end_users import EndUser, EndUserVerifier, identity_for
from groundwire_gateway.settings import GatewaySettings


def verify_end_user(token: str, settings: GatewaySettings) -> EndUser:
    return EndUserVerifier(settings).verify(token)

SECRET = "s3cret-shared-with-the-app-0123456789abcdef"
AUD = "groundwire"


def _claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {"sub": "bob", "groups": ["eng", "ops"], "aud": AUD, "exp": now + 60}
    claims.update(over)
    return {k: v for k, v in claims.items() if v is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hmac_signed(claims: dict[str, Any], secret: bytes) -> str:
    """An HS256 token signed by hand (PyJWT refuses a PEM key as an HMAC secret)."""
    header = json.dumps({"alg": "HS256", "typ": "JWT"}).encode()
    signing_input = f"{_b64(header)}.{_b64(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def _hs(**over: Any) -> str:
    return jwt.encode(_claims(**over), SECRET, algorithm="HS256")


HS = GatewaySettings(user_token_secret=SECRET, user_token_issuer="https://idp.example")


def test_hs256_token_gives_user_and_groups() -> None:
    user = verify_end_user(_hs(iss="https://idp.example"), HS)
    assert user == EndUser("bob", frozenset({"eng", "ops"}))
    identity = identity_for("acme", user, unrestricted=False)
    assert identity.access() == ("public", "user:bob", "group:eng", "group:ops")


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: _hs(iss="https://idp.example", exp=int(time.time()) - 3600), "expired"),
        (lambda: _hs(iss="https://idp.example", aud="another-service"), "audience"),
        (lambda: _hs(iss="https://evil.example"), "issuer"),
        (lambda: _hs(iss="https://idp.example", exp=None), "'exp'"),
        (lambda: _hs(iss="https://idp.example", sub=None), "no user id"),
        (
            lambda: jwt.encode(
                _claims(iss="https://idp.example"),
                "a-guessed-secret-that-is-long-enough-0123456789",
                "HS256",
            ),
            "signature",
        ),
        (lambda: jwt.encode(_claims(), None, algorithm="none"), "algorithm"),
        (lambda: "not.a.jwt", "malformed"),
    ],
    ids=[
        "expired",
        "wrong-audience",
        "wrong-issuer",
        "no-exp",
        "no-sub",
        "forged",
        "alg-none",
        "garbage",
    ],
)
def test_refusals_name_the_check_and_nothing_else(
    make: Callable[[], str], reason: str
) -> None:
    token = make()  # built when the test runs: its 'exp' is an offset from now
    with pytest.raises(Unauthenticated) as refused:
        verify_end_user(token, HS)
    message = refused.value.message
    assert reason in message
    for leaked in ("bob", "eng", token[:20], SECRET):
        assert leaked not in message


def test_no_key_configured_refuses_every_token() -> None:
    with pytest.raises(Unauthenticated, match="no verification key"):
        verify_end_user(_hs(), GatewaySettings())


def test_rs256_with_a_pem_key_and_no_hmac_confusion(tmp_path: Path) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "idp.pem").write_bytes(pem)
    settings = GatewaySettings(user_token_key_file=str(tmp_path / "idp.pem"))
    token = jwt.encode(_claims(), private, algorithm="RS256")
    assert verify_end_user(token, settings).user == "bob"
    # the classic confusion: the public key used as an HS256 secret
    confused = _hmac_signed(_claims(), pem)
    with pytest.raises(Unauthenticated):
        verify_end_user(confused, settings)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthenticated, match="signature"):
        verify_end_user(jwt.encode(_claims(), other, algorithm="RS256"), settings)


def test_es256_from_a_jwks_file_picks_the_key_by_kid(tmp_path: Path) -> None:
    keys = {kid: ec.generate_private_key(ec.SECP256R1()) for kid in ("k1", "k2")}
    jwks = {
        "keys": [
            {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(k.public_key())), "kid": kid}
            for kid, k in keys.items()
        ]
    }
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    settings = GatewaySettings(user_token_key_file=str(tmp_path / "jwks.json"))
    token = jwt.encode(_claims(groups="eng"), keys["k2"], algorithm="ES256", headers={"kid": "k2"})
    assert verify_end_user(token, settings) == EndUser("bob", frozenset({"eng"}))
    wrong = jwt.encode(_claims(), keys["k1"], algorithm="ES256", headers={"kid": "k2"})
    with pytest.raises(Unauthenticated, match="signature"):
        verify_end_user(wrong, settings)
    unknown = jwt.encode(_claims(), keys["k1"], algorithm="ES256", headers={"kid": "k9"})
    with pytest.raises(Unauthenticated, match="unknown key"):
        verify_end_user(unknown, settings)


def test_an_unreadable_key_file_is_a_server_error_not_a_401(tmp_path: Path) -> None:
    settings = GatewaySettings(user_token_key_file=str(tmp_path / "missing.pem"))
    token = jwt.encode(_claims(), ec.generate_private_key(ec.SECP256R1()), algorithm="ES256")
    with pytest.raises(BackendFailure, match="key file"):
        verify_end_user(token, settings)
