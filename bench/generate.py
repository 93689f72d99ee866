#!/usr/bin/env python3
"""Writes the benchmark configuration: a directory of two YAML files, 100,000 accounts in all.

  usage: generate.py OUT_DIR [ACCOUNTS]     (ACCOUNTS defaults to 100000)

- OUT_DIR/10-get.yaml  (80% of the accounts): `defaults:` holds the Acrobits GET
  pushTokenReporterUrl of SPEC §2 (%account[username]%, %account[password]%, %selector%,
  %pushTokenOther%, %pushappid_other%, %pushTokenIncomingCall%, %pushappid_incoming_call%).
- OUT_DIR/20-json.yaml (20%): a team on a JSON receiver: `defaults:` holds a JSON POST body,
  its Content-Type, a custom header with an HMAC signature over a global secret, and an
  accountRemovalReporterUrl.

Every account has id, username, password, selector, pushTokenOther, pushappid_other,
pushTokenIncomingCall and pushappid_incoming_call, with values shaped like real ones (40+8 hex
selectors, base64 tokens that contain '/', '+' and '=', reverse-DNS app ids). The output is
deterministic (fixed seed), so every run measures the same bytes. Standard library only.
"""

import argparse
import base64
import os
import random

SEED = 20240611

GET_URL = ("https://prov.example.com/token/?username=%account[username]%&password=%account[password]%"
           "&selector=%selector%&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%"
           "&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%")

JSON_BODY = ('{ "username" : "%account[username]%", "token_calls" : "%pushTokenIncomingCall%", '
             '"token_msgs" : "%pushTokenOther%", "selector" : "%selector%", '
             '"appId_calls": "%pushappid_incoming_call%", "appId_msgs" : "%pushappid_other%" }')

APPS = [("com.cloudsoftphone.app", "com.cloudsoftphone.app.pushkit"),
        ("com.example.softphone", "com.example.softphone.voip"),
        ("net.example.desk", "net.example.desk.voip")]


def token(rng, length):
    return base64.b64encode(rng.randbytes(length)).decode("ascii")


def account_lines(rng, index, prefix):
    user = f"{prefix}{index:06d}"
    app_other, app_calls = APPS[index % len(APPS)]
    selector = f"{rng.getrandbits(160):040X}:{rng.getrandbits(32):08X}"
    lines = [
        f"  - id: {user}",
        f"    username: {user}",
        f"    password: \"{rng.getrandbits(48):012x}\"",
        f"    selector: {selector}",
        f"    pushTokenOther: {token(rng, 48)}",
        f"    pushappid_other: {app_other}",
        # base64 of 32 bytes ends in '=' and often holds '/' or '+': quoted as YAML needs nothing,
        # but a few accounts quote it anyway, as people do.
        f"    pushTokenIncomingCall: \"{token(rng, 32)}\"" if index % 7 == 0 else
        f"    pushTokenIncomingCall: {token(rng, 32)}",
        f"    pushappid_incoming_call: {app_calls}",
    ]
    return lines


def write_get(path, rng, count):
    with open(path, "w", encoding="utf-8") as out:
        out.write("# Benchmark configuration (bench/generate.py): Acrobits GET reports.\n")
        out.write("agent:\n  timeout: 20s\n  concurrency: 32\n  perHostConcurrency: 8\n")
        out.write("  retry: {initial: 5s, multiplier: 2, max: 30m, maxRetryAfter: 1h}\n")
        out.write("defaults:\n")
        out.write(f"  pushTokenReporterUrl: {GET_URL}\n")
        out.write("accounts:\n")
        for i in range(count):
            out.write("\n".join(account_lines(rng, i, "user")) + "\n")


def write_json(path, rng, count):
    with open(path, "w", encoding="utf-8") as out:
        out.write("# Benchmark configuration (bench/generate.py): a team on a JSON receiver.\n")
        out.write("globals:\n  appId: com.example.softphone\n")
        out.write(f"  receiverSecret: \"{rng.getrandbits(128):032x}\"\n")
        out.write("defaults:\n")
        out.write("  pushTokenReporterUrl: https://push.example.com/v1/token/%account[username]%\n")
        out.write(f"  pushTokenReporterPostData: '{JSON_BODY}'\n")
        out.write("  pushTokenReporterContentType: application/json\n")
        out.write("  pushTokenReporterCustomHeaders: |\n")
        out.write("    X-App: %appId%\n")
        out.write("    X-Signature: %hmac_sha256(%receiverSecret%,%account[username]%:%selector%)%\n")
        out.write("  pushTokenReporterTimeout: 10s\n")
        out.write("  accountRemovalReporterUrl: https://push.example.com/v1/token/%account[username]%\n")
        out.write("  accountRemovalReporterMethod: DELETE\n")
        out.write("accounts:\n" if count else "accounts: []\n")
        for i in range(count):
            out.write("\n".join(account_lines(rng, i, "team")) + "\n")


def main():
    parser = argparse.ArgumentParser(
        description="Write the benchmark configuration (two YAML files) into OUT_DIR.")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory to write 10-get.yaml and 20-json.yaml into")
    parser.add_argument("accounts", metavar="ACCOUNTS", nargs="?", type=int, default=100_000,
                        help="number of accounts in all (default 100000)")
    args = parser.parse_args()
    if args.out_dir.isdigit():
        parser.error(f"OUT_DIR comes first: '{args.out_dir}' looks like a number of accounts")
    if args.accounts < 1:
        parser.error("ACCOUNTS must be at least 1")
    json_count = args.accounts // 5
    os.makedirs(args.out_dir, exist_ok=True)
    rng = random.Random(SEED)
    write_get(os.path.join(args.out_dir, "10-get.yaml"), rng, args.accounts - json_count)
    write_json(os.path.join(args.out_dir, "20-json.yaml"), rng, json_count)


if __name__ == "__main__":
    main()
