"""The judge: what one 429 means for everyone else in its pool. Pure: no clock, no I/O.

A 429 carries a wait; ``now + wait`` is where the server says its window ends (its *window
end*). One 429 alone proves little: a fluke, a neighbour's burst, or a request that reached
the server just before its window turned. So the judge gives a :class:`Verdict`:

- ``late``: the pool is already paused; the 429 answers a request sent before the pause.
- ``suspect``: an isolated 429. The next start goes alone, as the pool's *check*, and waits
  for it; the check's success (or any later start's) clears the suspect, and a suspect
  whose window ended with nothing sent since getting through is ``proven`` after all.
- ``agreeing``: a second 429 pointing at the suspect's window end, not yet enough.
- ``proven``: :data:`~._tuning.PROOF_429S` 429s pointing at one window end (closer than
  :data:`~._tuning.AGREE_SHARE` of the time between them), or
  :data:`~._tuning.PROOF_429S_WHOLE_SECONDS` when the waits are whole seconds: a window
  ran out. The pool pauses to its end; the rule lowers the rate.
- ``step_up_refused``: a 429 while the rule was stepping up: that answers the step up.
- ``expired``: a suspect whose window ended with nothing sent since getting through, and
  its check not out: proven by silence (the rule lowers the rate; nobody pauses, the
  window is over).

A start no earlier than the suspect that got through *clears* it: it was no window running
out (:meth:`Judge.on_answer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from magisterium_async._ratelimit._log import Start
from magisterium_async._ratelimit._tuning import (
    AGREE_SHARE,
    PROOF_429S,
    PROOF_429S_WHOLE_SECONDS,
    WHOLE_SECOND_BLUR,
)

__all__ = ["Judge", "Verdict", "VerdictKind"]

VerdictKind = Literal["late", "suspect", "agreeing", "proven", "expired", "step_up_refused"]


@dataclass(frozen=True)
class Verdict:
    """What the judge decided about ``start``.

    ``at`` is when the 429 came (for a suspect proven by silence: when the suspect came),
    ``window_end`` where the server said its window ends, ``wait`` the 429's wait.
    ``pause``: whether the pool pauses until ``window_end``.
    """

    kind: VerdictKind
    start: Start
    at: float
    window_end: float
    wait: float

    @property
    def pause(self) -> bool:
        """Whether the whole pool waits until ``window_end``."""
        return self.kind in ("late", "proven", "step_up_refused")


class Judge:
    """The 429 evidence of one pool: at most one suspect at a time, and its check."""

    __slots__ = ("_agreeing", "check", "suspect", "suspect_at", "suspect_end", "suspect_until",
                 "suspect_wait")  # fmt: skip

    def __init__(self) -> None:
        self.suspect: Start | None = None
        self.check: Start | None = None  # the start that goes alone while a suspect stands
        self.suspect_until = -math.inf  # the check waits no longer than this
        self.suspect_at = self.suspect_end = -math.inf  # when it came, where it points
        self.suspect_wait = 0.5
        self._agreeing = 0  # 429s pointing at the suspect's window end, itself included

    def holds(self, now: float) -> tuple[bool, Verdict | None]:
        """Whether starts wait for the check now; and the verdict if the suspect's window
        just ended without a start getting through (proven by silence)."""
        if self.suspect is None:
            return False, None
        if now >= self.suspect_until:
            return False, self._expire()
        return self.check is not None, None

    def started(self, start: Start) -> None:
        """A start went out: it is the check if a suspect stands and none is out."""
        if self.suspect is not None and self.check is None:
            self.check = start

    def on_429(self, start: Start, now: float, wait: float, *, paused: bool,
               stepping_up: bool) -> list[Verdict]:  # fmt: skip
        """The verdicts a 429 to ``start`` brings (an expired suspect's first, if any)."""
        until = now + wait
        if paused:
            return [Verdict("late", start, now, until, wait)]
        verdicts: list[Verdict] = []
        if self.suspect is not None and now >= self.suspect_until:
            expired = self._expire()
            if expired is not None:
                verdicts.append(expired)
        suspect = self.suspect
        # Whole seconds (the service rounds up) blur where the window ends by up to one.
        whole = wait.is_integer() and self.suspect_wait.is_integer()
        blur = WHOLE_SECOND_BLUR if whole else 0.0
        agrees = (
            suspect is not None
            and suspect is not start
            and abs(until - self.suspect_end) < AGREE_SHARE * (now - self.suspect_at) + blur
        )
        if agrees:
            self._agreeing += 1
        proven = agrees and self._agreeing >= (PROOF_429S_WHOLE_SECONDS if whole else PROOF_429S)
        if agrees and not proven:
            verdicts.append(Verdict("agreeing", start, now, until, wait))
        elif proven:
            self.suspect = self.check = None
            verdicts.append(Verdict("proven", start, now, until, wait))
        elif stepping_up:
            verdicts.append(Verdict("step_up_refused", start, now, until, wait))
        else:
            self.suspect, self.suspect_at, self.suspect_end = start, now, until
            self.suspect_wait, self._agreeing = wait, 1
            self.suspect_until = max(self.suspect_until, until)
            verdicts.append(Verdict("suspect", start, now, until, wait))
        return verdicts

    def on_answer(self, start: Start) -> bool:
        """``start`` is over: one sent no earlier than the suspect that got through clears
        it (whether it did)."""
        suspect = self.suspect
        if suspect is None:
            return False
        if start is self.check:
            self.check = None  # answered: the next start checks, if still in doubt
        if not start.limited and start is not suspect and start.time >= suspect.time:
            self.suspect = self.check = None
            return True
        return False

    def _expire(self) -> Verdict | None:
        """The suspect's window ended and nothing sent since got through: it was real,
        unless its check is still out (then nobody knows)."""
        suspect, out = self.suspect, self.check
        assert suspect is not None
        self.suspect = self.check = None
        if out is not None:
            return None
        return Verdict("expired", suspect, self.suspect_at, self.suspect_end, self.suspect_wait)
