import Foundation
import PushState
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// SPEC §6: a `kill -9` at any moment loses nothing and corrupts nothing.
@Suite(.serialized, .blockingThreads) struct KillTests {
    /// What the server answered, per request.
    final class Ledger: Sendable {
        struct Entry: Sendable {
            var method: String
            var kind: String
            var id: String
            var token: String
            var succeeded: Bool
        }

        let entries = Mutex<[Entry]>([])
        let healthy = Atomic<Bool>(false)
        let random = Mutex(SeededGenerator(seed: 0x5EED_2000))

        func answer(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
            // /report/ID?token=T or /remove/ID?token=T
            let parts = request.path.split(separator: "/")
            let token = request.query?.split(separator: "=").last.map(String.init) ?? ""
            let fails = !healthy.load(ordering: .acquiring) && random.withLock { Int.random(in: 0..<10, using: &$0) } < 3
            entries.withLock {
                $0.append(Entry(method: request.method, kind: parts.first.map(String.init) ?? "",
                                id: parts.last.map(String.init) ?? "", token: token, succeeded: !fails))
            }
            return fails ? .status(503, body: "busy") : .status(204)
        }

        /// Whether a report of every account in `ids` has reached the server (answered or not).
        func reportsReached(_ ids: Set<String>) -> Bool {
            let reported = entries.withLock { entries in Set(entries.lazy.filter { $0.kind == "report" }.map(\.id)) }
            return ids.isSubset(of: reported)
        }
    }

    @Test func killedTenTimesAtRandomMomentsItStillDeliversEveryReportAndRemoval() throws {
        let ledger = Ledger()
        let server = try LoopbackHTTPServer(recording: false) { request, _ in ledger.answer(request) }
        let files = TemporaryDirectory()
        let state = files.path + "/state"
        let config = files.path + "/accounts.yaml"
        let count = 2000
        var tokens = (0..<count).map { _ in "T1" }
        var present = Array(repeating: true, count: count)
        func writeConfig() {
            let accounts = (0..<count).filter { present[$0] }.map { ("a\($0)", tokens[$0]) }
            files.write("accounts.yaml", AgentTests.config(accounts, base: server.baseURL,
                                                          // Removing many at once is the point here, not the guard's.
                                                          agent: "  concurrency: 64\n  perHostConcurrency: 64\n  removalGuard: off"))
        }
        writeConfig()

        var kills = KillHarness(seed: 42)
        for round in 1...10 {
            // While the agent is down: accounts leave, tokens change.
            if round == 4 { for index in 0..<200 { present[index] = false } }
            if round == 6 { for index in 1000..<1100 { tokens[index] = "T2" } }
            if round == 8 { for index in 1900..<2000 { present[index] = false } }
            writeConfig()
            let agent = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
            kills.pause(within: 50_000...700_000)
            if round == 3 {
                // Before any account leaves, every account's report has reached the server, so
                // each one that leaves is owed a removal, however slow the machine.
                let all = Set((0..<count).map { "a\($0)" })
                #expect(Polling.until(timeout: .seconds(180)) { ledger.reportsReached(all) }, "\(agent.stderr.suffix(2000))")
            }
            // Some changes come by reload while it runs, and the kill lands during or after it.
            if round == 5 || round == 9 {
                if round == 5 { for index in 200..<300 { present[index] = false } }
                if round == 9 { for index in 1500..<1600 { tokens[index] = "T3" } }
                writeConfig()
                agent.signal(SIGHUP)
            }
            let killed = kills.kill(agent, within: (round == 5 || round == 9) ? 0...300_000 : 0...0)
            #expect(killed, "round \(round)")
        }

        ledger.healthy.store(true, ordering: .releasing)
        let remaining = present.count { $0 }
        let last = try RunningProcess(pushreporter: ["run", "--config", config, "--state-dir", state])
        #expect(last.waitForStderr("all \(remaining) accounts are reported", timeout: .seconds(60)), "\(last.stderr.suffix(2000))")
        last.signal(SIGTERM)
        #expect(last.waitForExit() == 0)

        let entries = ledger.entries.withLock { $0 }
        var delivered: [String: String] = [:]   // id → token of its last delivered report
        var reported = Set<String>()            // ids whose report reached the server
        var removed = Set<String>()             // ids whose removal was delivered
        for entry in entries {
            if entry.kind == "report" {
                reported.insert(entry.id)
                if entry.succeeded { delivered[entry.id] = entry.token }
            } else if entry.kind == "remove" && entry.succeeded && entry.method == "DELETE" {
                removed.insert(entry.id)
            }
        }
        for index in 0..<count where present[index] {
            #expect(delivered["a\(index)"] == tokens[index], "a\(index)")
        }
        // Every account that left had reported (round 3 waited for it), so each got its removal.
        let owed = (0..<count).filter { !present[$0] }
        #expect(owed.count == 400)
        for index in owed {
            #expect(reported.contains("a\(index)"), "a\(index)")
            #expect(removed.contains("a\(index)"), "a\(index)")
        }

        let store = try SQLiteStateStore(directory: StateDirectory(path: state), readOnly: true)
        #expect(try store.integrityCheck() == "ok")
        let records = try store.records()
        #expect(records.count == remaining)
        #expect(records.allSatisfy { $0.state == .delivered })
    }
}
