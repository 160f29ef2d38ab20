"""Who is looking at a page: the token from the sign-in cookie, checked against the tokens file on every
request (so a revoked or expired token's cookie stops working as soon as the server reloads the file or the
token's time passes), and what that visitor may read."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request, Response

from smart_transfer.server.auth import AuthError, Authorizer, Grant, TokenExpired

#: The cookie holding a signed-in visitor's token (HttpOnly: no script reads it).
COOKIE = "smart_transfer_token"
#: Longest token accepted from the form or the cookie (generated tokens are 46 characters).
MAX_TOKEN_CHARS = 512


@dataclass(frozen=True)
class Visitor:
    """A visitor: signed in (``grant``) or anonymous; ``open_server`` when the server has no tokens
    file (everyone reads everything); ``signed_out_because`` when a cookie stopped working."""

    grant: Grant | None
    open_server: bool
    signed_out_because: str | None = None

    @property
    def subject(self) -> str | None:
        return self.grant.subject if self.grant is not None else None


def authorization_of(request: Request) -> str | None:
    """The Authorization header value the sign-in cookie stands for (None without a cookie): what the
    server's guard checks, as it checks a REST request's header."""
    token = request.cookies.get(COOKIE)
    return f"Bearer {token[:MAX_TOKEN_CHARS]}" if token else None


def visitor_of(request: Request, authorizer: Authorizer) -> Visitor:
    """The visitor of ``request`` (its cookie checked against the current tokens file), for the pages
    the guard does not keep (sign-in, errors): who the header says is signed in."""
    authorization = authorization_of(request)
    if authorizer.anonymous:
        return Visitor(None, open_server=True)
    if authorization is None:
        return Visitor(None, open_server=False)
    try:
        grant = authorizer.subject(authorization)
    except TokenExpired as exc:
        return Visitor(None, open_server=False, signed_out_because=f"{exc}: sign in again")
    except AuthError:
        return Visitor(None, open_server=False, signed_out_because="your token is no longer valid: sign in again")
    return Visitor(grant, open_server=False)


def check_token(authorizer: Authorizer, token: str) -> Grant:
    """The grant of a token typed into the sign-in form (AuthError when it is unknown)."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise AuthError(401, "unknown token")
    grant = authorizer.subject(f"Bearer {token}")
    if grant is None:
        raise AuthError(400, "this server needs no token: every visitor reads every dataset")
    return grant


def keep_token(response: Response, request: Request, token: str, grant: Grant) -> None:
    """Set the sign-in cookie: HttpOnly, SameSite=Strict, Secure over https, for this browser session or,
    for a token with an expiry, until then (Max-Age and Expires: the browser drops it when the token ends;
    the server refuses it anyway, and a revoked one from the next request)."""
    left = grant.seconds_left()
    lifetime = None if left is None else int(left)
    response.set_cookie(
        COOKIE,
        token,
        max_age=lifetime,
        expires=lifetime,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/ui",
    )


def forget_token(response: Response, request: Request) -> None:
    """Delete the sign-in cookie."""
    response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/ui")


def same_origin(request: Request) -> bool:
    """Whether a form POST comes from a page of this server: its Origin (or, without one, its Referer)
    names this host. SameSite=Strict already keeps the cookie off cross-site requests; this refuses
    a cross-site sign-in (login CSRF) too."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed or claimed == "null":
        return False
    parts = urlsplit(claimed)
    return parts.netloc == request.headers.get("host", "") and parts.scheme in ("http", "https")
