"""A real SOCKS5 proxy on 127.0.0.1 (RFC 1928: no authentication, CONNECT only) for the bench tests: it
connects where the client asks (a name is resolved here, as socks5h:// wants) and relays both ways."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away during the SOCKS handshake")
        data += chunk
    return data


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        client = self.request
        _version, methods = _exactly(client, 2)
        _exactly(client, methods)
        client.sendall(b"\x05\x00")  # no authentication
        _version, command, _reserved, kind = _exactly(client, 4)
        if kind == 1:
            host = socket.inet_ntoa(_exactly(client, 4))
        elif kind == 3:
            host = _exactly(client, _exactly(client, 1)[0]).decode()
        else:
            host = socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))
        (port,) = struct.unpack("!H", _exactly(client, 2))
        if command != 1:
            client.sendall(b"\x05\x07\x00\x01" + bytes(6))  # command not supported
            return
        try:
            upstream = socket.create_connection((host, port), timeout=5)
        except OSError:
            client.sendall(b"\x05\x05\x00\x01" + bytes(6))  # connection refused
            return
        upstream.settimeout(None)
        self.server.tunnels.append((host, port))
        client.sendall(b"\x05\x00\x00\x01" + bytes(6))
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        upstream.close()


class SocksProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tunnels: list[tuple[str, int]] = []  # (host, port) of each CONNECT it made
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"socks5h://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
