"""Ask a Cassandra node over the CQL native protocol (v4), with nothing but
the standard library, for tools/cql's scripts:

    probe.py version HOST PORT   prints release_version (the node serves CQL)
    probe.py peers HOST PORT     prints how many peers it lists with tokens

Exit status 1 when the node does not answer (yet).
"""
import socket
import struct
import sys


def frame(stream, op, body):
    return struct.pack(">BBhBI", 4, 0, stream, op, len(body)) + body


def readn(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def recv(s):
    _, _, _, op, ln = struct.unpack(">BBhBI", readn(s, 9))
    return op, readn(s, ln)


def string(x):
    x = x.encode()
    return struct.pack(">H", len(x)) + x


def query(host, port, q):
    """Rows of a one-column result: each value's bytes, None for null."""
    s = socket.create_connection((host, port), timeout=3)
    s.settimeout(5)
    s.sendall(frame(1, 0x01, struct.pack(">H", 1) + string("CQL_VERSION") + string("3.0.0")))
    if recv(s)[0] != 0x02:  # READY
        raise EOFError
    q = q.encode()
    s.sendall(frame(2, 0x07, struct.pack(">I", len(q)) + q + struct.pack(">HB", 0x0001, 0)))
    op, body = recv(s)
    if op != 0x08 or struct.unpack(">i", body[:4])[0] != 2:  # RESULT, Rows
        raise EOFError
    p = 4
    flags, ncols = struct.unpack(">ii", body[p:p + 8]); p += 8
    if ncols != 1:
        raise EOFError
    if flags & 0x0002:  # has more pages: skip the paging state
        n = struct.unpack(">i", body[p:p + 4])[0]; p += 4 + max(n, 0)
    if flags & 0x0001:  # global table spec: keyspace, table
        for _ in range(2):
            n = struct.unpack(">H", body[p:p + 2])[0]; p += 2 + n
    n = struct.unpack(">H", body[p:p + 2])[0]; p += 2 + n  # column name
    kind = struct.unpack(">H", body[p:p + 2])[0]; p += 2
    if kind in (0x0020, 0x0022):  # list<x>, set<x>: the element's type
        p += 2
    rows = struct.unpack(">i", body[p:p + 4])[0]; p += 4
    out = []
    for _ in range(rows):
        n = struct.unpack(">i", body[p:p + 4])[0]; p += 4
        out.append(None if n < 0 else body[p:p + n])
        p += max(n, 0)
    return out


def main():
    what, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        if what == "version":
            rows = query(host, port, "SELECT release_version FROM system.local")
            if not rows or rows[0] is None:
                sys.exit(1)
            print(rows[0].decode())
        elif what == "peers":
            rows = query(host, port, "SELECT tokens FROM system.peers_v2")
            # A set's value starts with its element count (4 bytes): more
            # than that is a non-empty set.
            print(sum(1 for r in rows if r is not None and len(r) > 4))
        else:
            sys.exit("usage: probe.py version|peers HOST PORT")
    except (OSError, EOFError, struct.error):
        sys.exit(1)


main()
