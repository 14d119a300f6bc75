#!/usr/bin/env python3
"""Prints N distinct ports free on 127.0.0.1 right now, one per line: free_ports.py N

The ports are taken from 10000-19999, below Linux's ephemeral range (32768-60999). A port the kernel hands out for
`bind(0)` can be handed out again to any outgoing connection on the machine before the process meant to listen on
it binds it; a port below that range is only ever taken by an explicit bind. (The Rust tests' own `free_port` takes
20000-31999, so the two never choose the same port.) Every port is held bound until all N are chosen, so no two
are the same.
"""
import random
import socket
import sys

wanted = int(sys.argv[1])
candidates = list(range(10000, 20000))
random.shuffle(candidates)
held = []
for port in candidates:
    if len(held) == wanted:
        break
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    held.append(s)
if len(held) < wanted:
    sys.exit(f"free_ports.py: found {len(held)} free ports in 10000-19999 on 127.0.0.1, needed {wanted}")
print("\n".join(str(s.getsockname()[1]) for s in held))
