import Logging
@testable import PushAgent
import PushBackend
import PushConfig
import PushScheduler
import PushState
import PushTestSupport
import PushTransport
import Synchronization
import Testing
import PushTestThreads

/// `run --once` with a receiver that confirms later (SPEC §9.2's status endpoint), in process.
@Suite(.ownThreads) struct AgentOnceConfirmationTests {
    /// What the backend and the pollers below share.
    final class Receiver: Sendable {
        /// Per account, how many of its deliveries were accepted.
        let accepted = Mutex<[String: Int]>([:])
        /// The service asked about first, whose subscription is sent again.
        let askedFirst = Mutex<String?>(nil)
        /// What the pollers were asked about, in order.
        let asked = Mutex<[String]>([])

        func acceptances(of account: String) -> Int { accepted.withLock { $0[account] ?? 0 } }
    }

    /// A backend whose receiver accepts every delivery with an id of its own (`account-n`).
    static func acceptingBackend(_ receiver: Receiver) -> ScriptedBackend {
        ScriptedBackend(type: "accepting") { requests in
            requests.map { request in
                let count = receiver.accepted.withLock { accepted in
                    accepted[request.account, default: 0] += 1
                    return accepted[request.account]!
                }
                return .accepted("\(request.account)-\(count)")
            }
        }
    }

    /// Asks about one service's acceptances. Whichever service is asked about first gets
    /// "send it again" for its first acceptance; the other, asked second, answers only once that
    /// one was accepted again, and says "still pending": so the poll returns with the first
    /// service's new acceptance not asked about yet and everything settled, the order in which
    /// `run --once` ended without asking about it. A later acceptance is delivered.
    struct Poller: ConfirmationPoller {
        let service: String
        let account: String
        let other: String
        let receiver: Receiver
        var interval: Duration { .seconds(1) }
        var timeout: Duration { .seconds(3_600) }

        func poll(_ pending: [String], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome?] {
            receiver.asked.withLock { $0 += pending }
            var answers: [Outcome?] = []
            for data in pending {
                guard data == "\(account)-1" else {
                    answers.append(.delivered)
                    continue
                }
                let first = receiver.askedFirst.withLock { first in
                    if first == nil { first = service }
                    return first == service
                }
                if first {
                    answers.append(.retry(AttemptFailure(status: nil, reason: "failed to store the device")))
                } else {
                    #expect(await Polling.until { receiver.acceptances(of: other) == 2 }, "the other is sent again and accepted")
                    answers.append(nil)
                }
            }
            return answers
        }
    }

    static func plan(_ account: String, service: String) -> SubscriptionPlan {
        let request = SubscriptionRequest(account: account, service: service, family: "accepting", purpose: .delivery,
                                          label: "\(service) registration", host: "receiver.example:443", pauseLabel: service,
                                          payload: account)
        return SubscriptionPlan(account: account, service: service, fingerprint: "f-\(account)", delivery: request, cleanup: nil)
    }

    /// Answers "delivered" for everything once `release()` is called; nothing if cancelled first.
    final class HeldPoller: ConfirmationPoller {
        let service = "a"
        var interval: Duration { .seconds(1) }
        var timeout: Duration { .seconds(3_600) }
        let asked = Mutex(false)
        private let released = Mutex(false)

        func release() { released.withLock { $0 = true } }

        func poll(_ pending: [String], transport: any HTTPTransport, defaultTimeout: Duration) async -> [Outcome?] {
            asked.withLock { $0 = true }
            while !released.withLock({ $0 }) {
                if Task.isCancelled { return pending.map { _ in nil } }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return pending.map { _ in .delivered }
        }
    }

    @Test func aConfirmationQueryInFlightWhenTheRoundStopsGetsTheGracePeriod() async throws {
        let receiver = Receiver()
        let store = MemoryStateStore()
        let clock = ManualClock()
        let poller = HeldPoller()
        let agent = Agent(start: .configuration(plans: [Self.plan("alice", service: "a")], records: [], pollers: [poller]),
                          settings: AgentOnceTests.settings(), backends: Backends([Self.acceptingBackend(receiver)]),
                          transport: ScriptedTransport { _, _ in TransportResponse(status: 500) },
                          recorder: StateRecorder(store: store, logger: AgentOnceTests.quiet, clock: clock),
                          logger: AgentOnceTests.quiet, clock: clock, wallClock: { 0 })
        let stop = RoundStop()
        let run = Task(executorPreference: TestThreads.shared) { await agent.runOnce(deadline: .seconds(60), stop: stop) }
        // Accepted, and the round's last question about it is in flight.
        #expect(await Polling.until { poller.asked.withLock { $0 } })
        stop.request()
        // The clock stays: the answer comes within the grace period, and is taken in.
        poller.release()
        let outcome = await run.value
        #expect(outcome.delivered == 1, "\(outcome.summary)")
        #expect(try store.records().first?.state == .delivered)
    }

    @Test func aDeliveryAcceptedAgainWhileThePollersAskIsAskedAboutBeforeTheRunEnds() async throws {
        let receiver = Receiver()
        let store = MemoryStateStore()
        let clock = ManualClock()
        let pollers: [any ConfirmationPoller] = [
            Poller(service: "a", account: "alice", other: "bob", receiver: receiver),
            Poller(service: "b", account: "bob", other: "alice", receiver: receiver),
        ]
        let agent = Agent(start: .configuration(plans: [Self.plan("alice", service: "a"), Self.plan("bob", service: "b")],
                                                records: [], pollers: pollers),
                          settings: AgentOnceTests.settings(), backends: Backends([Self.acceptingBackend(receiver)]),
                          transport: ScriptedTransport { _, _ in TransportResponse(status: 500) },
                          recorder: StateRecorder(store: store, logger: AgentOnceTests.quiet, clock: clock),
                          logger: AgentOnceTests.quiet, clock: clock, wallClock: { 0 })
        _ = await agent.runOnce(deadline: .seconds(60))
        let sentAgain = try #require(receiver.askedFirst.withLock { $0 })
        let account = sentAgain == "a" ? "alice" : "bob"
        #expect(receiver.acceptances(of: account) == 2)
        #expect(receiver.asked.withLock { $0 }.contains("\(account)-2"), "its second acceptance was asked about")
        let record = try #require(try store.records().first { $0.key.account == account })
        #expect(record.state == .delivered)
    }
}
