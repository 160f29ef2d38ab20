"""One policy, every face: the same bad request (no token, a token without the grant, an object that is not
committed, storage that does not answer) sent to a real server through the smart protocol (WebSocket), REST,
Delta Sharing and the web view gets the same decision on each, rendered in each face's own shape: the
typed ErrorCode (WebSocket Error / REST body), the HTTP status REST answers for it, Delta Sharing's
errorCode, the web view's page status. A token past its expiry is refused the same way on every face (and
on /metrics and by a following, announcing peer's session), saying when it expired."""

from __future__ import annotations

import calendar
import hashlib
import math
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import orjson
import pytest
from requests import HTTPError

from smart_transfer.protocol.codes import HTTP_STATUS, ErrorCode
from tests.conftest import CLI, ServerProcess, free_port, run_cli, start_server, summary
from tests.integration.test_security import error_of, token, ws
from tests.slices import add_slices

TABLE = "/delta-sharing/shares/smart-transfer/schemas/datasets/tables"
#: Delta Sharing's errorCode for each decision (its PROTOCOL.md's names).
SHARING_CODE = {
    ErrorCode.UNAUTHORIZED: "UNAUTHENTICATED",
    ErrorCode.FORBIDDEN: "PERMISSION_DENIED",
    ErrorCode.STORAGE_UNAVAILABLE: "SERVICE_UNAVAILABLE",
}
#: Bound on one HTTP request of these tests (seconds).
REQUEST_SECONDS = 30.0
#: A data object no dataset holds (the hash of b"x").
FOREIGN = "f1220" + "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"


@dataclass
class Faces:
    """One server, one dataset on it, and the credentials each case sends."""

    server: ServerProcess
    dataset: str
    tokens: dict[str, str]
    tokens_file: Path | None = None

    def smart(self, secret: str | None, asks: bool) -> dict[str, Any]:
        """The Error a pull session of the dataset ends with: right after the handshake (the guard), or
        once it ``asks`` for a plan (the store)."""
        with ws(self.server, f"/{self.dataset}/pull", secret) as connection:
            if asks:
                connection.send('{"type": "DatasetPullRequest"}')
            return error_of(connection)

    def rest(self, secret: str | None, path: str = "/refs/head") -> httpx.Response:
        return httpx.get(f"{self.server.url}/{self.dataset}{path}", headers=_bearer(secret), timeout=REQUEST_SECONDS)

    def sharing(self, secret: str | None) -> httpx.Response:
        url = f"{self.server.url}{TABLE}/{self.dataset}/metadata"
        return httpx.get(url, headers=_bearer(secret), timeout=REQUEST_SECONDS)

    def web_view(self, secret: str | None) -> httpx.Response:
        cookies = {"smart_transfer_token": secret} if secret else None
        return httpx.get(f"{self.server.url}/ui/datasets/{self.dataset}", cookies=cookies, timeout=REQUEST_SECONDS)

    def decide(self, secret: str | None, code: ErrorCode, asks: bool = False) -> None:
        """Every face refuses ``secret``'s read of the dataset with ``code``."""
        status = HTTP_STATUS[code]
        assert self.smart(secret, asks)["code"] == code.value
        rest = self.rest(secret)
        assert (rest.status_code, rest.json()["error"]["code"]) == (status, code.value)
        sharing = self.sharing(secret)
        assert (sharing.status_code, sharing.json()["errorCode"]) == (status, SHARING_CODE[code])
        page = self.web_view(secret)
        assert page.status_code == status and "Traceback" not in page.text
        assert page.headers["content-type"].startswith("text/html")


