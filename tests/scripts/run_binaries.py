#!/usr/bin/env python3
"""Runs the workspace's test binaries a few at a time and prints each one's output whole, in cargo's format.

Usage: run_binaries.py ARTIFACTS DIGEST [ARGS...]
  ARTIFACTS  the output of `cargo test --no-run --message-format=json-render-diagnostics`
  DIGEST     a file to write each failed test's name and panic message to, without the backtrace (what a
             reader of a long log needs first; `tests/run.sh` prints it last)
  ARGS       passed to every test binary (a name filter, `--ignored`, ...)

Most of the suite's time is spent waiting (consumer groups joining, leases expiring, processes starting), so
`cargo test`, which runs one binary after another, left the machine idle. Here up to FLOWHOST_TEST_JOBS binaries
(default 2) run at once, the longest first; the binaries that keep a core busy by themselves (they drive a Python
fuzzer) never run beside each other. Each binary runs in its package's directory, as under `cargo test`.
Exits with 1 when any binary fails (every binary runs: a failure never hides the ones after it).
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

# Test binaries by their usual duration, longest first (the rest follow in the order cargo built them).
LONGEST_FIRST = [
    "scaffold", "schemathesis", "secrets_kept", "scale_out", "presence", "contract_kafka", "engine", "topology",
    "runs", "plugins", "sender", "studio", "services", "inapp", "faults", "fail_soft",
]
# Binaries that keep a core busy for their whole run: one of them at a time.
CPU_BOUND = {"schemathesis", "secrets_kept"}


def binaries(artifacts_path):
    """The test executables of the build, as (name, executable, package directory)."""
    found = []
    with open(artifacts_path, encoding="utf-8") as artifacts:
        for line in artifacts:
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if message.get("reason") != "compiler-artifact" or not message.get("executable"):
                continue
            if not message.get("profile", {}).get("test"):
                continue
            target = message["target"]
            name = target["name"] if target["kind"] != ["lib"] else target["name"] + " (lib)"
            found.append((name, message["executable"], os.path.dirname(message["manifest_path"]), target["src_path"]))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    return sorted(found, key=lambda b: rank.get(b[0], len(rank)))


def failure_digest(binary, output, lines_per_failure=6, width=300):
    """Each failed test of a binary's output: its name, then its panic message up to the backtrace."""
    digest = []
    for section in re.split(r"^---- ", output, flags=re.MULTILINE)[1:]:
        header, _, body = section.partition("\n")
        name = header.removesuffix(" stdout ----").removesuffix(" stderr ----")
        lines = []
        started = False
        for line in body.splitlines():
            if line.startswith(("stack backtrace:", "note: run with", "failures:", "---- ")):
                if started:
                    break
            if "panicked at" in line:
                started = True
            if started and line.strip():
                lines.append(line if len(line) <= width else line[:width] + " [...]")
            if len(lines) >= lines_per_failure:
                break
        digest.append(f"{binary}::{name}\n" + "".join(f"    {line}\n" for line in lines or ["(no panic message)"]))
    return digest


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    queue = binaries(sys.argv[1])
    digest_path = sys.argv[2]
    extra = sys.argv[3:]
    digest = []
    jobs = max(1, int(os.environ.get("FLOWHOST_TEST_JOBS", "2")))
    lock = threading.Condition()
    cpu_bound_running = [False]
    failed = []

    def next_binary():
        """The next binary to run (not a CPU-bound one while another runs), or None when none is left."""
        with lock:
            while queue:
                for i, binary in enumerate(queue):
                    if binary[0] not in CPU_BOUND or not cpu_bound_running[0]:
                        if binary[0] in CPU_BOUND:
                            cpu_bound_running[0] = True
                        return queue.pop(i)
                lock.wait()
            return None

    def worker():
        while (binary := next_binary()) is not None:
            name, executable, directory, source = binary
            started = time.monotonic()
            try:
                done = subprocess.run([executable, *extra], cwd=directory, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, check=False)
            except OSError as error:
                done = subprocess.CompletedProcess(executable, 127, f"cannot start: {error}\n".encode())
            with lock:
                if name in CPU_BOUND:
                    cpu_bound_running[0] = False
                    lock.notify_all()
                relative = os.path.relpath(source, os.path.dirname(directory))
                print(f"     Running {relative} ({executable}) [{time.monotonic() - started:.1f} s]", flush=True)
                sys.stdout.buffer.write(done.stdout)
                sys.stdout.flush()
                if done.returncode != 0:
                    failed.append(name)
                    digest.extend(failure_digest(name, done.stdout.decode("utf-8", "replace")))
                    print(f"error: test binary `{name}` failed (exit status {done.returncode})", flush=True)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(digest_path, "w", encoding="utf-8") as out:
        out.write("".join(digest))
    if failed:
        print(f"error: {len(failed)} test binaries failed: {', '.join(failed)}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
