#!/usr/bin/env python3
"""Two builds of pushreporter side by side, in turns: `make bench-compare BASE=<commit>`.

Usage: compare.py BASE_BIN_DIR NEW_BIN_DIR OUT_DIR

For a change that must not make anything slower (a restructuring): each command runs with the
base binary, then the new one, then the base again, …, so both meet the same spells of a busy
machine; the medians and the ratio of each turn (new / base) are printed. The commands are the
ones the product's goals are measured on (bench/README.md): validate, preview, run --once against
a loopback nginx, and the long-running agent's start (exec to READY=1 and to every account
reported, and its resident memory then).
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from measure import Agent, Nginx, Run, env_int, env_sizes, median, mb, say, sent, thousands  # noqa: E402


def turns(label: str, commands, runs: int, prepare=None, check=None) -> None:
    """Runs `commands["base"]` and `commands["new"]` in turns, `runs` times each."""
    measured = {"base": [], "new": []}
    for _ in range(runs):
        for which in ("base", "new"):
            if prepare:
                prepare()
            run = commands[which]()
            if check:
                check(run, which)
            measured[which].append(run)
    report(label, measured)


def report(label: str, measured) -> None:
    base, new = measured["base"], measured["new"]
    b = sorted(base, key=lambda r: r.wall)[len(base) // 2]
    n = sorted(new, key=lambda r: r.wall)[len(new) // 2]
    ratios = " ".join(f"{x.wall / y.wall:.2f}" for x, y in zip(new, base))
    say(f"   {label:<28} base {b.wall:6.2f} s  CPU {b.cpu:5.2f} s  RSS {mb(b.rss_kb):>7}   "
        f"new {n.wall:6.2f} s  CPU {n.cpu:5.2f} s  RSS {mb(n.rss_kb):>7}   new/base {n.wall / b.wall:.2f} (turns: {ratios})")


class AgentRun:
    """The long-running agent's start, as one measurement: READY=1, then every account reported."""

    def __init__(self, binary: str, config: str, state: str, count: int):
        subprocess.run(["rm", "-rf", state], check=True)
        os.makedirs(state)
        agent = Agent(binary, config, state)
        try:
            ready = agent.wait_for(lambda line: line == "READY=1", "READY=1")
            settled = f"STATUS={count} accounts: {count} reported, 0 retrying"
            done = agent.wait_for(lambda line: line == settled, "every account reported")
            self.ready = ready - agent.start
            self.wall = done - agent.start
            self.rss_kb = agent.status("VmRSS")
            self.cpu = agent.ticks() / os.sysconf("SC_CLK_TCK")
        finally:
            code = agent.stop()
        if code != 0:
            raise SystemExit(f"compare: the agent exited {code} on SIGTERM (log: {state}/agent.err)")


def main() -> None:
    base_dir, new_dir, out = sys.argv[1:4]
    binaries = {"base": os.path.join(base_dir, "pushreporter"), "new": os.path.join(new_dir, "pushreporter")}
    runs = env_int("BENCH_RUNS", 3)
    out = os.path.join(out, "compare")
    os.makedirs(out, exist_ok=True)
    say(f"== base {binaries['base']}\n== new  {binaries['new']}\n== {runs} runs of each, in turns (base, new, base, …)")

    for size in env_sizes("BENCH_VALIDATE_SIZES", "100000"):
        config = os.path.join(out, "validate", str(size))
        if not os.path.exists(os.path.join(config, ".complete")):
            subprocess.run(["rm", "-rf", config], check=True)
            subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), config, str(size)], check=True)
            open(os.path.join(config, ".complete"), "w").close()
        turns(f"validate {thousands(size)}", {
            which: (lambda binary=binary: Run([binary, "validate", "--config", config],
                                              os.path.join(out, "validate.out"), os.path.join(out, "validate.err")))
            for which, binary in binaries.items()}, runs)

    for size in env_sizes("BENCH_PREVIEW_SIZES", "10000"):
        directory = os.path.join(out, "preview", str(size))
        os.makedirs(directory, exist_ok=True)
        subprocess.run([sys.executable, os.path.join(HERE, "generate_send.py"), directory, str(size), "https://push.example.com"],
                       check=True)
        config = os.path.join(directory, "config.yaml")
        turns(f"preview --format json {thousands(size)}", {
            which: (lambda binary=binary: Run([binary, "preview", "--format", "json", "--config", config],
                                              os.path.join(out, "preview.out"), os.path.join(out, "preview.err")))
            for which, binary in binaries.items()}, runs)

    nginx = Nginx(os.path.join(out, "nginx"))
    try:
        for size in env_sizes("BENCH_SEND_SIZES", "10000"):
            directory = os.path.join(out, "send", str(size))
            os.makedirs(directory, exist_ok=True)
            subprocess.run([sys.executable, os.path.join(HERE, "generate_send.py"), directory, str(size), nginx.base], check=True)
            config = os.path.join(directory, "config.yaml")
            state = os.path.join(directory, "state")
            offsets = {}

            def once(binary: str) -> Run:
                subprocess.run(["rm", "-rf", state], check=True)
                offsets["start"] = nginx.offset()
                run = Run([binary, "run", "--once", "--deadline", "300s", "--config", config, "--state-dir", state],
                          os.path.join(out, "run_once.out"), os.path.join(out, "run_once.err"))
                sent(nginx, offsets["start"], run, size, "run --once")
                return run
            turns(f"run --once {thousands(size)}", {which: (lambda binary=binary: once(binary)) for which, binary in binaries.items()},
                  runs)

        size = env_int("BENCH_AGENT_ACCOUNTS", 100000)
        directory = os.path.join(out, "agent", str(size))
        os.makedirs(directory, exist_ok=True)
        subprocess.run([sys.executable, os.path.join(HERE, "generate_send.py"), directory, str(size), nginx.base], check=True)
        config = os.path.join(directory, "config.yaml")
        measured = {"base": [], "new": []}
        for _ in range(runs):
            for which, binary in binaries.items():
                measured[which].append(AgentRun(binary, config, os.path.join(directory, "state"), size))
        report(f"agent start {thousands(size)} (to all reported)", measured)
        for which in ("base", "new"):
            say(f"   {'':<28} {which}: READY=1 after {median([r.ready for r in measured[which]]):.2f} s")
    finally:
        nginx.stop()


if __name__ == "__main__":
    main()