def _bearer(secret: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"} if secret else {}


#: When the fixture's expired token expired.
EXPIRED_AT = "2020-01-01T00:00:00Z"


def with_expiry(tokens: Path, subject: str, expires: str, *grants: str) -> str:
    """A token added to the tokens file by hand, with ``expires`` as written (a past one ``token add`` refuses)."""
    secret = f"st_{secrets.token_urlsafe(32)}"
    document = orjson.loads(tokens.read_bytes())
    entry = {"subject": subject, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "expires": expires}
    document["tokens"].append({**entry, "read": list(grants)})
    tokens.write_bytes(orjson.dumps(document))
    return secret


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    """A server with a tokens file (reader: everything, outsider: another dataset) and one pushed dataset."""
    root = tmp_path_factory.mktemp("one-policy")
    tokens = root / "tokens.json"
    secret = {
        "writer": token(tokens, "writer", "--write", "*"),
        "reader": token(tokens, "reader", "--read", "*"),
        "outsider": token(tokens, "outsider", "--read", "elsewhere"),
        "lasting": token(tokens, "lasting", "--read", "*", "--expires", "1h"),
    }
    secret["expired"] = with_expiry(tokens, "expired", EXPIRED_AT, "*")
    server = start_server(root / "server", "--tokens", str(tokens), "--keepalive-interval", "1")
    try:
        name = f"policy-{secrets.token_hex(3)}"
        workspace = root / "ws"
        add_slices(workspace, name, root / "in", [3, 2])  # Parquet: a Delta Sharing table too
        pushed = run_cli("push", name, f"{server.url}/{name}", "--token", secret["writer"], workspace=workspace)
        assert pushed.returncode == 0, pushed.stderr
        yield Faces(server, name, secret, tokens)
    finally:
        server.stop()


def test_no_token_is_unauthorized_on_every_face(faces: Faces) -> None:
    faces.decide(None, ErrorCode.UNAUTHORIZED)
    page = faces.web_view(None)
    assert 'id="token"' in page.text  # the web view renders 401 as its sign-in form
    assert faces.rest(None).headers["www-authenticate"].startswith("Bearer")
    assert faces.sharing(None).headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_token_is_unauthorized_on_every_face(faces: Faces) -> None:
    faces.decide("st_not-a-token", ErrorCode.UNAUTHORIZED)


def test_a_token_without_the_grant_is_forbidden_on_every_face(faces: Faces) -> None:
    faces.decide(faces.tokens["outsider"], ErrorCode.FORBIDDEN)
    # and the grant it has passes the same guard everywhere (the refusal was the grant, not the token)
    assert faces.rest(faces.tokens["reader"]).status_code == 200
    assert faces.sharing(faces.tokens["reader"]).status_code == 200
    assert faces.web_view(faces.tokens["reader"]).status_code == 200
    assert "Traceback" not in "".join(faces.server.output)


def test_an_object_that_is_not_committed_gets_no_url_on_any_face(faces: Faces) -> None:
    """The faces that can name an object (a pull page, a REST read) get the signer's one refusal; Delta
    Sharing and the web view name tables and datasets, whose files come from the committed chain."""
    reader = faces.tokens["reader"]
    with ws(faces.server, f"/{faces.dataset}/pull", reader) as connection:
        connection.send('{"type": "DatasetPullRequest"}')
        assert orjson.loads(connection.recv(timeout=10))["type"] == "DatasetPullResponse"
        connection.send('{"type": "DatasetPullMetadataRequest"}')
        assert isinstance(connection.recv(timeout=10), bytes)
        foreign = {"kind": "data", "physical_hash": FOREIGN, "size": 1}
        connection.send(orjson.dumps({"type": "DatasetPullObjectsTransferRequest", "object_files": [foreign]}).decode())
        refused = error_of(connection)
    assert refused["code"] == ErrorCode.OBJECT_NOT_FOUND.value and FOREIGN in refused["message"]
    for redirect in ("true", "false"):
        answer = faces.rest(reader, f"/data/{FOREIGN}?redirect={redirect}")
        assert answer.status_code == HTTP_STATUS[ErrorCode.OBJECT_NOT_FOUND]
        assert answer.json()["error"]["code"] == ErrorCode.OBJECT_NOT_FOUND.value


@pytest.fixture
def storage_down(server_factory: Any) -> Faces:
    """A server whose S3 endpoint refuses every connection (nothing listens there), one attempt per call."""
    dead = f"http://127.0.0.1:{free_port()}"
    server: ServerProcess = server_factory(
        "--s3-endpoint",
        dead,
        "--s3-bucket",
        "nowhere",
        "--s3-attempts",
        "1",
        "--s3-connect-timeout",
        "2",
        env={"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
    )
    return Faces(server, "anything", {})


def test_storage_that_does_not_answer_is_the_same_status_on_every_face(storage_down: Faces) -> None:
    storage_down.decide(None, ErrorCode.STORAGE_UNAVAILABLE, asks=True)  # anonymous: only the store refuses
    assert "Traceback" not in "".join(storage_down.server.output)


def _sign_in(faces: Faces, secret: str) -> httpx.Response:
    return httpx.post(
        f"{faces.server.url}/ui/signin",
        data={"token": secret},
        headers={"Origin": faces.server.url},
        timeout=REQUEST_SECONDS,
        follow_redirects=False,
    )


def test_an_expired_token_is_unauthorized_on_every_face_saying_when(faces: Faces, tmp_path: Path) -> None:
    expired, says = faces.tokens["expired"], f"this token expired at {EXPIRED_AT}"
    faces.decide(expired, ErrorCode.UNAUTHORIZED)
    assert says in faces.smart(expired, asks=False)["message"]
    assert says in faces.rest(expired).json()["error"]["message"]
    assert says in faces.sharing(expired).json()["message"]
    page = faces.web_view(expired)  # a cookie of an expired token: signed out, told why
    assert says in page.text and 'id="token"' in page.text and "Max-Age=0" in page.headers["set-cookie"]
    refused = _sign_in(faces, expired)
    assert refused.status_code == 401 and says in refused.text and "set-cookie" not in refused.headers
    scrape = httpx.get(f"{faces.server.url}/metrics", headers=_bearer(expired), timeout=REQUEST_SECONDS)
    assert scrape.status_code == 401 and says in scrape.json()["error"]["message"]
    url = f"{faces.server.url}/{faces.dataset}"
    for protocol in ("smart", "simple"):
        pulled = run_cli("pull", url, "--protocol", protocol, "--token", expired, workspace=tmp_path / protocol)
        assert pulled.returncode == 3 and says in pulled.stderr and "Traceback" not in pulled.stderr, pulled.stderr


def test_a_token_with_an_expiry_works_until_then_and_its_cookie_ends_with_it(faces: Faces, tmp_path: Path) -> None:
    lasting = faces.tokens["lasting"]
    assert faces.rest(lasting).status_code == 200 and faces.sharing(lasting).status_code == 200
    assert faces.web_view(lasting).status_code == 200
    scrape = httpx.get(f"{faces.server.url}/metrics", headers=_bearer(lasting), timeout=REQUEST_SECONDS)
    assert scrape.status_code == 200
    summary(run_cli("pull", f"{faces.server.url}/{faces.dataset}", "--token", lasting, "--json", workspace=tmp_path))
    signed_in = _sign_in(faces, lasting)
    assert signed_in.status_code == 303
    cookie = signed_in.headers["set-cookie"]
    max_age = int(cookie.split("Max-Age=")[1].split(";")[0])
    assert 3500 < max_age <= 3600 and "expires=" in cookie.lower(), cookie


def test_token_profile_expires_writes_a_profile_the_delta_sharing_client_loads(faces: Faces, tmp_path: Path) -> None:
    assert faces.tokens_file is not None
    path = tmp_path / "p.share"
    written = run_cli(
        "token", "profile", "carol", "--tokens", str(faces.tokens_file), "--url", faces.server.url,
        "--read", "*", "--expires", "2h", "-o", str(path),
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    expiration = orjson.loads(path.read_bytes())["expirationTime"]
    stored = [e for e in orjson.loads(faces.tokens_file.read_bytes())["tokens"] if e["subject"] == "carol"]
    assert [e["expires"] for e in stored] == [expiration]
    left = calendar.timegm(time.strptime(expiration, "%Y-%m-%dT%H:%M:%SZ")) - time.time()
    assert 7100 < left <= 7200, expiration
    frame = delta_sharing.load_as_pandas(f"{path}#smart-transfer.datasets.{faces.dataset}")
    assert len(frame) == 5
    gone = tmp_path / "gone.share"  # the same client, once the profile's time has passed
    gone.write_bytes(orjson.dumps({**orjson.loads(path.read_bytes()), "bearerToken": faces.tokens["expired"]}))
    with pytest.raises(HTTPError) as refused:
        delta_sharing.load_as_pandas(f"{gone}#smart-transfer.datasets.{faces.dataset}")
    assert refused.value.response is not None and refused.value.response.status_code == 401
    assert f"this token expired at {EXPIRED_AT}" in refused.value.response.json()["message"]


def test_a_following_peer_ends_and_is_unlisted_when_its_token_expires(faces: Faces, tmp_path: Path) -> None:
    assert faces.tokens_file is not None
    url, announce = f"{faces.server.url}/{faces.dataset}", f"http://127.0.0.1:{free_port()}"
    refused = run_cli("pull", url, "--announce", announce, "--token", faces.tokens["expired"], workspace=tmp_path / "x")
    assert refused.returncode == 3 and f"expired at {EXPIRED_AT}" in refused.stderr, refused.stderr
    ends = math.ceil(time.time()) + 5  # long enough for the first pull, on a loaded machine too
    soon = with_expiry(faces.tokens_file, "soon", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ends)), "*")
    command = [*CLI, "pull", url, "--follow", "--announce", announce, "--token", soon, "--json"]
    follower = subprocess.run(
        [*command, "--workspace", str(tmp_path / "f")], capture_output=True, text=True, timeout=30, check=False
    )  # the server ends the session at its first keep-alive after the token's time
    assert follower.returncode == 3 and "this token expired at" in follower.stderr, follower.stderr
    assert time.time() >= ends and orjson.loads(follower.stdout.splitlines()[0])["objects_transferred"] >= 0
    scrape = httpx.get(f"{faces.server.url}/metrics", headers=_bearer(faces.tokens["writer"]), timeout=REQUEST_SECONDS)
    assert "smart_transfer_peer_announcements_total 1.0" in scrape.text  # it was listed ...
    listed = summary(run_cli("pull", url, "--token", faces.tokens["writer"], "--json", workspace=tmp_path / "w"))
    assert listed["peers_listed"] == 0  # ... until its token expired, not for the listing's time-to-live
