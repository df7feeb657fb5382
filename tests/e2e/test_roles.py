"""Keys with roles (issue 53): a table walk of every served route and every side-effect
block with a key of each role and with none; expiry and removal; and an authenticating proxy
(a real nginx with ``auth_request``) whose user headers count only from its own address."""

from __future__ import annotations

import base64
import re
import socket
from datetime import UTC, datetime, timedelta

import cv2
import httpx
import numpy as np
import pytest

from streaming.access import BLOCKS, PUBLIC, ROUTES, Role, route_role
from streaming.server.keys import add_key, remove_key
from tests.conftest import DETECT_SPEC
from tests.support.auth_proxy import PROXY_ADDRESS, USERS, AuthProxy
from tests.support.server import running_server

pytestmark = pytest.mark.e2e

ROLES = (Role.VIEWER, Role.OPERATOR, Role.ADMIN)
_JPEG = cv2.imencode(".jpg", np.zeros((32, 32, 3), np.uint8))[1].tobytes()
# What the walk must not do with a right key: unload the models the other tests use.
DESTRUCTIVE = {("POST", "/model/clear")}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    directory = tmp_path_factory.mktemp("keys")
    keys_file = directory / "keys.json"
    keys = {role: add_key(keys_file, f"the-{role}", role, None) for role in ROLES}
    keys["expired"] = add_key(
        keys_file, "last-year", Role.ADMIN, datetime.now(UTC) - timedelta(days=1)
    )
    settings = {
        "auth_keys_file": str(keys_file),
        "auth_proxies": f"{PROXY_ADDRESS}/32",
        "auth_group_roles": "guards=viewer,ops=operator,admins=admin",
        "workflow_secrets": "CAMERA_TOKEN",
    }
    with running_server(**settings) as server:
        proxy = AuthProxy(directory, server.url)
        try:
            yield server, keys, keys_file, proxy
        finally:
            proxy.close()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _served(server, key: str) -> list[tuple[str, str]]:
    schema = httpx.get(f"{server.url}/openapi.json", headers=_bearer(key), timeout=10).json()
    return [(m.upper(), p) for p, ops in schema["paths"].items() for m in ops]


def _call(server, method: str, template: str, headers: dict[str, str]) -> httpx.Response:
    path = re.sub(r"\{[^}]+\}", "x", template)
    return httpx.request(method, server.url + path, json={}, headers=headers, timeout=30)


def test_every_route_answers_each_role_as_the_table_says(keyed):
    server, keys, _, _ = keyed
    served = _served(server, keys[Role.ADMIN])
    guarded = [r for r in served if r not in PUBLIC and r != ("GET", "/metrics")]
    assert len(guarded) > 40 and set(guarded) <= set(ROUTES), set(guarded) - set(ROUTES)
    wrong = []
    for method, template in guarded:
        if _call(server, method, template, {}).status_code != 401:
            wrong.append(("no key", method, template))
        for role in ROLES:
            if role == Role.ADMIN and (method, template) in DESTRUCTIVE:
                continue
            answer = _call(server, method, template, _bearer(keys[role]))
            needed = route_role(method, template)
            if role < needed and (answer.status_code != 403 or str(needed) not in answer.text):
                wrong.append((str(role), method, template, answer.status_code))
            if role >= needed and answer.status_code in (401, 403):
                wrong.append((str(role), method, template, answer.status_code, answer.text))
    assert wrong == []


def _run(server, key: str, spec: dict) -> httpx.Response:
    image = {"type": "base64", "value": base64.b64encode(_JPEG).decode()}
    return httpx.post(
        f"{server.url}/workflows/run",
        headers=_bearer(key),
        timeout=60,
        json={"specification": spec, "inputs": {"image": image}},
    )


def _block_spec(type_id: str) -> dict:
    fields = {
        "roboflow_core/email_notification@v2": {
            "subject": "s",
            "message": "m",
            "receiver_email": "a@example.test",
        },
        "roboflow_core/local_file_sink@v1": {
            "content": "$inputs.image",
            "output_mode": "append_log",
            "target_directory": "x",
        },
        "roboflow_core/environment_secrets_store@v1": {
            "variables_storing_secrets": ["CAMERA_TOKEN"]
        },
    }[type_id]
    output = {"type": "JsonField", "name": "o", "selector": "$inputs.image"}
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [{"type": type_id, "name": "s", **fields}],
        "outputs": [output],
    }


