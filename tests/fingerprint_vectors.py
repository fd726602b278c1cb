#!/usr/bin/env python3
"""Writes tests/fingerprint_vectors.json from docs/fingerprints.md's rules, independently of eddy.

The canonical texts below were written by hand from the rules; this script only hashes them with
the documented digest formulas (hashlib, nothing of eddy's), so the vectors check eddy rather than
repeat it. tests/fingerprint_vectors.rs checks eddy against the JSON file.

    python3 tests/fingerprint_vectors.py > tests/fingerprint_vectors.json
"""
import hashlib
import json
import struct


def raw_fp(tool: str, tool_input) -> str:
    """keelwave v1: sha256(tool_name || 0x00 || tool_input bytes as they arrived)."""
    data = tool.encode() + b"\x00" + (tool_input.encode() if tool_input is not None else b"")
    return hashlib.sha256(data).hexdigest()


def framed(domain: str, parts) -> bytes:
    """sha256(domain || for each part: u64 little-endian length || bytes)."""
    h = hashlib.sha256(domain.encode())
    for p in parts:
        h.update(struct.pack("<Q", len(p)))
        h.update(p)
    return h.digest()


def canonical_input_fp(tool: str, text: str) -> str:
    return framed("eddy.canon.input.v1", [tool.encode(), text.encode()]).hex()


def canonical_output_fp(success, text: str) -> str:
    flag = {True: b"1", False: b"0", None: b"-"}[success]
    return framed("eddy.canon.output.v1", [flag, text.encode()]).hex()


def key64(domain: str, parts) -> int:
    """The first 8 digest bytes, read as a little-endian u64."""
    return struct.unpack("<Q", framed(domain, parts)[:8])[0]


def event_id(parts) -> str:
    """Output event ids: the first 16 bytes of sha256("eddy.v1" || framed parts), as hex."""
    return framed("eddy.v1", [p.encode() for p in parts])[:16].hex()


def hex64(k: int) -> str:
    return f"{k:016x}"


def oversized(raw: str, cap: int) -> str:
    prefix = hashlib.sha256(raw.encode()[:cap]).digest()[:16].hex()
    return json.dumps(f"<oversized {len(raw.encode())} bytes, prefix sha256 {prefix}>")


HTTP_IN = (
    '"HTTP/1.1 200 OK\\nDate: Tue, 01 May 2024 12:00:00 GMT\\nX-Request-Id: abc\\n'
    'Set-Cookie: s=1\\nContent-Type: text/plain\\n\\nbody 42"'
)
HTTP_OUT = (
    '"HTTP/1.1 200 OK\\nDate: <volatile>\\nX-Request-Id: <volatile>\\n'
    'Set-Cookie: <redacted>\\nContent-Type: text/plain\\n\\nbody 42"'
)
BIG_IN = '{"q":"aaaaaaaaaaaaaaaaaaaa"}'

