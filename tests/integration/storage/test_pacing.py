"""The shared pace per site (storage.pacing) on a real database, SQLite and PostgreSQL: processes that fetch
from one site together keep its rate, a hold (a Retry-After) stops all of them until it ends, and the site's
own rate and the caller's limit apply."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
from typing import Any

import pytest
from sqlalchemy import update

from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from fptrack.storage.models import HostPacing, Site
from fptrack.storage.pacing import MAX_INTERVAL, Pacer, retry_after_seconds

HOST = "127.0.0.1:9"


def _pacer(settings: Settings, **changes: Any) -> tuple[Pacer, Any]:
    engine = create_engine_for(settings)
    return Pacer(session_factory(engine), settings.with_overrides(**changes)), engine


def _take_turns(database_url: str, rate: float, count: int, out: Any) -> None:
    """In a process of its own: wait for ``count`` turns and report when each was due and when it came."""
    settings = Settings(database_url=database_url, site_rate=rate)
    engine = create_engine_for(settings)
    pacer = Pacer(session_factory(engine), settings)
    for _ in range(count):
        pacer.wait_turn(HOST)
        out.put(time.time())
    engine.dispose()


def test_two_processes_sharing_a_site_keep_its_rate_together(settings: Settings) -> None:
    rate, per_process = 20.0, 10
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [
        context.Process(target=_take_turns, args=(settings.database_url, rate, per_process, out))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    times = sorted(out.get(timeout=60) for _ in range(2 * per_process))
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # every request starts at its own slot, one interval (0.05 s) after the one before, whichever process
    # took it (two processes each keeping the rate alone would start theirs in pairs, 0 s apart); slack for
    # the scheduler of a shared machine
    assert min(gaps) >= 0.02, gaps
    assert times[-1] - times[0] >= (2 * per_process - 1) / rate - 0.03
    # the most in any one-second window is the rate (the 20 turns span about a second)
    assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) <= rate
    pacer, engine = _pacer(settings)
    with session_scope(pacer.sessions) as session:  # type: ignore[arg-type]
        row = session.get(HostPacing, HOST)
        assert row is not None and row.requests == 2 * per_process
    engine.dispose()


def test_threads_of_one_process_never_share_a_slot(settings: Settings) -> None:
    pacer, engine = _pacer(settings, site_rate=1000.0)
    slots: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(25):
            turn = pacer.take_turn(HOST)
            with lock:
                slots.append(turn.at)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert len(slots) == 100
    ordered = sorted(slots)
    assert min(b - a for a, b in itertools.pairwise(ordered)) >= 0.001 - 1e-5


def test_a_hold_blocks_every_process_then_the_site_is_paced_slower(settings: Settings) -> None:
    first, engine1 = _pacer(settings, site_rate=10.0)
    second, engine2 = _pacer(settings, site_rate=10.0)  # another process's pacer: nothing shared but the row
    first.take_turn(HOST)
    started = time.time()
    assert first.hold(HOST, 1.0) == 1.0
    # a second answer of the same burst, inside the hold, does not double the interval again
    second.hold(HOST, 0.5)
    turn = second.take_turn(HOST)
    # nothing before the window ends, then the interval doubled (and each turn gives back a few percent)
    assert turn.at >= started + 1.0
    assert 0.15 <= turn.interval < 0.2
    waited_from = time.time()
    second.wait_turn(HOST)
    assert time.time() - started >= 1.0 + turn.interval - 0.01
    assert time.time() - waited_from >= 0.9
    engine1.dispose()
    engine2.dispose()


def test_a_hold_placed_while_a_turn_is_awaited_is_waited_out(settings: Settings) -> None:
    waiter, engine1 = _pacer(settings, site_rate=2.0)
    holder, engine2 = _pacer(settings, site_rate=2.0)
    waiter.take_turn(HOST)  # the next slot is half a second away
    timer = threading.Timer(0.1, lambda: holder.hold(HOST, 1.5))
    started = time.time()
    timer.start()
    waiter.wait_turn(HOST)
    timer.join()
    assert time.time() - started >= 1.5
    engine1.dispose()
    engine2.dispose()


def test_the_sites_rate_the_callers_limit_and_the_cap_on_holds(settings: Settings) -> None:
    pacer, engine = _pacer(settings, site_rate=10.0, retry_after_max=60.0)
    with session_scope(pacer.sessions) as session:  # type: ignore[arg-type]
        session.add(Site(host="slow.example", name="slow"))
        session.flush()
        session.execute(update(Site).where(Site.host == "slow.example").values(rate=0.5))
    assert pacer.rate_of("slow.example") == 0.5
    assert pacer.rate_of("other.example") == 10.0
    # a delay of 4 s (a limit of 0.25/s) is stricter than the site's rate: it wins; a looser one does not
    assert pacer.rate_of("other.example", 0.25) == 0.25
    assert pacer.rate_of("slow.example", 5.0) == 0.5
    pacer.take_turn("other.example", 0.25)
    assert pacer.take_turn("other.example", 0.25).interval == pytest.approx(4.0)
    # a Retry-After of an hour is held FPTRACK_RETRY_AFTER_MAX at most; the interval never passes the cap
    assert pacer.hold("other.example", 3600.0) == 60.0
    for _ in range(8):
        with session_scope(pacer.sessions) as session:  # type: ignore[arg-type]
            session.execute(update(HostPacing).values(blocked_until=0.0))
        pacer.hold("other.example", 1.0)
    assert pacer.take_turn("other.example").interval <= MAX_INTERVAL
    engine.dispose()


def test_a_pace_in_memory_follows_the_same_rules() -> None:
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    pacer = Pacer(None, Settings(site_rate=2.0), clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        pacer.wait_turn(HOST)
    assert slept == [0.5, 0.5]
    pacer.hold(HOST, 3.0)
    pacer.wait_turn(HOST)
    assert slept[-1] == pytest.approx(3.0)


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after_seconds("5") == 5.0
    assert retry_after_seconds(b" 2 ") == 2.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("-3") == 0.0
