"""The pair's exchange (TCPStore): swap, a partner that exited, one that stalls, a dead launcher."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("torch")

from coevo_code.training.exchange import Exchange, PartnerError, host_store


def test_swap_timeout_exit_marker_and_a_dead_launcher():
    store = host_store()
    addr = f"127.0.0.1:{store.port}"
    a = Exchange(addr, "a", ["a", "b"], timeout_s=1.5)
    b = Exchange(addr, "b", ["a", "b"], timeout_s=1.5)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("b", b.swap("train/0", {"x": 2})))
    t.start()
    time.sleep(0.3)  # b waits on a's key; it lands while b blocks
    t0 = time.monotonic()
    assert a.swap("train/0", {"x": 1}) == [{"x": 1}, {"x": 2}]
    t.join()
    assert got["b"] == [{"x": 1}, {"x": 2}] and time.monotonic() - t0 < 0.5
    t0 = time.monotonic()
    with pytest.raises(PartnerError, match=r"agent 'b' sent nothing for train/1 within 1.5 s"):
        a.swap("train/1", {"x": 1})
    assert 1.4 < time.monotonic() - t0 < 5
    store.set("exit/b", "-9")
    t0 = time.monotonic()
    with pytest.raises(PartnerError, match="agent 'b' exited with code -9 before sending train/2"):
        a.swap("train/2", {"x": 1})
    assert time.monotonic() - t0 < 1.5
    # a's own payloads are deleted two calls later (every reader has read them by then)
    assert not store.check(["train/0/a"]) and store.check(["train/2/a"])
    del store
    with pytest.raises(PartnerError, match="exchange at .* is gone"):
        a.swap("train/3", {"x": 1})
    with pytest.raises(PartnerError, match="cannot reach"):
        Exchange(addr, "a", ["a", "b"], connect_timeout_s=1)
    with pytest.raises(ValueError, match="not one of"):
        Exchange(addr, "c", ["a", "b"])
