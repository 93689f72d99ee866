#!/usr/bin/env python3
"""make bench, part d: the long-running agent's idle cost and its time from exec to READY=1.

usage: idle.py PUSHREPORTER CONFIG STATE_DIR ACCOUNTS IDLE_SECONDS

Binds a datagram socket as systemd would for NOTIFY_SOCKET, starts `pushreporter run` with it,
and times exec -> READY=1. With IDLE_SECONDS > 0 it then waits until STATUS= says every account
is reported, lets it settle for a second, and measures the CPU time the agent uses over
IDLE_SECONDS (the sum of its threads' schedstat, in nanoseconds; utime + stime from /proc/PID/stat,
in 10 ms ticks, beside it), and its resident memory (VmRSS, and VmHWM, the
peak). Stops the agent with SIGTERM and checks it exits 0. Prints one line of key=value figures.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def thread_nanoseconds(pid: int) -> dict:
    """Time on CPU per live thread, in nanoseconds (schedstat: finer than the 10 ms ticks of stat)."""
    times = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                times[task] = int(schedstat.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return times


def used_nanoseconds(before: dict, after: dict) -> int:
    """CPU used between two samples by the threads alive at the second (new ones from zero)."""
    return sum(value - before.get(task, 0) for task, value in after.items())


def memory_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def main() -> None:
    binary, config, state, accounts, idle = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    directory = tempfile.mkdtemp(prefix="pushreporter-notify-")
    path = os.path.join(directory, "notify.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(1)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    env.pop("JOURNAL_STREAM", None)
    with open(os.path.join(state, "agent.err"), "w") as err:
        start = time.monotonic()
        agent = subprocess.Popen([binary, "run", "--config", config, "--state-dir", state], env=env,
                                 stdout=subprocess.DEVNULL, stderr=err)
        ready = None
        settled = idle <= 0
        want = f"STATUS={accounts} accounts: {accounts} reported, 0 retrying"
        try:
            while ready is None or not settled:
                # In one-second slices, so that an agent that died (or a STATUS= worded otherwise)
                # ends the wait with a sentence instead of ten silent minutes.
                try:
                    message = listener.recv(4096).decode()
                except socket.timeout:
                    if agent.poll() is not None:
                        sys.exit(f"the agent exited {agent.returncode} before it was {'ready' if ready is None else 'settled'}")
                    if time.monotonic() - start > 600:
                        sys.exit(f"no {'READY=1' if ready is None else repr(want)} within 10 minutes")
                    continue
                if ready is None and message.startswith("READY=1"):
                    ready = time.monotonic() - start
                for line in message.split("\n"):
                    if line == want:
                        settled = True
            figures = {"ready_ms": f"{ready * 1000:.0f}"}
            if idle > 0:
                time.sleep(1)
                before, before_threads = cpu_seconds(agent.pid), thread_nanoseconds(agent.pid)
                time.sleep(idle)
                after, after_threads = cpu_seconds(agent.pid), thread_nanoseconds(agent.pid)
                figures["idle_cpu_ms"] = f"{used_nanoseconds(before_threads, after_threads) / 1e6:.1f}"
                figures["idle_cpu_ticks_ms"] = f"{(after - before) * 1000:.0f}"
                figures["rss_kb"] = str(memory_kb(agent.pid, "VmRSS"))
                figures["peak_rss_kb"] = str(memory_kb(agent.pid, "VmHWM"))
                figures["anon_kb"] = str(memory_kb(agent.pid, "RssAnon"))
                figures["file_kb"] = str(memory_kb(agent.pid, "RssFile"))
            agent.send_signal(signal.SIGTERM)
            status = agent.wait(timeout=60)
            figures["exit"] = str(status)
            print(" ".join(f"{key}={value}" for key, value in figures.items()))
        finally:
            if agent.poll() is None:
                agent.kill()
            listener.close()
            os.unlink(path)
            os.rmdir(directory)


if __name__ == "__main__":
    main()
