"""The rendezvous of a pair or ring: agents swap completion texts through a
``torch.distributed.TCPStore`` that the launcher hosts (``training/pair.py``).

Inside each reward call, the main process of every agent publishes its payload (the batch's problem
ids, its code and test completions as text: the agents' tokenizers differ) under
``{split}/{global step}/{call}/{agent}`` and reads every other agent's under the same key. Keys are
tied to the trainer's global step, so a resumed pair (a fresh store, every agent back at the same
step) meets again at the right key. An agent deletes its own payload two calls later, when every
reader has read it (each has published the next one, which needs this one read).

Failure is named: while waiting, the agent polls for the other's key and for the markers the
launcher sets when an agent process exits (``exit/{agent}``); an agent that exited, finished, or sent
nothing within ``timeout_s`` raises :class:`PartnerError` naming it. A launcher that is gone
(SIGKILL) makes the store unreachable: that is named too.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta


class PartnerError(RuntimeError):
    """Another agent died, finished early, stalled past the timeout, or the launcher is gone."""


def host_store():
    """The launcher's store on 127.0.0.1, on a free port (returns the store; ``.port``)."""
    from torch.distributed import TCPStore
    return TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                    timeout=timedelta(seconds=30))


class Exchange:
    def __init__(self, address: str, agent: str, agents: list[str], timeout_s: float = 600.0,
                 poll_s: float = 1.0, connect_timeout_s: float = 30.0):
        from torch.distributed import TCPStore
        if agent not in agents:
            raise ValueError(f"agent {agent!r} is not one of {agents}")
        host, _, port = address.rpartition(":")
        self.address, self.agent, self.agents = address, agent, list(agents)
        self.timeout_s, self.poll_s = float(timeout_s), poll_s
        try:
            self.store = TCPStore(host or "127.0.0.1", int(port), is_master=False,
                                  wait_for_workers=False,
                                  timeout=timedelta(seconds=connect_timeout_s))
        except Exception as e:  # noqa: BLE001 - torch raises several kinds
            raise PartnerError(f"cannot reach the pair launcher's exchange at {address} "
                               f"({type(e).__name__}: {e})") from None
        self._mine: list[str] = []

    @property
    def index(self) -> int:
        return self.agents.index(self.agent)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except PartnerError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to reach the launcher's store is the partner's loss
            raise PartnerError(f"the pair launcher's exchange at {self.address} is gone "
                               f"({type(e).__name__}); was the launcher killed?") from None

    def swap(self, key: str, payload: dict) -> list[dict]:
        """Publish this agent's payload under ``key`` and return every agent's, in agent order."""
        mine = f"{key}/{self.agent}"
        self._call(self.store.set, mine, json.dumps(payload))
        self._mine.append(mine)
        if len(self._mine) > 2:
            self._call(self.store.delete_key, self._mine.pop(0))
        out = []
        for other in self.agents:
            if other == self.agent:
                out.append(payload)
                continue
            out.append(json.loads(self._wait(f"{key}/{other}", other, key)))
        return out

    def _wait(self, k: str, other: str, key: str) -> bytes:
        """Block on the key (no polling delay once it lands), looking up every ``poll_s`` whether
        the other agent exited, and giving up after ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self._call(self.store.check, [k]):
                return self._call(self.store.get, k)
            left = deadline - time.monotonic()
            try:
                self.store.wait([k], timedelta(seconds=max(0.01, min(self.poll_s, left))))
                continue
            except Exception:  # noqa: BLE001 - a wait timeout; a dead store shows just below
                pass
            if self._call(self.store.check, [f"exit/{other}"]):
                code = self._call(self.store.get, f"exit/{other}").decode()
                why = "finished" if code == "0" else f"exited with code {code}"
                raise PartnerError(f"agent {other!r} {why} before sending {key}; this agent "
                                   f"({self.agent!r}) stops too (see {other}/agent.log)")
            if time.monotonic() > deadline:
                raise PartnerError(f"agent {other!r} sent nothing for {key} within "
                                   f"{self.timeout_s:g} s (exchange_timeout_s): it died or "
                                   f"stalled; this agent ({self.agent!r}) stops")
