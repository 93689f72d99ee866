import Foundation
import PushState
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// SPEC §11: several agents on one PostgreSQL, end to end through the binary, against a real
/// server the tests start (Debian's postgresql; without it these fail and say what to install).
@Suite(.serialized, .blockingThreads) struct SharedStateTests {
    /// A receiver that counts the reports of each account (`GET /r/ACCOUNT?t=TOKEN`), and
    /// their removals (`GET /gone/ACCOUNT`) apart.
    final class Receiver: Sendable {
        final class Counts: Sendable {
            let value = Mutex<[String: Int]>([:])
        }

        let server: LoopbackHTTPServer
        private let counts: Counts

        init(delay: Duration = .zero) throws {
            let counts = Counts()
            self.counts = counts
            let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            server = try LoopbackHTTPServer(recording: false) { request, _ in
                let parts = request.path.split(separator: "/").map(String.init)
                let name = parts.first == "gone" ? "gone:" + (parts.last ?? "") : parts.last ?? ""
                counts.value.withLock { $0[name, default: 0] += 1 }
                if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
                return .status(204)
            }
        }

        var distinct: Int { counts.value.withLock { $0.keys.count { !$0.hasPrefix("gone:") } } }
        /// How many requests `name` got (`a3`, or `gone:a3` for its removal).
        func count(_ name: String) -> Int { counts.value.withLock { $0[name] ?? 0 } }
        var duplicates: Int { counts.value.withLock { $0.values.reduce(0) { $0 + max(0, $1 - 1) } } }
        /// The accounts reported more than once, and the most times one was.
        var repeated: (accounts: Set<String>, most: Int) {
            counts.value.withLock { counts in
                (Set(counts.filter { $0.value > 1 }.keys), counts.values.max() ?? 0)
            }
        }

        /// Waits until every one of `count` accounts has been reported.
        func waitForAll(_ count: Int, timeout: Duration) -> Bool {
            Polling.until(timeout: timeout) { self.distinct >= count }
        }
    }

    static func config(_ count: Int, database: String, receiver: Receiver, leaseTimeout: String = "3s",
                       concurrency: Int = 8, accounts: [Int]? = nil, removalGuard: String? = nil) -> String {
        var text = """
            agent:
              state: \(database)
              leaseTimeout: \(leaseTimeout)
              concurrency: \(concurrency)
              retry: {initial: 200ms, max: 1s}

            """
        if let removalGuard { text += "  removalGuard: \(removalGuard)\n" }
        text += "accounts:\n"
        for index in accounts ?? Array(0..<count) {
            text += "  - id: a\(index)\n    pushTokenOther: T\(index)\n"
                + "    pushTokenReporterUrl: \(receiver.server.baseURL)/r/a\(index)?t=%pushTokenOther%\n"
                + "    accountRemovalReporterUrl: \(receiver.server.baseURL)/gone/a\(index)\n"
        }
        return text
    }

