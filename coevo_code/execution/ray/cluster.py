"""Connecting to Ray: the backend's constants and errors, Ray's import, and ``ray.init`` kept on
the loopback interface for a local instance (or a cluster bound there)."""

from __future__ import annotations

import contextlib
import logging
import socket

log = logging.getLogger(__name__)

RESOURCE = "coevo_sandbox"
INSTALL_HINT = "the ray backend needs Ray: pip install -e '.[ray]'"


class RayMissingError(ImportError):
    """Ray is not installed here."""


class RayBackendError(RuntimeError):
    """The cluster cannot run the sandbox (no node, a version mismatch, an actor that failed)."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayMissingError(INSTALL_HINT) from None
    return ray


def package_version() -> str:
    from ... import version
    return str(version.__version__)


LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def loopback_bound(ray, address: str) -> bool:
    """Whether ``address`` names a cluster bound to the loopback interface only.

    Ray rewrites a loopback address to this host's routable IP before connecting; a cluster
    bound to 127.0.0.1 (the tests', the local instance this backend starts) is not there.
    """
    host, _, port = address.rpartition(":")
    if host not in LOOPBACK or not port.isdigit():
        return False
    ip = ray.util.get_node_ip_address()
    if ip in LOOPBACK:
        return False
    try:
        socket.create_connection((ip, int(port)), timeout=1.0).close()
        return False
    except OSError:
        return True


@contextlib.contextmanager
def loopback_only(on: bool):
    """Make ``ray.init`` keep 127.0.0.1 as this node's address (it binds its services there).

    Ray offers no public switch for it on Linux; its constant ``ENABLE_RAY_CLUSTER`` (False on
    macOS and Windows, where Ray stays on the loopback interface) is what decides. Where that
    constant is gone, Ray's default applies and a warning says so.
    """
    if not on:
        yield
        return
    try:
        from ray._private import ray_constants
        old = ray_constants.ENABLE_RAY_CLUSTER
    except (ImportError, AttributeError):
        log.warning("this Ray version has no loopback switch: the local Ray instance listens "
                    "on every interface")
        yield
        return
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old


def init_ray(ray, address: str | None, extra: dict | None) -> bool:
    """Start or connect Ray unless this process already did; True if this call did."""
    if ray.is_initialized():
        return False
    kw = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is None:  # a new local instance of our own (ray.init() alone would join one
        # that `ray start` left running here): loopback only, no dashboard
        kw["address"] = "local"
        kw["include_dashboard"] = False
        loopback = True
    else:
        kw["address"] = address
        loopback = loopback_bound(ray, address)
    kw.update(extra or {})
    with loopback_only(loopback):
        ray.init(**kw)
    return True

