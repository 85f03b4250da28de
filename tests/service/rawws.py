"""A WebSocket peer that really stalls: a raw socket with a small receive buffer that does the
opening handshake and then reads only when told to (client libraries keep reading in the
background, so they never stall a server)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from urllib.parse import urlparse


class StalledPeer:
    def __init__(self, url: str, rcvbuf: int = 16 * 1024) -> None:
        u = urlparse(url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect((u.hostname, u.port))
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + (f"?{u.query}" if u.query else "")
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(1)
        assert b" 101 " in self.buf.split(b"\r\n", 1)[0], self.buf
        self.buf = b""
        self.close_code: int | None = None  # the code of the close frame read, if any

    def send_close(self, code: int = 1000) -> None:
        """A masked close frame: the answer to the server's."""
        self.sock.sendall(struct.pack("!BB", 0x88, 0x82) + bytes(4) + struct.pack("!H", code))

    def send_text(self, text: str) -> None:
        """One masked text frame (the mask is zeros: the payload goes as it is)."""
        payload = text.encode()
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        self.sock.sendall(head + bytes(4) + payload)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self) -> dict | None:
        """The next text frame as JSON (None for a close frame; pings are skipped)."""
        while True:
            b0, b1 = self._read(2)
            length = b1 & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._read(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._read(8))
            payload = self._read(length)
            if b0 & 0x0F == 0x8:
                self.close_code = struct.unpack("!H", payload[:2])[0] if length >= 2 else None
                return None
            if b0 & 0x0F not in (0x9, 0xA):
                return json.loads(payload)

    def close(self) -> None:
        self.sock.close()
