import Foundation
import PushState
import PushTestSupport
import Synchronization
import Testing
import PushTestThreads

/// SPEC §6 and §9.2 with Journeys batches: a `kill -9` in the middle of batches loses nothing,
/// and nothing the agent saw acknowledged is registered again while it runs.
@Suite(.serialized, .timeLimit(.minutes(10)), .blockingThreads) struct JourneysKillTests {
    /// Slows one reply in four by up to `slowest` (far below the agent's 5 s timeout, so every
    /// 202 reaches a living agent), until `healthy`.
    final class Pace: Sendable {
        let healthy = Atomic<Bool>(false)
        let random = Mutex(SeededGenerator(seed: 0x0A11_CE5E))
        let slowest: UInt32 = 300_000

        func delay() {
            guard !healthy.load(ordering: .acquiring) else { return }
            let pause = random.withLock { random -> UInt32 in
                Int.random(in: 0..<4, using: &random) == 0 ? UInt32.random(in: 50_000...slowest, using: &random) : 0
            }
            if pause > 0 { usleep(pause) }
        }
    }

    /// How many connections to `port` on 127.0.0.1 the server side has not closed yet
    /// (ESTABLISHED, SYN_RECV, CLOSE_WAIT in /proc/net/tcp).
    static func openConnections(port: Int) -> Int {
        guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return 0 }
        let local = "0100007F:" + String(format: "%04X", port)
        return table.split(separator: "\n").dropFirst().count { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1] == local && ["01", "03", "08"].contains(fields[3])
        }
    }

    /// Waits until the fake has answered, or dropped, everything a killed agent left on its
    /// connections, so each request the fake recorded belongs to one agent's lifetime.
    static func waitUntilDrained(_ fake: FakeJourneysServer) -> Bool {
        Polling.until { openConnections(port: fake.port) == 0 }
    }

    @Test func killedInTheMiddleOfBatchesItStillRegistersEveryAccountOnce() throws {
        let pace = Pace()
        let fake = try FakeJourneysServer { _, _, reply in
            pace.delay()
            return reply ?? .status(404)
        }
        let bench = try JourneysBench(fake)
        let count = 300
        var versions = Array(repeating: 1, count: count)
        var present = Array(repeating: true, count: count)
        func token(_ index: Int) -> String { "tok-a\(index)-v\(versions[index])" }
        func writeConfig() {
            let accounts = (0..<count).filter { present[$0] }.map {
                JourneysAccount("a\($0)", token: token($0), platform: $0 % 3 == 0 ? "android" : "ios")
            }
            bench.write(accounts, services: [JourneysService(settings: ["batchSize: 50"])], agent: ["timeout: 5s"])
        }
        var everToken: [Int: Set<String>] = [:]   // every token an account has had
        func noteTokens() { for index in 0..<count { everToken[index, default: []].insert(token(index)) } }
        noteTokens()
        writeConfig()

        var kills = KillHarness(seed: 0x9_0D_5EED)
        // Where each lifetime's requests end in `fake.requests`.
        var boundaries: [Int] = [0]
        for round in 1...6 {
            // While the agent is down: accounts leave, tokens change; a batch hangs now and then.
            if round == 3 { for index in 0..<20 { present[index] = false } }
            if round == 4 { for index in 100..<120 { versions[index] = 2 } }
            if round.isMultiple(of: 2) { fake.answerNext(1, of: .registerBatch, with: .hang) }
            noteTokens()
            writeConfig()
            let agent = try bench.startAgent()
            #expect(fake.waitForRequests(boundaries.last! + 1, timeout: Polling.generous), "round \(round): \(agent.stderr)")
            if round == 5 {
                // A reload while it runs, and the kill lands during or after it.
                for index in 280..<300 { present[index] = false }
                for index in 200..<210 { versions[index] = 3 }
                noteTokens()
                writeConfig()
                agent.signal(SIGHUP)
            }
            // Anywhere from the first batch to after the first status polls (statusInterval 1s).
            let killed = kills.kill(agent, within: 0...2_500_000)
            #expect(killed, "round \(round)")
            #expect(Self.waitUntilDrained(fake), "round \(round): the fake still has connections of the killed agent")
            boundaries.append(fake.requests.count)
        }

        pace.healthy.store(true, ordering: .releasing)
        let remaining = present.count { $0 }
        let current = Set((0..<count).filter { present[$0] }.map(token))
        let finalStart = boundaries.last!
        // A restart registers every subscription again; the last agent is done once it has had
        // each current token confirmed and has sent every cleanup owed.
        func confirmedByLastAgent() -> Bool {
            let registrations = fake.registrations.filter { $0.requestIndex >= finalStart }
            let confirmed = Set(fake.statusQueries.filter { $0.requestIndex >= finalStart }.flatMap { query in
                zip(query.requestIds, query.answers).filter { $0.1 == .success }.map(\.0)
            })
            return Set(registrations.map(\.deviceToken)) == current && registrations.allSatisfy { $0.requestId.map(confirmed.contains) == true }
        }
        let last = try bench.startAgent()
        #expect(last.waitForStderr("all \(remaining) accounts are reported"), "\(last.stderr.suffix(2000))")
        #expect(Polling.until(confirmedByLastAgent))
        // Confirmed as the fake sees it; the agent logs each confirmation it read.
        #expect(last.waitForStderr("journeys registration delivered to ", count: remaining), "\(last.stderr.suffix(2000))")
        last.terminate()
        #expect(Self.waitUntilDrained(fake))
        boundaries.append(fake.requests.count)

        // Every subscription left is delivered, and only those are in the state.
        let final = try bench.states()
        #expect(final.count == remaining)
        #expect(final.values.allSatisfy { $0 == "delivered" }, "\(final.filter { $0.value != "delivered" })")
        #expect(Set(final.keys) == Set((0..<count).filter { present[$0] }.map { "a\($0)/journeys" }))

        let registrations = fake.registrations
        let lifetime = { (index: Int) in boundaries.lastIndex { $0 <= index } ?? 0 }
        // Nothing acknowledged is registered again while the agent that saw it lives.
        var seen: [Int: Set<String>] = [:]
        for registration in registrations {
            let life = lifetime(registration.requestIndex)
            #expect(seen[life, default: []].insert(registration.deviceToken).inserted,
                    "\(registration.deviceToken) registered twice by lifetime \(life)")
        }
        // The last agent registered each current token exactly once (and had it confirmed, above).
        let lastRegistrations = registrations.filter { lifetime($0.requestIndex) == boundaries.count - 2 }
        #expect(lastRegistrations.map(\.deviceToken).sorted() == current.sorted())

        // Every token that reached the fake and is no longer current was cleaned up: the
        // accounts that left, and the tokens that changed.
        let registered = Set(registrations.map(\.deviceToken))
        let cleaned = Set(fake.cleanups.compactMap(\.deviceToken))
        let owed = Set(everToken.values.flatMap { $0 }).intersection(registered).subtracting(current)
        #expect(owed.count >= 20)
        #expect(owed.subtracting(cleaned).isEmpty, "not cleaned up: \(owed.subtracting(cleaned).sorted())")
        #expect(cleaned.isDisjoint(with: current), "a current token was cleaned up")

        let store = try SQLiteStateStore(directory: StateDirectory(path: bench.state), readOnly: true)
        #expect(try store.integrityCheck() == "ok")
    }
}
