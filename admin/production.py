"""``fptrack serve --production``: the admin under gunicorn, started through its Python API.

Each worker builds its own app (``create_app`` in :meth:`AdminServer.load`, after the fork), so no database
connection is shared between processes. The secret key is created once by the master before the workers start.
Forwarded scheme headers (``X-Forwarded-Proto``) are believed only from ``FPTRACK_ADMIN_TRUSTED_PROXIES``
(gunicorn's ``forwarded_allow_ips``; its default, loopback, when none is configured).
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from fptrack.core.settings import Settings

__all__ = ["AdminServer", "bind_address", "default_workers", "run_production"]


def default_workers() -> int:
    """gunicorn's rule of thumb: two per core, plus one."""
    return 2 * (os.cpu_count() or 1) + 1


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AdminServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn application serving ``admin.web.create_app(settings)``."""

    def __init__(self, settings: Settings, options: dict[str, Any]) -> None:
        self.settings = settings
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.items():
            self.cfg.set(name, value)
        # gunicorn 27+ opens a control socket at one path per user ($HOME/.gunicorn/gunicorn.ctl): a second
        # admin on the machine (another environment, a test) would take the first one's; fptrack does not use
        # it
        if "control_socket_disable" in self.cfg.settings:
            self.cfg.set("control_socket_disable", True)

    def load(self) -> Flask:
        from fptrack.admin.web import create_app

        return create_app(self.settings)


def run_production(settings: Settings, host: str, port: int, workers: int) -> None:
    from fptrack.admin.web import ensure_secret_key

    ensure_secret_key(settings.data_dir)
    options: dict[str, Any] = {
        "bind": [bind_address(host, port)],
        "workers": workers,
        "worker_class": "sync",
        "timeout": 60,
        "graceful_timeout": 20,
        "accesslog": "-",
        "errorlog": "-",
        "proc_name": "fptrack-admin",
    }
    if settings.admin_trusted_proxies:
        options["forwarded_allow_ips"] = ",".join(settings.admin_trusted_proxies)
    AdminServer(settings, options).run()
