#!/usr/bin/env python3
"""make bench, part g (issue 19): delivery throughput of 1, 2 and 3 agents sharing their state in
PostgreSQL, beside one agent with SQLite, against the same nginx receiver in the same run.

usage: shared_state.py BIN_DIR OUT_DIR

Then (issue 35) three long-running agents share BENCH_SHARED_ACCOUNTS, then BENCH_SHARED_LARGE
accounts (default 1,000,000; 0 leaves it out) in a fresh database each: every account must be
delivered once; each agent's RSS, the database's size, and its writes per second while the group
is idle (BENCH_IDLE_SECONDS) are reported at both sizes.

Each configuration runs `run --once` on BENCH_SHARED_ACCOUNTS accounts (default 20000) with a
fresh state: the agents start together and each exits once nothing is left to claim and what it
holds is delivered. The figure is accounts per second from the first start to the last exit; the
receiver must see every account, and none twice. PostgreSQL is Debian's, started here in a
temporary directory as an unprivileged user (as root: nobody), on a loopback port, with its
default durability (fsync and synchronous commit on).
"""
import glob
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import HERE, Nginx, Results, env_int, fail, median, say, thousands  # noqa: E402


class Postgres:
    """A PostgreSQL cluster of its own in `directory`, stopped by `stop()`."""

    def __init__(self, directory: str):
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            fail("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): make deps installs it")
        self.bin = os.path.dirname(found[-1])
        self.dir = os.path.abspath(directory)
        subprocess.run(["rm", "-rf", self.dir], check=True)
        os.makedirs(self.dir)
        # initdb and postgres refuse to run as root.
        self.as_user = []
        if os.geteuid() == 0:
            subprocess.run(["chown", "nobody", self.dir], check=True)
            self.as_user = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        data = os.path.join(self.dir, "data")
        self.run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8")
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} -c max_connections=50"
        self.run("pg_ctl", "-D", data, "-l", os.path.join(self.dir, "server.log"), "-o", options, "-w", "-t", "60", "start")
        self.databases = 0

    def run(self, tool: str, *arguments: str) -> None:
        result = subprocess.run(self.as_user + [os.path.join(self.bin, tool), *arguments], capture_output=True, text=True,
                                stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            fail(f"{tool} failed: {result.stderr.strip()[-1000:]}")

    def new_database(self) -> str:
        """A new empty database's URI."""
        self.databases += 1
        name = f"bench{self.databases}"
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def delivered(self, uri: str) -> str:
        """How many subscriptions the database at `uri` says are delivered, of how many (for a
        failure: whether the agents or the receiver's log came up short)."""
        result = subprocess.run(self.as_user + [os.path.join(self.bin, "psql"), "-h", "127.0.0.1", "-p", str(self.port),
                                "-U", "postgres", "-d", uri.rsplit("/", 1)[1], "-tAc",
                                "select count(*) filter (where state = 'delivered') || ' of ' || count(*) "
                                "from pushreporter_subscriptions"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        return result.stdout.strip() or result.stderr.strip()[-300:]

    def stop(self) -> None:
        subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "fast",
                                       "-w", "stop"], capture_output=True)


def deliver(binary: str, config: str, states: list[str], out: str) -> tuple[float, float]:
    """Runs one `run --once` per state in `states` at once; (wall s, CPU s of all together)."""
    started = time.monotonic()
    processes = []
    for index, state in enumerate(states):
        with open(os.path.join(out, f"shared-{index}.err"), "wb") as err:
            processes.append(subprocess.Popen([binary, "run", "--once", "--deadline", "600s", "--config", config,
                                               "--state-dir", state], stdout=subprocess.DEVNULL, stderr=err))
    cpu = 0.0
    for index, process in enumerate(processes):
        _, status, usage = os.wait4(process.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            with open(os.path.join(out, f"shared-{index}.err"), errors="replace") as err:
                fail(f"agent {index + 1} of {len(states)} exited {code}:\n{err.read()[-2000:]}")
    return time.monotonic() - started, cpu


def psql(postgres: Postgres, uri: str, sql: str, missing: str | None = None) -> str:
    """One query's first row, its fields separated by |; `missing` when it fails because the
    agents have not made the schema yet, if given."""
    result = subprocess.run(postgres.as_user + [os.path.join(postgres.bin, "psql"), "-h", "127.0.0.1", "-p", str(postgres.port),
                            "-U", "postgres", "-d", uri.rsplit("/", 1)[1], "-tAc", sql],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0 and missing is not None and "does not exist" in result.stderr:
        return missing
    if result.returncode != 0:
        fail(f"psql failed: {result.stderr.strip()[-500:]}")
    return result.stdout.strip()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def distinct_delivered(log: str, offset: int) -> tuple[int, int]:
    """(distinct URIs answered 2xx, all 2xx lines) in nginx's log after `offset`, read as a stream."""
    seen, lines = set(), 0
    with open(log, "rb") as handle:
        handle.seek(offset)
        for line in handle:
            parts = line.split(b" ", 2)
            if len(parts) == 3 and parts[1].startswith(b"2"):
                lines += 1
                seen.add(hash(parts[2]))
    return len(seen), lines


def group_at_scale(binary: str, out: str, nginx, postgres: Postgres, accounts: int, agents: int, results: Results) -> None:
    """Issue 35: `agents` long-running agents share `accounts` in one database. Every account is
    delivered once; then each agent's RSS, the database's size, and the database's writes per
    second while the group is idle (lease renewals only: they must not grow with the accounts)."""
    directory = os.path.join(out, "shared", f"scale-{accounts}")
    os.makedirs(directory, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(HERE, "generate_send.py"), directory, str(accounts), nginx.base], check=True)
    config = os.path.join(directory, "config.yaml")
    uri = postgres.new_database()
    offset = nginx.offset()
    started = time.monotonic()
    processes = []
    for index in range(agents):
        with open(os.path.join(directory, f"agent-{index}.err"), "wb") as err:
            processes.append(subprocess.Popen([binary, "run", "--config", config, "--state-dir", uri],
                                              stdout=subprocess.DEVNULL, stderr=err))
    try:
        end = started + 3600
        delivered, peaks = 0, [0] * agents
        while time.monotonic() < end:
            time.sleep(5)
            for index, process in enumerate(processes):
                if process.poll() is not None:
                    fail(f"agent {index + 1} exited {process.returncode} (log: {directory}/agent-{index}.err)")
                peaks[index] = max(peaks[index], rss_kb(process.pid))
            delivered = int(psql(postgres, uri, "select count(*) from pushreporter_subscriptions where state = 'delivered'",
                                 missing="0") or 0)
            if delivered >= accounts:
                break
        took = time.monotonic() - started
        if delivered < accounts:
            fail(f"{thousands(accounts)} accounts on {agents} agents: only {delivered} delivered within an hour")
        time.sleep(10)  # the last outcomes written, the memory asked back, nginx's log flushed
        distinct, lines = distinct_delivered(nginx.log, offset)
        if distinct != accounts or lines != accounts:
            fail(f"{thousands(accounts)} accounts on {agents} agents: the receiver saw {distinct} accounts in {lines} requests")
        sizes = [rss_kb(process.pid) for process in processes]
        database = int(psql(postgres, uri, "select pg_database_size(current_database())"))
        # The rows written to pushreporter's own tables (the agents' writes: lease renewals), and
        # beside them the whole database's, which counts autovacuum's catalog writes too (after
        # a burst of a million updates it analyses the table, at a time of its own choosing).
        query = ("select xact_commit, tup_inserted + tup_updated + tup_deleted, "
                 "(select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_user_tables "
                 "where relname like 'pushreporter%') from pg_stat_database where datname = current_database()")
        window = env_int("BENCH_IDLE_SECONDS", 20)
        before = [int(x) for x in psql(postgres, uri, query).split("|")]
        time.sleep(window)
        after = [int(x) for x in psql(postgres, uri, query).split("|")]
        commits, database_rows, rows = ((after[i] - before[i]) / window for i in range(3))
    finally:
        for process in processes:
            process.send_signal(15)
        codes = [process.wait(timeout=300) for process in processes]
    if any(codes):
        fail(f"an agent exited {codes} on SIGTERM")
    say(f"   {thousands(accounts):>5} accounts, {agents} agents, one PostgreSQL: all delivered once in {took:.0f} s; "
        f"agents' RSS {' '.join(f'{size // 1024}' for size in sizes)} MB (peaks {' '.join(f'{peak // 1024}' for peak in peaks)} MB); "
        f"database {database / 1e6:.0f} MB; idle: {rows:.1f} rows/s written to its tables "
        f"({commits:.1f} transactions/s, {database_rows:.1f} tuples/s in the whole database)")
    results.figure(f"shared/scale-{accounts}", accounts=accounts, agents=agents, wall=took, rss_kb=sizes, peak_kb=peaks,
                   database_bytes=database, idle_commits_per_s=commits, idle_rows_per_s=rows,
                   idle_database_rows_per_s=database_rows, window_s=window)


def main(bin_dir: str, out: str) -> None:
    results = Results(out)
    accounts = env_int("BENCH_SHARED_ACCOUNTS", 20000)
    runs = env_int("BENCH_RUNS", 3)
    binary = os.path.join(bin_dir, "pushreporter")
    base_dir = os.path.join(out, "shared")
    nginx = Nginx(os.path.join(base_dir, "nginx"))
    postgres = Postgres(os.path.join(base_dir, "postgres"))
    try:
        subprocess.run([sys.executable, os.path.join(HERE, "generate_send.py"), base_dir, str(accounts), nginx.base], check=True)
        config = os.path.join(base_dir, "config.yaml")
        say(f"   {thousands(accounts)} accounts, nginx on {nginx.base}, PostgreSQL on 127.0.0.1:{postgres.port}; "
            f"medians of {runs} runs in turns")
        setups = [("SQLite, 1 agent", "sqlite", 1), ("PostgreSQL, 1 agent", "postgres", 1),
                  ("PostgreSQL, 2 agents", "postgres", 2), ("PostgreSQL, 3 agents", "postgres", 3)]
        walls: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in setups}
        for _ in range(runs):
            for name, kind, agents in setups:
                if kind == "sqlite":
                    state = os.path.join(base_dir, "sqlite-state")
                    subprocess.run(["rm", "-rf", state], check=True)
                    states = [state]
                else:
                    states = [postgres.new_database()] * agents
                offset = nginx.offset()
                wall, cpu = deliver(binary, config, states, out)
                seen = nginx.requests_since(offset, accounts)
                uris = [uri for _, status, uri in seen if status.startswith("2")]
                distinct = len(set(uris))
                if distinct != accounts:
                    state = postgres.delivered(states[0]) if kind == "postgres" else "(SQLite)"
                    fail(f"{name}: the receiver saw {distinct} accounts of {accounts}; the state says {state} delivered")
                if len(uris) != distinct:
                    fail(f"{name}: {len(uris) - distinct} accounts were delivered twice")
                walls[name].append((wall, cpu))
        reference = median([w for w, _ in walls[setups[0][0]]])
        for name, kind, agents in setups:
            wall = median([w for w, _ in walls[name]])
            cpu = median([c for _, c in walls[name]])
            rate = accounts / wall
            say(f"   {name:<22} {wall:6.2f} s  {rate:8.0f} accounts/s  CPU {cpu:5.2f} s   "
                f"{reference / wall:4.2f}x one agent on SQLite")
            results.figure(f"shared/{kind}-{agents}", accounts=accounts, agents=agents, store=kind, wall=wall, cpu=cpu,
                           rate=rate, ref_wall=reference, runs=runs)
        results.series("shared", [{"setup": name, "agents": agents, "store": kind,
                                   "rate": accounts / median([w for w, _ in walls[name]])} for name, kind, agents in setups])
        say(f"   (the machine has {os.cpu_count()} cores, shared by the agents, PostgreSQL and nginx)")
        # Issue 35: the group at scale, and what the database does while it is idle, beside the
        # same at the small size: the idle writes must not grow with the accounts.
        large = env_int("BENCH_SHARED_LARGE", 1000000)
        for count in sorted({accounts, large}):
            if count > 0:
                group_at_scale(binary, out, nginx, postgres, count, 3, results)
    finally:
        postgres.stop()
        nginx.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: shared_state.py BIN_DIR OUT_DIR")
    main(sys.argv[1], sys.argv[2])
