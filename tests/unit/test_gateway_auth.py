"""The gateway's identity rules: tokens -> users, workspaces -> users, where it may listen."""

from __future__ import annotations

import pytest

from trustgraph_flow.gateway.auth import (
    AccessDenied,
    Auth,
    AuthConfigError,
    bearer_token,
    check_bind,
    load_tokens,
    make_auth,
)
from trustgraph_flow.gateway.limits import Limits
from trustgraph_flow.gateway.wire import GatewayRequestError

pytestmark = pytest.mark.unit

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"


def test_open_mode_maps_default_to_the_default_user_and_other_workspaces_to_their_user():
    auth = Auth(default_user="trustgraph")
    assert not auth.required
    assert auth.principal("") is None and auth.principal("anything") is None
    assert auth.user_for(None, "default") == "trustgraph"
    assert auth.user_for(None, None) == "trustgraph"
    assert auth.user_for(None, "alice") == "alice"
    with pytest.raises(GatewayRequestError, match="invalid workspace"):
        auth.user_for(None, "../etc")


def test_a_token_is_one_user_and_grants_no_other_workspace():
    auth = Auth(((ALICE, "alice"), (BOB, "bob")))
    assert auth.required
    assert auth.principal(ALICE) == "alice" and auth.principal(BOB) == "bob"
    for bad in (None, "", "alice", ALICE + "x", BOB[:-1]):
        with pytest.raises(AccessDenied):
            auth.principal(bad)
    assert auth.user_for("alice", "default") == "alice"
    assert auth.user_for("alice", "alice") == "alice"
    with pytest.raises(AccessDenied) as e:
        auth.user_for("alice", "bob")
    assert e.value.error_type == "gateway-error"


def test_tokens_file(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"# user token\nalice {ALICE}\n\nbob {BOB}  # second\nalice {ALICE}-2\n")
    assert load_tokens(path) == [(ALICE, "alice"), (BOB, "bob"), (ALICE + "-2", "alice")]
    auth = make_auth("trustgraph", "default-token-0123456789", path)
    assert auth.principal("default-token-0123456789") == "trustgraph"
    assert auth.principal(ALICE + "-2") == "alice"


@pytest.mark.parametrize("text, words", [
    (f"alice {ALICE} extra\n", "USER TOKEN"), ("alice short\n", "shorter than"),
    (f"../x {ALICE}\n", "invalid user name"), (f"alice {ALICE}\nbob {ALICE}\n", "two users"),
])
def test_bad_tokens_files_are_refused(tmp_path, text, words):
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(AuthConfigError, match=words):
        make_auth(tokens_file=path)


def test_unreadable_tokens_file_is_refused(tmp_path):
    with pytest.raises(AuthConfigError, match="cannot read"):
        load_tokens(tmp_path / "missing")


def test_bearer_header():
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None and bearer_token(None) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_tokens(host):
    check_bind(host, Auth())


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org"])
def test_listening_beyond_loopback_needs_tokens(host):
    with pytest.raises(AuthConfigError, match="not a loopback address"):
        check_bind(host, Auth())
    check_bind(host, Auth(((ALICE, "alice"),)))


def test_limits_are_checked():
    assert Limits().max_outstanding == 15
    with pytest.raises(ValueError):
        Limits(max_outstanding=0)
    with pytest.raises(ValueError):
        Limits(max_frame_bytes=10)


def test_a_tracing_ui_url_is_an_http_url_naming_the_trace_id_once():
    from trustgraph_flow.gateway.service import check_tracing_ui_url

    assert check_tracing_ui_url("") == ""
    assert check_tracing_ui_url("http://127.0.0.1:16686/trace/{trace_id}") == "http://127.0.0.1:16686/trace/{trace_id}"
    for bad in ("javascript:alert(1)//{trace_id}", "http://x/trace", "http://x/{trace_id}/{trace_id}",
                "/trace/{trace_id}", "ftp://x/{trace_id}"):
        with pytest.raises(ValueError, match="tracing-ui-url"):
            check_tracing_ui_url(bad)