# name, tool, tool_input (raw text, None = absent), canonical input, tool_output (raw text),
# canonical output, tool_success, max_field_bytes (None = default)
CASES = [
    ("key_order_and_whitespace", "web_search", '{ "q": "keelwave", "limit": 5 }',
     '{"limit":5,"q":"keelwave"}', '{"results": []}', '{"results":[]}', True, None),
    ("nested_objects_sorted_arrays_kept", "t", '{"b":{"z":1,"a":[3,1,2]},"a":null}',
     '{"a":null,"b":{"a":[3,1,2],"z":1}}', '"ok"', '"ok"', False, None),
    ("numbers",
     "calc",
     '{"n":[1.0,-0.0,1.50,1E2,0.1,-5,1e-5,1e-7,0.000001,123456789012345678,'
     '9007199254740993.0,1e16,1.5e17,1e21,18446744073709551616]}',
     '{"n":[1,0,1.5,100,0.1,-5,0.00001,1e-7,1e-6,123456789012345678,'
     '9007199254740992.0,1e+16,1.5e+17,1e+21,1.8446744073709552e+19]}',
     None, "null", None, None),
    ("volatile_keys_removed", "search",
     '{"query":"x","request_id":"abc","createdAt":"2024","meta":{"trace_id":"t",'
     '"Request-Id":"r","updated_at":1,"x_timestamp":5,"keep":true}}',
     '{"meta":{"keep":true},"query":"x"}', '[]', '[]', True, None),
    ("secrets_redacted", "login",
     '{"user":"bob","password":"hunter2","headers":{"Authorization":"Bearer abc",'
     '"X-Api-Key":"k"},"token_count":3}',
     '{"headers":{"Authorization":"<redacted>","X-Api-Key":"<redacted>"},'
     '"password":"<redacted>","token_count":3,"user":"bob"}',
     '{"ok":true}', '{"ok":true}', True, None),
    ("volatile_values_in_strings", "log",
     '{"msg":"job 123e4567-e89b-12d3-a456-426614174000 done at 2024-05-01T12:30:45.123Z '
     'in 0.532s (id deadbeefcafe1234, epoch 1714566645, clock 12:30:45)"}',
     '{"msg":"job <uuid> done at <ts> in <dur> (id <hex>, epoch <epoch>, clock <time>)"}',
     None, "null", None, None),
    ("http_response_dump", "fetch", '{"url":"https://example.com/a"}',
     '{"url":"https://example.com/a"}', HTTP_IN, HTTP_OUT, True, None),
    ("keys_in_utf8_byte_order", "t", '{"\\uff61":1,"\\ud83d\\ude00":2,"a":3}',
     '{"a":3,"\uff61":1,"\U0001f600":2}', None, "null", None, None),
    ("string_escapes", "t", '{"s":"tab\\there \\"q\\" back\\\\slash \\u0001 \\u007f \u00e9 \\u2028"}',
     '{"s":"tab\\there \\"q\\" back\\\\slash \\u0001 \x7f \u00e9 \u2028"}', None, "null", None, None),
    ("repeated_key_keeps_the_last", "t", '{"a":1,"a":2}', '{"a":2}', None, "null", None, None),
    ("absent_input", "get_quota", None, "null", None, "null", None, None),
    # `null` counts as absent: the raw fingerprint hashes no input bytes.
    ("null_input_is_absent", "get_quota", "null", "null", "null", "null", None, None),
    ("oversized_field", "t", BIG_IN, oversized(BIG_IN, 16), '"x"', '"x"', True, 16),
]


def vector(name, tool, tin, cin, tout, cout, success, cap):
    hashed = None if tin == "null" else tin
    v = {
        "name": name,
        "tool_name": tool,
        "tool_input": tin,
        "tool_output": tout,
        "tool_success": success,
        "canonical_input": cin,
        "canonical_output": cout,
        "raw_fp": raw_fp(tool, hashed),
        "canonical_input_fp": canonical_input_fp(tool, cin),
        "canonical_output_fp": canonical_output_fp(success, cout),
    }
    if cap is not None:
        v["max_field_bytes"] = cap
    return v


def main():
    vectors = [vector(*c) for c in CASES]
    # Signal fingerprints of the repeated-call trace in tests/fingerprint_vectors.rs: the same
    # `write_file` call and output, again and again.
    tool, tin, tout = "write_file", '{"path":"a.txt","text":"x"}', '"written"'
    cin, cout = '{"path":"a.txt","text":"x"}', '"written"'
    primary = struct.unpack("<Q", bytes.fromhex(canonical_input_fp(tool, cin))[:8])[0]
    output = struct.unpack("<Q", bytes.fromhex(canonical_output_fp(True, cout))[:8])[0]
    signals = {
        "trace": {"tool_name": tool, "tool_input": tin, "tool_output": tout, "tool_success": True},
        "keelwave_fingerprint": raw_fp(tool, tin),
        "repeated_operation": hex64(
            key64("op", [struct.pack("<Q", primary), struct.pack("<Q", output)])
        ),
        # The trace is run "r" of project "p", ended by a run_finished event.
        "run_terminated_event_id": event_id(["p", "r", "run_terminated"]),
    }
    out = {
        "about": "Test vectors for docs/fingerprints.md, written by tests/fingerprint_vectors.py "
                 "(canonical texts by hand, digests with Python's hashlib) and checked against "
                 "eddy by tests/fingerprint_vectors.rs.",
        "steps": vectors,
        "signals": signals,
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
