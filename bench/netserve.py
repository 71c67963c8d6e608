#!/usr/bin/env python3
"""Loopback servers for bench/network.sh: an HTTP/1.0 server that sends FILE with
sendfile(2) (so the server is never the bottleneck) and a TCP echo server.

usage: netserve.py FILE HTTP_PORT ECHO_PORT
"""
import os
import socket
import sys
import threading


def http(port, path):
    size = os.path.getsize(path)
    srv = socket.create_server(("127.0.0.1", port), backlog=128)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_file, args=(conn, path, size), daemon=True).start()


def serve_file(conn, path, size):
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return
            data += chunk
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        with open(path, "rb") as f:
            conn.sendfile(f)


def echo(port):
    srv = socket.create_server(("127.0.0.1", port), backlog=1024)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_echo, args=(conn,), daemon=True).start()


def serve_echo(conn):
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            conn.sendall(data)


if __name__ == "__main__":
    threading.Thread(target=echo, args=(int(sys.argv[3]),), daemon=True).start()
    http(int(sys.argv[2]), sys.argv[1])
