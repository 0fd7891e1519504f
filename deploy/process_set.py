"""``make up`` / ``make down``: the whole fptrack process set on one machine, without containers.

``up`` makes the services available (deploy/ensure-services.sh), creates the PostgreSQL database when it is
missing, migrates it (``fptrack init``), starts deploy/Procfile under honcho in the background (a session of
its own; pid file and log in the data folder), and waits until the admin's ``/healthz`` answers 200 and
``fptrack ping`` finds a worker and a crawler. ``down`` stops exactly what ``up`` started: honcho, every
process below it, and the site crawls the crawler started in sessions of their own (found by walking the
process tree before anything is signalled), and nothing else.

Settings: the caller's environment, over deploy/.env (else deploy/.env.example), over --env-file. Both
commands are idempotent: ``up`` with the set running says so; ``down`` with nothing running says so. ``down``
uses the standard library only, so it works without the virtualenv."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
PID_FILE = "process-set.pid"
LOG_FILE = "logs/process-set.log"
READY_SECONDS = 120.0
STOP_SECONDS = 30.0


class ProcessSetError(Exception):
    """A one-line reason ``up`` or ``down`` could not do its job."""


# ------------------------------------------------------------------------------------------------- settings


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (the format systemd, compose and honcho share); comments and blank lines
    skipped."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ProcessSetError(f"{path}:{number}: expected KEY=value, found {line!r}")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def default_env_file() -> Path:
    local = DEPLOY / ".env"
    return local if local.exists() else DEPLOY / ".env.example"


def environment(env_file: Path) -> dict[str, str]:
    """The environment of the process set: the env file, overridden by the caller's environment, with the data
    folder made absolute and this virtualenv's ``fptrack`` and ``honcho`` first on the PATH."""
    if not env_file.is_file():
        raise ProcessSetError(f"no env file at {env_file}: copy deploy/.env.example to deploy/.env")
    env = {**read_env_file(env_file), **os.environ}
    env["FPTRACK_DATA_DIR"] = str((REPO / env.get("FPTRACK_DATA_DIR", "fptrack-data")).resolve())
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def data_dir(env: dict[str, str]) -> Path:
    return Path(env["FPTRACK_DATA_DIR"])


# ------------------------------------------------------------------------------------------- the process tree


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 of proc(5) first), None when the
    process is gone. The name is cut at the last ``)``: it may hold spaces and parentheses."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None when it is gone: a pid with another
    start time is another process that reused the number, and is never signalled."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None else None  # field 22 of proc(5)


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(entry.name)) is not None:
            parents[int(entry.name)] = int(fields[1])  # field 4 of proc(5): the parent
    return parents


def descendants(roots: set[int]) -> dict[int, int]:
    """Every live process below ``roots`` (and the roots still alive), with its parent."""
    parents = _parents()
    found = {pid for pid in roots if pid in parents}
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return {pid: parents[pid] for pid in found}


def detached(tree: dict[int, int], honcho: int) -> set[int]:
    """The processes of ``tree`` that lead a session of their own without being one of honcho's: the site
    crawls, started so that a restarting crawler does not stop them; their parents will not pass a signal on
    to them."""
    leaders = set()
    for pid, parent in tree.items():
        try:
            if pid != honcho and parent != honcho and os.getsid(pid) == pid:
                leaders.add(pid)
        except ProcessLookupError:
            continue
    return leaders


# --------------------------------------------------------------------------------------------------- pid file


