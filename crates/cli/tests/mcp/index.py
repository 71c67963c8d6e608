"""A real (if tiny) Python package index for the MCP tests: builds the wheel
`vgdemo-1.0-py3-none-any.whl` (its module says `VALUE = 42`), lays out a PEP 503
"simple" index for it, and serves that with http.server on 127.0.0.1:PORT until
killed. Prints "ready" once it listens.

    index.py DIR PORT
"""
import base64
import functools
import hashlib
import http.server
import os
import sys
import zipfile

root, port = sys.argv[1], int(sys.argv[2])
files = {
    "vgdemo/__init__.py": b"VALUE = 42\n",
    "vgdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: vgdemo\nVersion: 1.0\n",
    "vgdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: vectraguard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def digest(data):
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


record = "".join("%s,%s,%d\n" % (n, digest(d), len(d)) for n, d in files.items())
record += "vgdemo-1.0.dist-info/RECORD,,\n"
os.makedirs(os.path.join(root, "simple", "vgdemo"), exist_ok=True)
wheel = "vgdemo-1.0-py3-none-any.whl"
with zipfile.ZipFile(os.path.join(root, wheel), "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
    z.writestr("vgdemo-1.0.dist-info/RECORD", record)
with open(os.path.join(root, "simple", "vgdemo", "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="../../%s">%s</a></body></html>\n' % (wheel, wheel))

handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
print("ready", flush=True)
server.serve_forever()
