import Foundation

/// An Adobe Campaign tracking server (SPEC §9.4, `seeds/001_*`) played on 127.0.0.1: it takes
/// the request the Adobe mobile SDK sends for a push tracking action,
/// `GET /r/?id={_mId},{_dId},{action}&mcId={ecid}` with `Accept: */*`, records each one with
/// its values decoded, and answers 200, or what a test scripted.
///
/// A request is checked in this order, and the first failure answers:
/// 1. another path than `/r/`: 404; another method than `GET`: 405;
/// 2. a reply scripted with `answerNext(_:with:)`, else the last one scripted for its message
///    (and action) with `answer(_:forMessage:action:)`, is sent (the hit is recorded with its
///    status; 0 for one that sends no status, such as `.hang`);
/// 3. a query that is not exactly `id` (three non-empty values, the action `1`, `2` or `7`) and
///    `mcId` (non-empty), or an `Accept` other than `*/*`: 400, recorded as not `valid`;
/// 4. else 200.
///
/// ```swift
/// let adobe = try FakeAdobeServer()
/// adobe.answerNext(with: .status(503))
/// // … set the service's trackingServer to adobe.baseURL …
/// #expect(adobe.waitForDelivered(2, timeout: .seconds(30)))
/// #expect(adobe.delivered.map(\.action) == ["2", "1"])
/// ```
///
/// Thread-safe; `stop()` (also run when the fake is dropped) stops the server.
public final class FakeAdobeServer: Sendable {
    /// One tracking request as the server understood it.
    public struct Hit: Sendable, Equatable {
        /// `_mId`, decoded.
        public var messageId: String
        /// `_dId`, decoded.
        public var deliveryId: String
        /// `1`, `2` or `7` (as sent).
        public var action: String
        /// `mcId`, decoded.
        public var ecid: String
        /// The status answered.
        public var status: Int
        /// Whether the request had the SDK's form (else it was answered 400).
        public var valid: Bool
        /// The request target as received.
        public var target: String
        /// `Accept` and `User-Agent` as received.
        public var accept: String?
        public var userAgent: String?
    }

    private let server: LoopbackHTTPServer
    private let ledger: Ledger

    /// Starts serving on 127.0.0.1 (`port` 0 takes a free one).
    public init(port: Int = 0) throws {
        let ledger = Ledger()
        self.ledger = ledger
        server = try LoopbackHTTPServer(port: port) { request, _ in ledger.answer(request) }
    }

    /// `http://127.0.0.1:<port>`: what a service's `trackingServer` is set to.
    public var baseURL: String { server.baseURL }

    /// The port the server listens on.
    public var port: Int { server.port }

    /// Stops the server; waits in progress return `false`. Idempotent.
    public func stop() {
        ledger.update { $0.stopped = true }
        server.stop()
    }

    // MARK: Scripting

    /// Answers the next `count` tracking requests with `reply` (e.g. `.status(503)`,
    /// `.status(429, headers: [("Retry-After", "1")])`, `.status(404)`, `.hang`, `.reset`).
    public func answerNext(_ count: Int = 1, with reply: LoopbackHTTPServer.Reply) {
        precondition(count > 0, "answerNext needs a count of at least 1")
        ledger.update { state in state.scripts += Array(repeating: reply, count: count) }
    }

    /// Answers every tracking request for message `messageId` (its `_mId`), of `action` or of
    /// any action, with `reply`, from now on (until ``clearAnswers()``).
    public func answer(_ reply: LoopbackHTTPServer.Reply, forMessage messageId: String, action: String? = nil) {
        ledger.update { $0.byMessage.append((messageId, action, reply)) }
    }

    /// Forgets every reply scripted: each request is answered by its form again.
    public func clearAnswers() {
        ledger.update { state in
            state.scripts = []
            state.byMessage = []
        }
    }

    // MARK: Observations

    /// Every tracking request to `/r/`, in the order received, whatever it was answered.
    public var hits: [Hit] { ledger.read { $0.hits } }

    /// The tracking requests answered 200, in order.
    public var delivered: [Hit] { ledger.read { $0.hits.filter { $0.status == 200 } } }

    /// Every request received, tracking or not.
    public var requests: [LoopbackHTTPServer.Request] { server.requests }

    /// Blocks until at least `count` tracking requests were answered 200, or `timeout` passed.
    public func waitForDelivered(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { state in state.hits.count { $0.status == 200 } >= count }
    }

    /// Blocks until at least `count` tracking requests arrived (answered or not), or `timeout` passed.
    public func waitForHits(_ count: Int, timeout: Duration) -> Bool {
        ledger.wait(timeout: timeout) { $0.hits.count >= count }
    }
}

extension FakeAdobeServer {
    struct State {
        var scripts: [LoopbackHTTPServer.Reply] = []
        var byMessage: [(messageId: String, action: String?, reply: LoopbackHTTPServer.Reply)] = []
        var hits: [Hit] = []
        var stopped = false
    }

    /// `State` behind one lock, with waits for it to change.
    final class Ledger: @unchecked Sendable {
        private let condition = NSCondition()
        private var state = State()

        func read<T>(_ body: (State) -> T) -> T {
            condition.withLock { body(state) }
        }

        func update<T>(_ body: (inout State) -> T) -> T {
            condition.lock()
            defer {
                condition.broadcast()
                condition.unlock()
            }
            return body(&state)
        }

        func wait(timeout: Duration, until satisfied: (State) -> Bool) -> Bool {
            condition.withLock {
                condition.wait(timeout: timeout) { satisfied(state) ? true : state.stopped ? false : nil }
            }
        }

        /// Checks and records `request`, and says what to answer.
        func answer(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Reply {
            guard request.path == "/r/" else { return .status(404, body: "not a tracking path\n") }
            guard request.method == "GET" else { return .status(405, headers: [("Allow", "GET")]) }
            var hit = Hit(messageId: "", deliveryId: "", action: "", ecid: "", status: 200, valid: false, target: request.target,
                          accept: request.header("Accept"), userAgent: request.header("User-Agent"))
            var fields: [String: String] = [:]
            var names: [String] = []
            for pair in (request.query ?? "").split(separator: "&", omittingEmptySubsequences: false) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                names.append(String(parts[0]))
                fields[String(parts[0])] = parts.count == 2 ? String(parts[1]) : ""
            }
            // The commas of `id` are literal; its values are percent-encoded one by one.
            let id = (fields["id"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map {
                String($0).removingPercentEncoding ?? ""
            }
            if id.count == 3 { (hit.messageId, hit.deliveryId, hit.action) = (id[0], id[1], id[2]) }
            hit.ecid = fields["mcId"]?.removingPercentEncoding ?? ""
            hit.valid = names == ["id", "mcId"] && id.count == 3 && !id.contains(where: \.isEmpty)
                && ["1", "2", "7"].contains(hit.action) && !hit.ecid.isEmpty && hit.accept == "*/*"
            return update { state in
                var reply: LoopbackHTTPServer.Reply
                if !state.scripts.isEmpty {
                    reply = state.scripts.removeFirst()
                } else if let scripted = state.byMessage.last(where: { $0.messageId == hit.messageId && ($0.action ?? hit.action) == hit.action }) {
                    reply = scripted.reply
                } else {
                    reply = hit.valid ? .status(200) : .status(400, body: "not the Adobe SDK's tracking request\n")
                }
                if case .respond(let status, _, _) = reply { hit.status = status } else { hit.status = 0 }
                state.hits.append(hit)
                return reply
            }
        }
    }
}
