"""Schemathesis checks of Flowhost's own (tests/tests/schemathesis.rs loads this module with SCHEMATHESIS_HOOKS).

no_internals_in_errors: an error answer (4xx or 5xx) says what was wrong with the request, never how the
server is built: no driver or runtime text (wasmtime chains, backtraces, database or broker client errors),
no source paths, no panics.
"""
import re

import schemathesis

INTERNALS = re.compile(
    r"wasmtime|wasm backtrace|panicked at|RUST_BACKTRACE|\.rs:\d+|/src/|/root/|/home/|/tmp/"
    r"|librdkafka|KafkaError|rdkafka|mongodb::|MongoError|Kind: |redis::|RedisError|async_nats|sqlite|SQLITE"
    r"|os error \d+|Connection refused|stack backtrace",
    re.IGNORECASE,
)


@schemathesis.check
def no_internals_in_errors(ctx, response, case):
    if response.status_code < 400:
        return None
    found = INTERNALS.search(response.text or "")
    if found:
        raise AssertionError(f"the error body names an internal ({found.group(0)!r}): {response.text[:300]}")
    return None
