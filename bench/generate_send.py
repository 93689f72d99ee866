#!/usr/bin/env python3
"""Writes the run --once benchmark's inputs: DIR/config.yaml with N accounts reporting to BASE
with the Acrobits GET template, and DIR/curl.conf with the same N URLs for curl -K.

usage: generate_send.py DIR N BASE
"""
import hashlib
import sys
import urllib.parse


def main() -> None:
    directory, count, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    url_template = (base + "/token/?username=%account[username]%&selector=%selector%"
                    "&token_msgs=%pushTokenOther%&appid_msgs=%pushappid_other%")
    with open(f"{directory}/config.yaml", "w") as config, open(f"{directory}/curl.conf", "w") as curl:
        config.write("agent:\n  concurrency: 64\n  perHostConcurrency: 64\n  timeout: 30s\n")
        config.write("defaults:\n  pushappid_other: com.example.app\n")
        config.write(f"  pushTokenReporterUrl: '{url_template}'\n")
        config.write("accounts:\n")
        for index in range(count):
            digest = hashlib.sha1(str(index).encode()).hexdigest().upper()
            selector = f"{digest}:{digest[:8]}"
            token = hashlib.sha256(str(index).encode()).hexdigest()
            username = f"user{index:06d}"
            config.write(f"  - {{username: {username}, selector: '{selector}', pushTokenOther: {token}}}\n")
            query = urllib.parse.urlencode({"username": username, "selector": selector, "token_msgs": token,
                                            "appid_msgs": "com.example.app"}, safe=":")
            curl.write(f'url = "{base}/token/?{query}"\noutput = "/dev/null"\n')


if __name__ == "__main__":
    main()
