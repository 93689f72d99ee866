#!/usr/bin/env python3
"""Writes the sending benchmarks' inputs: DIR/config.yaml with N accounts reporting to BASE, and,
for the Acrobits backend, DIR/curl.conf with the same N URLs for `curl -K`.

usage: generate_send.py DIR N BASE [--backend acrobits|journeys|fcm] [--shape plain|rich] [--change INDEX]
                         [--unreachable EVERY]

- acrobits (default): each account's own Acrobits GET `pushTokenReporterUrl` (from `defaults:`).
- journeys: every account registers with one Customer Insights – Journeys service, in batches of
  100 (`trackRegistration: false`, so a 202 is delivered and the receiver needs no state).
- fcm: every account joins a Firebase device group with 19 others (a batch of 20 tokens is one
  request), with a legacy server key so that no OAuth token is fetched.

`--shape rich` (acrobits): the richer account of issue 35: two device tokens and both app ids,
a longer URL that carries them all, and an `accountRemovalReporterUrl` (so each account keeps a
removal), as softphone deployments have them.
`--change INDEX` gives account INDEX another token, as a reload that changes one account sees it.
`--unreachable EVERY` (acrobits) sends every EVERY-th account to a closed loopback port, a receiver
that is down: those accounts retry for as long as the agent runs.
Deterministic: the same arguments write the same bytes.
"""
import argparse
import hashlib
import urllib.parse

ACROBITS_URL = ("/token/?username=%account[username]%&selector=%selector%"
                "&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%")
RICH_URL = ("/token/v2/?username=%account[username]%&selector=%selector%"
            "&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%"
            "&token_calls=%pushTokenIncomingCall%&appid_calls=%pushappid_incoming_call%"
            "&device=%account[username]%-%selector%")
RICH_REMOVAL = "/token/remove/?username=%account[username]%&selector=%selector%"


def account(index: int, change: int | None) -> tuple[str, str, str]:
    """The username, selector and token of account `index`."""
    digest = hashlib.sha1(str(index).encode()).hexdigest().upper()
    seed = f"{index}-changed" if index == change else str(index)
    return f"user{index:06d}", f"{digest}:{digest[:8]}", hashlib.sha256(seed.encode()).hexdigest()


def calls_token(index: int) -> str:
    """The incoming-call (PushKit) token of account `index` in the rich shape."""
    return hashlib.sha256(f"{index}-calls".encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory")
    parser.add_argument("count", type=int)
    parser.add_argument("base")
    parser.add_argument("--backend", choices=["acrobits", "journeys", "fcm"], default="acrobits")
    parser.add_argument("--shape", choices=["plain", "rich"], default="plain")
    parser.add_argument("--change", type=int)
    parser.add_argument("--unreachable", type=int)
    parser.add_argument("--listen", help="agent.listen (HOST:PORT), for the agent's /metrics")
    args = parser.parse_args()
    base = args.base
    with open(f"{args.directory}/config.yaml", "w") as config:
        config.write("agent:\n  concurrency: 64\n  perHostConcurrency: 64\n  timeout: 30s\n")
        if args.listen:
            config.write(f"  listen: {args.listen}\n")
        rich = args.shape == "rich"
        if args.backend == "acrobits":
            config.write("defaults:\n  pushappid_other: com.example.app\n")
            if rich:
                config.write("  pushappid_incoming_call: com.example.app.voip\n")
                config.write(f"  pushTokenReporterUrl: '{base}{RICH_URL}'\n")
                config.write(f"  accountRemovalReporterUrl: '{base}{RICH_REMOVAL}'\n")
            else:
                config.write(f"  pushTokenReporterUrl: '{base}{ACROBITS_URL}'\n")
            service = ""
        elif args.backend == "journeys":
            config.write("services:\n  journeys:\n    type: customer-insights-journeys\n")
            config.write(f"    publicEndpoint: {base}\n")
            config.write("    orgId: 0a1b2c3d-0000-0000-0000-000000000000\n")
            config.write("    mobileAppId: 00000000-0000-0000-0000-000000000000\n")
            config.write("    apiToken: bench-api-token\n    trackRegistration: false\n")
            service = "journeys"
        else:
            config.write("services:\n  fcm:\n    type: fcm-device-group\n")
            config.write(f"    endpoint: {base}/fcm/notification\n")
            config.write("    projectId: bench-project\n    serverKey: bench-server-key\n")
            service = "fcm"
        config.write("accounts:\n")
        curl = open(f"{args.directory}/curl.conf", "w") if args.backend == "acrobits" else None
        try:
            for index in range(args.count):
                username, selector, token = account(index, args.change)
                if args.backend == "acrobits":
                    if args.unreachable and index % args.unreachable == args.unreachable - 1:
                        # Port 1 on loopback: nothing listens, the connection is refused at once.
                        config.write(f"  - {{username: {username}, selector: '{selector}', pushTokenOther: {token}, "
                                     f"pushTokenReporterUrl: 'http://127.0.0.1:1{ACROBITS_URL}'}}\n")
                        continue
                    if rich:
                        calls = calls_token(index)
                        config.write(f"  - {{username: {username}, selector: '{selector}', pushTokenOther: {token}, "
                                     f"pushTokenIncomingCall: {calls}}}\n")
                        query = urllib.parse.urlencode({"username": username, "selector": selector, "token_msgs": token,
                                                        "appid_msgs": "com.example.app", "token_calls": calls,
                                                        "appid_calls": "com.example.app.voip",
                                                        "device": f"{username}-{selector}"}, safe=":")
                        curl.write(f'url = "{base}/token/v2/?{query}"\noutput = "/dev/null"\n')
                        continue
                    config.write(f"  - {{username: {username}, selector: '{selector}', pushTokenOther: {token}}}\n")
                    query = urllib.parse.urlencode({"username": username, "selector": selector, "token_msgs": token,
                                                    "appid_msgs": "com.example.app"}, safe=":")
                    curl.write(f'url = "{base}/token/?{query}"\noutput = "/dev/null"\n')
                elif args.backend == "journeys":
                    user_id = hashlib.md5(username.encode()).hexdigest()
                    user_id = f"{user_id[:8]}-{user_id[8:12]}-{user_id[12:16]}-{user_id[16:20]}-{user_id[20:]}"
                    config.write(f"  - {{username: {username}, pushTokenOther: {token}, "
                                 f"services: {{{service}: {{userId: {user_id}, platform: ios}}}}}}\n")
                else:
                    config.write(f"  - {{username: {username}, pushTokenOther: {token}, "
                                 f"services: {{{service}: {{group: team{index // 20:06d}}}}}}}\n")
        finally:
            if curl:
                curl.close()


if __name__ == "__main__":
    main()