def read_pid_file(path: Path) -> tuple[int, int] | None:
    """(pid, start time) of the running honcho, or None (no file, or the process it names is gone)."""
    try:
        recorded = json.loads(path.read_text())
        pid, started = int(recorded["pid"]), int(recorded["start_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, started) if start_time(pid) == started else None


# --------------------------------------------------------------------------------------------------------- up


def ensure_database(env: dict[str, str]) -> None:
    """Create the PostgreSQL database of FPTRACK_DATABASE_URL when it does not exist (SQLite needs
    nothing)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from fptrack.core.settings import Settings

    settings = Settings.from_env(env)
    url = make_url(settings.database_url)
    if not url.get_backend_name().startswith("postgresql") or not url.database:
        return
    server = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as connection:
            exists = connection.scalar(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": url.database}
            )
            if not exists:
                quoted = server.dialect.identifier_preparer.quote(url.database)
                connection.execute(text(f"CREATE DATABASE {quoted}"))
                print(f"up: created the database {url.database}")
    except Exception as error:  # noqa: BLE001 - any driver error: say which server, in one line
        raise ProcessSetError(
            f"cannot create the database on {url.render_as_string(hide_password=True)}: "
            f"{str(error).splitlines()[0]}"
        ) from None
    finally:
        server.dispose()


def admin_url(env: dict[str, str]) -> str:
    bind = env.get("ADMIN_BIND", "127.0.0.1")
    host = "127.0.0.1" if bind in ("0.0.0.0", "") else ("[::1]" if bind == "::" else bind)
    return f"http://{host}:{env.get('ADMIN_PORT', '8000')}/"


def healthy(env: dict[str, str]) -> tuple[bool, str]:
    """Whether the admin answers /healthz 200 and both a worker and a crawler answer ``fptrack ping``."""
    checks = [["fptrack", "healthz", "--url", admin_url(env) + "healthz"]] + [
        ["fptrack", "ping", "--queue", queue, "--timeout", "2"] for queue in ("tasks", "crawls")
    ]
    for check in checks:
        done = subprocess.run(check, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return False, done.stderr.strip() or " ".join(check[1:]) + " failed"
    return True, "ok"


def up(env: dict[str, str], ready_seconds: float = READY_SECONDS) -> None:
    folder = data_dir(env)
    pid_file, log_file = folder / PID_FILE, folder / LOG_FILE
    running = read_pid_file(pid_file)
    if running is not None:
        print(
            f"up: already running (honcho pid {running[0]}); admin on {admin_url(env)}; `make down` stops it"
        )
        return
    subprocess.run(["bash", str(DEPLOY / "ensure-services.sh")], env=env, check=False)
    ensure_database(env)
    init = subprocess.run(["fptrack", "init"], env=env, capture_output=True, text=True, check=False)
    if init.returncode != 0:
        raise ProcessSetError(f"fptrack init failed: {init.stderr.strip() or init.stdout.strip()}")
    print(f"up: {init.stdout.strip()}")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    command = ["honcho", "start", "--no-colour", "-f", str(DEPLOY / "Procfile"), "-d", str(REPO)]
    if env.get("PROCESS_FORMATION"):
        command += ["-c", env["PROCESS_FORMATION"]]
    with open(log_file, "ab") as log:
        honcho = subprocess.Popen(
            command,
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = start_time(honcho.pid)
    pid_file.write_text(json.dumps({"pid": honcho.pid, "start_time": started}))
    print(f"up: started the process set (honcho pid {honcho.pid}); log {log_file}")
    deadline, reason = time.monotonic() + ready_seconds, "not checked yet"
    while time.monotonic() < deadline:
        if honcho.poll() is not None:
            pid_file.unlink(missing_ok=True)
            raise ProcessSetError(
                f"the process set stopped (exit {honcho.returncode}); its log:\n{_tail(log_file)}"
            )
        ready, reason = healthy(env)
        if ready:
            print(
                f"up: ready: admin on {admin_url(env)} (/healthz 200), worker and crawler answer; "
                "`make down` stops it"
            )
            return
        time.sleep(1.0)
    down(env)
    raise ProcessSetError(
        f"not ready after {ready_seconds:.0f}s ({reason}); stopped it again; its log:\n{_tail(log_file)}"
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ------------------------------------------------------------------------------------------------------- down


def down(env: dict[str, str], stop_seconds: float = STOP_SECONDS) -> None:
    pid_file = data_dir(env) / PID_FILE
    running = read_pid_file(pid_file)
    if running is None:
        stale = pid_file.exists()
        pid_file.unlink(missing_ok=True)
        print("down: not running" + (" (removed a stale pid file)" if stale else ""))
        return
    honcho = running[0]
    # every process up started, with its start time, taken before any is signalled: the site crawls run in
    # sessions of their own and are reparented away from the tree once their crawler has stopped. honcho
    # passes SIGTERM on to its processes (Celery's warm shutdown, gunicorn's graceful one); the crawls get it
    # directly.
    tree = descendants({honcho})
    known = {pid: start_time(pid) for pid in tree}
    # Once each: a crawl takes a second SIGTERM as "stop at once".
    signalled = {honcho} | detached(tree, honcho)
    _signal({pid: known[pid] for pid in signalled}, signal.SIGTERM)
    deadline = time.monotonic() + stop_seconds
    while time.monotonic() < deadline:
        tree = descendants({pid for pid in known if _alive(pid, known[pid])})
        for pid in tree.keys() - known.keys():
            known[pid] = start_time(pid)  # started after the snapshot (a crawl starting as we stopped)
        late = detached(tree, honcho) - signalled
        _signal({pid: known[pid] for pid in late}, signal.SIGTERM)
        signalled |= late
        if not any(_alive(pid, started) for pid, started in known.items()):
            break
        time.sleep(0.2)
    else:
        _signal(known, signal.SIGKILL)
        print(f"down: killed what had not stopped after {stop_seconds:.0f}s")
    pid_file.unlink(missing_ok=True)
    print(f"down: stopped the process set ({len(known)} process(es))")


def _alive(pid: int, started: int | None) -> bool:
    return started is not None and start_time(pid) == started


def _signal(processes: dict[int, int | None], signum: signal.Signals) -> None:
    for pid, started in processes.items():
        if _alive(pid, started):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------------------------------- command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument(
        "--env-file",
        type=Path,
        help="KEY=value settings (default: deploy/.env, else deploy/.env.example); "
        "the environment wins over it",
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # in order with the scripts it runs
    try:
        env = environment(args.env_file or default_env_file())
        if args.action == "up":
            up(env)
        elif args.action == "down":
            down(env)
        else:
            running = read_pid_file(data_dir(env) / PID_FILE)
            print(f"running (honcho pid {running[0]})" if running else "not running")
            return 0 if running else 3
    except ProcessSetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
