"""A stand-in for an HTTP proxy on loopback, for the tests that show a request never leaves for a proxy (the
private-address guard's, and Chromium's phoning home when pages are rendered)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ProxyListener:
    """A loopback TCP listener standing in for an HTTP proxy: records what it is sent, answers 200."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.server.settimeout(0.2)
        while not self._stop:
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    data = connection.recv(65536)
                except OSError:
                    continue
                self.received.append(data.decode("latin-1").split("\r\n", 1)[0])
                body = (
                    "<p>经由代理取得的页面，内容并不重要，只要能证明代理确实收到了请求就可以了。</p>".encode()
                )
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=5)
        self.server.close()


@contextmanager
def loopback_proxy() -> Iterator[ProxyListener]:
    listener = ProxyListener()
    try:
        yield listener
    finally:
        listener.close()
