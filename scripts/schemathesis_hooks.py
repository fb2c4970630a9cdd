"""Schemathesis hooks for scripts/schemathesis: drop generated bodies that JSON Schema calls valid but
Tally refuses on purpose, for reasons openapi.yaml states in words because JSON Schema cannot:

- an integer field written as a float (`1337.0`, `1e3`): JSON Schema counts `1.0` as an integer, Tally
  refuses it (one value, one spelling: no parser differential);
- a password longer than 72 UTF-8 bytes after NFKC, or containing NUL: JSON Schema counts characters,
  bcrypt reads bytes up to the first NUL, and Tally refuses rather than cut.

Only drops, never alters: a body the fuzzer meant as invalid stays invalid.
"""
import unicodedata

import schemathesis

INTEGER_FIELDS = {"amount", "ttlSeconds"}


def _password_fits(value):
    if not isinstance(value, str):
        return True
    normalised = unicodedata.normalize("NFKC", value)
    return "\x00" not in normalised and len(normalised.encode("utf-8", "surrogatepass")) <= 72


@schemathesis.hook
def filter_body(context, body):
    if not isinstance(body, dict):
        return True
    for name in INTEGER_FIELDS:
        if isinstance(body.get(name), float):
            return False
    return _password_fits(body.get("password"))
