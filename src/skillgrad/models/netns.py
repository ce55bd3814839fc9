"""An agent CLI in a network namespace of its own, reaching one model endpoint only.

Run as ``unshare -rnm python -m skillgrad.models.netns SOCKET PORT [--bind SRC DST]...
[--cd DIR] -- PROGRAM ARGS...``: in the new namespace only loopback exists, and it starts down.
This brings it up, relays ``127.0.0.1:PORT`` to the UNIX socket ``SOCKET`` (where ``skillgrad
serve --socket`` listens, outside the namespace: a socket file is reached through the file
system, not the network), runs the program and exits with its status. Nothing the program
opens can leave the machine: there is no other interface, and the one endpoint it can reach is
skillgrad's.

``--bind SRC DST`` mounts the folder SRC at DST for the program alone (its own mount
namespace): every rollout's agent then works in the same folder and HOME by name, so the
paths an agent writes into its prompt are the same from task to task and a local model reuses
the whole processed prompt prefix.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import subprocess
import sys
import threading

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring the namespace's loopback interface up (what ``ip link set lo up`` does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:  # the other side closed: the exchange is over
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, target: str) -> None:
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


USAGE = ("usage: python -m skillgrad.models.netns SOCKET PORT [--bind SRC DST]... "
         "[--cd DIR] -- PROGRAM [ARGS...]")


def main(argv: list[str]) -> int:
    if len(argv) < 4 or "--" not in argv:
        print(USAGE, file=sys.stderr)
        return 2
    split = argv.index("--")
    target, port, options, program = argv[0], int(argv[1]), argv[2:split], argv[split + 1:]
    cwd = None
    while options:
        if options[0] == "--bind" and len(options) >= 3:
            done = subprocess.run(["mount", "--bind", options[1], options[2]],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"cannot mount {options[1]} at {options[2]}: "
                      f"{done.stderr.strip() or done.returncode}", file=sys.stderr)
                return 125
            options = options[3:]
        elif options[0] == "--cd" and len(options) >= 2:
            cwd, options = options[1], options[2:]
        else:
            print(USAGE, file=sys.stderr)
            return 2
    if not program:
        print(USAGE, file=sys.stderr)
        return 2
    loopback_up()
    listener = socket.create_server(("127.0.0.1", port))
    threading.Thread(target=_serve, args=(listener, target), daemon=True).start()
    try:
        return subprocess.run(program, cwd=cwd, check=False).returncode
    except FileNotFoundError:
        print(f"{program[0]}: not found", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