    /// `status --format json` of the shared state: account → (state, agent).
    static func status(_ config: String) throws -> [String: (state: String, agent: String?)] {
        // Asked now and then, not as fast as Polling checks.
        usleep(200_000)
        let result = try ProcessRunner.pushreporter(["status", "--config", config, "--format", "json"])
        let rows = (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]) ?? []
        var status: [String: (state: String, agent: String?)] = [:]
        for row in rows {
            status[row["account"] as? String ?? ""] = (row["state"] as? String ?? "", row["agent"] as? String)
        }
        return status
    }

    @Test func twoAgentsShareTheWorkAndReportEachAccountOnce() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(300, database: database, receiver: receiver))
        let first = try RunningProcess(pushreporter: ["run", "--config", config])
        let second = try RunningProcess(pushreporter: ["run", "--config", config])
        #expect(receiver.waitForAll(300, timeout: .seconds(60)), "\(first.stderr)\(second.stderr)")
        #expect(first.waitForStderr("this agent holds are reported", timeout: .seconds(60)), "\(first.stderr)")
        #expect(second.waitForStderr("this agent holds are reported", timeout: .seconds(60)), "\(second.stderr)")
        #expect(receiver.duplicates == 0)
        // The last outcomes are written up to a batch interval after they are logged.
        var text = ""
        #expect(Polling.until(timeout: .seconds(30)) {
            text = (try? ProcessRunner.pushreporter(["status", "--config", config]).stdout) ?? ""
            return text.hasPrefix("300 accounts: 300 reported, 0 retrying\n2 agents: ")
        }, "\(text)")
        let holders = Set(try Self.status(config).values.compactMap(\.agent))
        #expect(holders.count == 2)
        #expect((first.stderr + second.stderr).contains("starting the group"))
        #expect((first.stderr + second.stderr).contains("joining 1 other agent"))

        // A third agent joining a running group does not send again what the group delivered.
        let third = try RunningProcess(pushreporter: ["run", "--config", config])
        #expect(third.waitForStderr("joining 2 other agents"), "\(third.stderr)")
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).values.compactMap(\.agent)).map { Set($0).count } == 3 },
                "the third agent takes a share")
        #expect(receiver.duplicates == 0)
        for agent in [first, second, third] {
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "\(agent.stderr)")
        }
        #expect(try Self.status(config).values.allSatisfy { $0.agent == nil }, "stopping hands every lease back")
    }

    @Test func threeAgentsAndTwentyThousandAccountsSurviveTheLossOfOne() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let count = 20_000
        let receiver = try Receiver(delay: .milliseconds(2))
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(count, database: database, receiver: receiver, leaseTimeout: "5s",
                                                              concurrency: 16))
        let agents = try (0..<3).map { _ in try RunningProcess(pushreporter: ["run", "--config", config]) }
        // Killed once it has claimed its share and delivered part of it.
        let victim = agents[2]
        #expect(Polling.until(timeout: .seconds(120)) {
            (try? Self.status(config).values.filter { $0.agent != nil && $0.state == "delivered" }.count) ?? 0 >= count / 10
        }, "\(victim.stderr.suffix(2000))")
        victim.signal(SIGKILL)
        #expect(victim.waitForExit() == 128 + SIGKILL)
        // What the dead agent held stays its own until the leases expire (5 s): read at once,
        // from the database, not through a `status` that loads the 20,000 accounts first.
        let held = Set(try postgres.psql(database, "SELECT s.account FROM pushreporter_subscriptions s JOIN pushreporter_agents a ON a.instance = s.holder "
                                       + "WHERE a.name LIKE '%:\(victim.pid)'")
            .split(separator: "\n").map(String.init))
        #expect(!held.isEmpty, "the killed agent held a share")

        #expect(receiver.waitForAll(count, timeout: .seconds(180)), "\(receiver.distinct) of \(count)")
        // Only what the dead agent held (in flight, or delivered and not yet written) is sent
        // again, and only once more.
        let repeated = receiver.repeated
        #expect(repeated.accounts.isSubset(of: held), "sent twice without being the dead agent's: \(repeated.accounts.subtracting(held).sorted().prefix(20))")
        #expect(repeated.most <= 2)
        #expect(Polling.until(timeout: .seconds(60)) {
            (try? Self.status(config).values.allSatisfy { $0.state == "delivered" && $0.agent?.hasSuffix(":\(victim.pid)") != true }) ?? false
        }, "the others took the dead agent's share over")
        for agent in agents.prefix(2) {
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
        }
    }

    @Test func aRestartedDatabaseLosesNothing() throws {
        // A server of its own: restarting the shared one would break the other suites' statements.
        let postgres = try TemporaryPostgres()
        let database = try postgres.makeDatabase()
        let count = 3_000
        let receiver = try Receiver(delay: .milliseconds(3))
        let files = TemporaryDirectory()
        // Leases outlast the restart, so neither agent takes the other's work: nothing twice.
        let config = files.write("accounts.yaml", Self.config(count, database: database, receiver: receiver, leaseTimeout: "15s"))
        let agents = try (0..<2).map { _ in try RunningProcess(pushreporter: ["run", "--config", config]) }
        #expect(Polling.until(timeout: .seconds(60)) { receiver.distinct >= count / 5 })
        try postgres.restart()
        #expect(receiver.waitForAll(count, timeout: .seconds(180)), "\(receiver.distinct) of \(count)")
        // The agents stayed up, said so, and came back.
        for agent in agents {
            #expect(agent.waitForStderr("this agent holds are reported", timeout: .seconds(60)), "\(agent.stderr.suffix(2000))")
        }
        #expect(agents.contains { $0.stderr.contains("the state database") }, "an agent said the database was away")
        #expect(receiver.duplicates == 0)
        #expect(Polling.until(timeout: .seconds(60)) {
            (try? Self.status(config).values.filter { $0.state == "delivered" }.count) == count
        }, "every delivery is in the state")
        for agent in agents {
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
        }
    }

    @Test func aDatabaseFreezeCountsNoAttemptThatWasNotSent() throws {
        // While its leases may have lapsed the agent sends nothing; those turns were counted as
        // attempts, and after an 8 s freeze each held account logged "delivered … after 14 attempts".
        let postgres = try TemporaryPostgres()
        let database = try postgres.makeDatabase()
        let count = 600
        let receiver = try Receiver(delay: .milliseconds(20))
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(count, database: database, receiver: receiver, leaseTimeout: "3s"))
        let agent = try RunningProcess(pushreporter: ["run", "--config", config])
        #expect(Polling.until(timeout: .seconds(60)) { receiver.distinct >= 50 }, "\(agent.stderr.suffix(2000))")
        try postgres.freeze()
        // Long past the leases' validity (3 s, less the margin for a request in flight).
        #expect(agent.waitForStderr("the state database", timeout: .seconds(60)), "the agent said the database was away")
        usleep(4_000_000)
        try postgres.thaw()
        #expect(receiver.waitForAll(count, timeout: .seconds(180)), "\(receiver.distinct) of \(count)")
        #expect(agent.waitForStderr("this agent holds are reported", timeout: .seconds(60)), "\(agent.stderr.suffix(2000))")
        let retried = agent.stderr.split(separator: "\n").filter { $0.contains(" attempts") }
        #expect(retried.isEmpty, "every report was delivered by its first request really sent: \(retried.prefix(3))")
        #expect(receiver.duplicates == 0)
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
    }

    @Test func aReloadDuringADatabaseOutageIsReadyAtOnceAndSendsOnceTheStateIsWritten() throws {
        // With Type=notify-reload, `systemctl reload` waits for READY=1: it used to come only once
        // the database was back, so the reload blocked for the whole outage.
        let postgres = try TemporaryPostgres()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(3, database: database, receiver: receiver))
        let listener = try NotifyListener()
        let agent = try RunningProcess(pushreporter: ["run", "--config", config], environment: ["NOTIFY_SOCKET": listener.path])
        #expect(agent.waitForStderr("all 3 accounts this agent holds are reported"), "\(agent.stderr)")
        try postgres.freeze()
        var thawed = false
        defer { if !thawed { try? postgres.thaw() } }
        // a1's token changes.
        files.write("accounts.yaml", Self.config(3, database: database, receiver: receiver).replacingOccurrences(of: "T1\n", with: "T1b\n"))
        let seen = listener.messages.count
        agent.signal(SIGHUP)
        let reloading = listener.waitForMessage(after: seen) { $0.hasPrefix("RELOADING=1") }
        #expect(reloading != nil, "\(listener.messages)")
        #expect(listener.waitForMessage(after: (reloading ?? seen) + 1) { $0.hasPrefix("READY=1") } != nil,
                "READY=1 while the database is still frozen: \(agent.stderr.suffix(2000))")
        #expect(agent.stderr.contains("reloaded: 0 new, 1 changed, 2 unchanged, 0 removed"), "\(agent.stderr.suffix(2000))")
        #expect(receiver.count("a1") == 1, "nothing of the reload is sent before its state is written")
        try postgres.thaw()
        thawed = true
        #expect(Polling.until { receiver.count("a1") == 2 }, "sent once the state is written: \(agent.stderr.suffix(2000))")
        agent.signal(SIGTERM)
        #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
    }

    @Test func aReloadOfEveryAgentAddsAndRemovesOnceAndRemoveLeavesHeldAccountsToTheirAgent() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(40, database: database, receiver: receiver))
        let agents = try (0..<2).map { _ in try RunningProcess(pushreporter: ["run", "--config", config]) }
        #expect(receiver.waitForAll(40, timeout: .seconds(60)))
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).values.allSatisfy { $0.agent != nil }) ?? false })

        // An account held by a running agent is its business: remove refuses, naming it.
        let refused = try ProcessRunner.pushreporter(["remove", "a5", "--config", config])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("a5 (acrobits) is held by the agent "), "\(refused.stderr)")
        #expect(receiver.count("gone:a5") == 0)

        // The files change on both machines (a0 leaves, a40 arrives) and both agents reload.
        _ = files.write("accounts.yaml", Self.config(0, database: database, receiver: receiver, accounts: Array(1...40)))
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { receiver.count("a40") == 1 && receiver.count("gone:a0") == 1 },
                "\(agents.map { $0.stderr.suffix(1500) })")
        #expect(Polling.until(timeout: .seconds(60)) {
            (try? Self.status(config)).map { $0["a0"] == nil && $0["a40"]?.state == "delivered" } ?? false
        }, "a0 forgotten once its removal is delivered, a40 delivered")
        for agent in agents {
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
        }
        #expect(receiver.duplicates == 0, "nothing twice")
        #expect(receiver.count("gone:a0") == 1)
    }

    /// SPEC §14 with shared state: the guard counts the group's accounts. A reload of every
    /// agent that drops most accounts holds their removals in the database (nobody claims them);
    /// they come back with nothing sent; `remove --held` sends them while the agents run; and a
    /// reload with the guard off sends the rest, each once.
    @Test func theRemovalGuardHoldsForTheWholeGroup() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(150, database: database, receiver: receiver))
        let agents = try (0..<2).map { _ in try RunningProcess(pushreporter: ["run", "--config", config]) }
        #expect(receiver.waitForAll(150, timeout: .seconds(60)))
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).values.allSatisfy { $0.state == "delivered" }) ?? false })
        func gone() -> Int { (0..<150).reduce(0) { $0 + receiver.count("gone:a\($1)") } }
        func held() -> Int { (try? Self.status(config).values.count { $0.state == "held" }) ?? -1 }

        // The files lose all but one account on both machines: plan says what a reload holds,
        // then both agents reload.
        _ = files.write("accounts.yaml", Self.config(0, database: database, receiver: receiver, accounts: [0]))
        let plan = try ProcessRunner.pushreporter(["plan", "--config", config])
        #expect(plan.status == 0, "a held removal sends nothing: \(plan.stdout)\(plan.stderr)")
        #expect(plan.stdout.hasPrefix("acrobits: 0 new, 0 changed, 1 unchanged, 0 removed, 149 held\n"), "\(plan.stdout)")
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { held() == 149 }, "\(agents.map { $0.stderr.suffix(1500) })")
        let warned = agents.map { $0.waitForStderr("holding the removal of 149 accounts", timeout: .seconds(5)) }
        #expect(warned.contains(true), "said by the agent that published it first: \(agents.map { $0.stderr.suffix(1500) })")
        #expect(Polling.until(timeout: .seconds(30)) {
            (try? ProcessRunner.pushreporter(["status", "--config", config]).stdout.contains("149 removals held")) ?? false
        })
        // A round of leases later nobody has claimed them: nothing sent.
        #expect(agents.allSatisfy { $0.waitForStderr("149 removals held", timeout: .seconds(30)) })
        Thread.sleep(forTimeInterval: 2)
        #expect(gone() == 0, "nothing is sent for a held removal")

        // They come back: no longer held, and nothing is sent for them.
        _ = files.write("accounts.yaml", Self.config(150, database: database, receiver: receiver))
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { held() == 0 })
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).values.allSatisfy { $0.state == "delivered" }) ?? false })
        #expect(receiver.duplicates == 0 && gone() == 0, "nothing sent for the accounts that came back")

        // Gone again, then released with remove --held while the agents run: sent once each.
        _ = files.write("accounts.yaml", Self.config(0, database: database, receiver: receiver, accounts: [0]))
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { held() == 149 })
        let released = try ProcessRunner.pushreporter(["remove", "--held", "--config", config])
        #expect(released.status == 0, "\(released.stderr)")
        #expect(released.stdout.contains("Released the held removals of 149 accounts"), "\(released.stdout)")
        #expect(Polling.until(timeout: .seconds(60)) { gone() == 149 }, "\(gone())")
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).count) == 1 }, "forgotten once removed")

        // The guard off: a drop of every account is sent, once each, by the group.
        _ = files.write("accounts.yaml", Self.config(150, database: database, receiver: receiver))
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { (1..<150).allSatisfy { receiver.count("a\($0)") == 2 } }, "forgotten, so new again")
        #expect(Polling.until(timeout: .seconds(60)) { (try? Self.status(config).values.allSatisfy { $0.state == "delivered" }) ?? false })
        _ = files.write("accounts.yaml", Self.config(0, database: database, receiver: receiver, accounts: [0], removalGuard: "off"))
        for agent in agents { agent.signal(SIGHUP) }
        #expect(Polling.until(timeout: .seconds(60)) { gone() == 2 * 149 }, "\(gone())")
        for agent in agents {
            agent.signal(SIGTERM)
            #expect(agent.waitForExit() == 0, "\(agent.stderr.suffix(2000))")
        }
        #expect((0..<150).allSatisfy { receiver.count("gone:a\($0)") == ($0 == 0 ? 0 : 2) }, "each removal once a time")
    }

    @Test func runOnceOnSharedStateSummarisesWhatItClaimed() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(300, database: database, receiver: receiver))
        let result = try ProcessRunner.pushreporter(["run", "--once", "--config", config])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Delivered 300 of 300 reports in "), "\(result.stdout)")
        #expect(receiver.distinct == 300 && receiver.duplicates == 0)
        #expect(try Self.status(config).values.allSatisfy { $0.state == "delivered" && $0.agent == nil }, "handed back on exit")
    }

    @Test func migrateCreatesTheSchemaAlone() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let result = try ProcessRunner.pushreporter(["migrate", "--state-dir", database])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "The state database \(database) is at schema 2.\n")
        let tables = try postgres.psql(database, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'pushreporter_subscriptions'")
        #expect(tables.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    /// A database of schema 1 (before the removal guard held for the group) is migrated by the
    /// next agent or `migrate`, its rows kept.
    @Test func aDatabaseOfSchemaOneIsMigrated() throws {
        let postgres = try TemporaryPostgres.shared()
        let database = try postgres.makeDatabase()
        let receiver = try Receiver()
        let files = TemporaryDirectory()
        let config = files.write("accounts.yaml", Self.config(3, database: database, receiver: receiver))
        #expect(try ProcessRunner.pushreporter(["run", "--once", "--config", config]).status == 0)
        _ = try postgres.psql(database, """
            ALTER TABLE pushreporter_subscriptions DROP COLUMN removal_held, DROP COLUMN delivered_parts;
            UPDATE pushreporter_schema SET version = 1
            """)
        let migrated = try ProcessRunner.pushreporter(["migrate", "--state-dir", database])
        #expect(migrated.stdout == "The state database \(database) is at schema 2.\n", "\(migrated.stdout)\(migrated.stderr)")
        #expect(try Self.status(config).values.map(\.state) == ["delivered", "delivered", "delivered"])
        let again = try ProcessRunner.pushreporter(["run", "--once", "--config", config])
        #expect(again.status == 0, "\(again.stderr)")
    }

    @Test func aPasswordInTheURIIsRefused() throws {
        let result = try ProcessRunner.pushreporter(config: "agent:\n  state: postgres://u:secret@db.example/p\n", ["validate"])
        #expect(result.status == 78)
        #expect(result.stderr.contains("agent.state must not hold a password"), "\(result.stderr)")
        #expect(!result.stderr.contains("secret@"))
    }
}