@pytest.mark.parametrize("rule", BLOCKS, ids=[rule.type_id for rule in BLOCKS])
def test_every_side_effect_block_needs_its_role(keyed, rule):
    server, keys, _, _ = keyed
    spec = _block_spec(rule.type_id)
    for role in ROLES:
        answer = _run(server, keys[role], spec)
        if role < Role.OPERATOR:  # running a workflow at all
            assert answer.status_code == 403 and "operator" in answer.text, answer.text
        elif role < rule.role:
            assert answer.status_code == 403, answer.text
            assert f"needs the {rule.role} role" in answer.json()["message"]
        else:
            assert answer.status_code != 403, answer.text  # its own settings may refuse it
    # The same holds for a pipeline, whose workflow compiles elsewhere.
    pipeline = server.start_pipeline("rtsp://127.0.0.1:9/none", spec, api_key=keys[Role.OPERATOR])
    assert pipeline.status_code == 403 and f"needs the {rule.role} role" in pipeline.text


def test_a_viewer_watches_and_starts_nothing(keyed):
    server, keys, _, _ = keyed
    viewer = _bearer(keys[Role.VIEWER])
    me = httpx.get(f"{server.url}/auth/me", headers=viewer, timeout=10).json()
    assert me == {
        "name": "the-viewer",
        "role": "viewer",
        "via": "key",
        "can": {"watch": True, "run": False, "admin": False},
    }
    offer = {
        "webrtc_offer": {"type": "offer", "sdp": "v=0\r\n"},
        "workflow_configuration": {
            "type": "WorkflowConfiguration",
            "workflow_specification": DETECT_SPEC,
        },
    }
    session = httpx.post(
        f"{server.url}/initialise_webrtc_worker", json=offer, headers=viewer, timeout=30
    )
    assert session.status_code == 403 and "runs a workflow" in session.json()["message"]
    watching = {**offer, "pipeline_id": "no-such-pipeline"}
    watching.pop("workflow_configuration")
    watched = httpx.post(
        f"{server.url}/initialise_webrtc_worker", json=watching, headers=viewer, timeout=30
    )
    assert watched.status_code not in (401, 403), watched.text  # may watch (none such here)
    for type_id in ("roboflow_core/environment_secrets_store@v1",):
        assert _run(server, keys[Role.VIEWER], _block_spec(type_id)).status_code == 403


def test_expired_and_removed_keys_stop_working(keyed, tmp_path):
    server, keys, keys_file, _ = keyed
    expired = httpx.get(f"{server.url}/models", headers=_bearer(keys["expired"]), timeout=10)
    assert expired.status_code == 401 and "expired" in expired.json()["message"]
    temporary = add_key(keys_file, "temporary", Role.VIEWER, None)
    assert httpx.get(f"{server.url}/models", headers=_bearer(temporary), timeout=10).is_success
    assert remove_key(keys_file, "temporary")
    gone = httpx.get(f"{server.url}/models", headers=_bearer(temporary), timeout=10)
    assert gone.status_code == 401  # read again at the next request: no restart
    assert "vs_" not in keys_file.read_text()  # stored hashed only


def _basic(user: str) -> tuple[str, str]:
    return user, USERS[user][0]


def test_the_proxys_users_get_their_groups_roles(keyed):
    *_, proxy = keyed
    for user, role in (("alice", "viewer"), ("oscar", "operator"), ("ada", "admin")):
        me = httpx.get(f"{proxy.url}/auth/me", auth=_basic(user), timeout=10)
        assert me.status_code == 200, me.text
        assert (me.json()["name"], me.json()["role"], me.json()["via"]) == (user, role, "proxy")
    run = httpx.post(
        f"{proxy.url}/workflows/run",
        auth=_basic("alice"),
        timeout=30,
        json={"specification": DETECT_SPEC, "inputs": {}},
    )
    assert run.status_code == 403 and "alice" in run.json()["message"]
    outsider = httpx.get(f"{proxy.url}/auth/me", auth=_basic("nina"), timeout=10)
    assert outsider.status_code == 403 and "VISIONSTREAM_AUTH_GROUP_ROLES" in outsider.text
    assert httpx.get(f"{proxy.url}/auth/me", auth=("ada", "wrong"), timeout=10).status_code == 401
    # A client sending the proxy's headers itself: nginx replaces them with the real user's.
    forged = {"X-Forwarded-User": "ada", "X-Forwarded-Groups": "admins"}
    me = httpx.get(f"{proxy.url}/auth/me", auth=_basic("alice"), headers=forged, timeout=10)
    assert me.json()["name"] == "alice" and me.json()["role"] == "viewer"


def test_proxy_headers_count_only_from_the_proxys_own_address(keyed):
    server, _, _, _ = keyed
    forged = (
        "GET /auth/me HTTP/1.1\r\nHost: x\r\nX-Forwarded-User: ada\r\n"
        "X-Forwarded-Groups: admins\r\nConnection: close\r\n\r\n"
    )
    for source, status in (("127.0.0.3", b" 401 "), (PROXY_ADDRESS, b" 200 ")):
        with socket.create_connection(
            ("127.0.0.1", server.port), timeout=30, source_address=(source, 0)
        ) as sock:
            sock.sendall(forged.encode())
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        assert status in answer.split(b"\r\n", 1)[0], (source, answer[:200])
