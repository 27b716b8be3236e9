"""Progress of long commands: a live line on a terminal; elsewhere (a CI log, a pipe) the same
line printed every LOG_EVERY_S seconds, so a log shows the work going on."""

from __future__ import annotations

import time
from contextlib import contextmanager

from rich.console import Console

LOG_EVERY_S = 15.0


@contextmanager
def progress_line(console: Console, every_s: float = LOG_EVERY_S):
    """Yields `update(text)`: cheap to call often (the live line redraws 4 times a second; a
    log gets a line when `every_s` has passed since the last, and the first at once)."""
    if console.is_terminal:
        from rich.live import Live

        with Live("starting", console=console, refresh_per_second=4, transient=True) as live:
            yield lambda text: live.update(text)
        return
    last = [-float("inf")]

    def update(text: str) -> None:
        now = time.monotonic()
        if now - last[0] >= every_s:
            last[0] = now
            console.print(text, highlight=False, markup=False, soft_wrap=True)

    yield update
