import PushBackend
import PushScheduler
import PushSystem

/// Where tracking remembers the actions that reached their server, so that each (payload,
/// action) is sent once (SPEC §9.4): the state database's `tracked_actions` table conforms, in
/// the agent's module.
public protocol TrackingLedger: Sendable {
    /// Whether `request` was delivered before.
    func wasDelivered(_ request: TrackingRequest) throws -> Bool
    /// Remembers, durably before it returns, that `request` was delivered at `epochMilliseconds`.
    func recordDelivered(_ request: TrackingRequest, at epochMilliseconds: Int64) throws
    /// Where it is, for messages (the state database's path).
    var location: String { get }
}

/// A ``TrackingLedger`` over what the application keeps of what was sent once (the state
/// database's `tracked_actions`, ``SentOnceLedger``).
public struct SentOnceTrackingLedger: TrackingLedger {
    let base: any SentOnceLedger

    public init(_ base: any SentOnceLedger) {
        self.base = base
    }

    public var location: String { base.location }

    public func wasDelivered(_ request: TrackingRequest) throws -> Bool {
        try base.wasSent(request.key)
    }

    public func recordDelivered(_ request: TrackingRequest, at epochMilliseconds: Int64) throws {
        try base.recordSent(SentOnceEntry(key: request.key, service: request.service, messageId: request.messageId,
                                          deliveryId: request.deliveryId, action: request.action.rawValue, sentAt: epochMilliseconds))
    }
}

/// What one attempt of a tracking action came to, the ledger consulted and written.
enum TrackingStep: Sendable {
    /// Sent now, answered 200, and remembered (when there is a ledger).
    case delivered
    /// Delivered before: not sent again.
    case alreadySent
    /// Delivered, but the ledger could not remember it: the reason.
    case deliveredNotRecorded(String)
    /// The server refused it: the reason. Not tried again.
    case rejected(String)
    /// The ledger could not be read, so it is not known whether it was sent: the reason.
    case unknown(String)
    /// Tried again later.
    case retry(AttemptFailure)

    /// One attempt of `request`: asks `ledger` first, sends, and remembers a delivery. The
    /// ledger (a database) is asked on a thread of `blocking`, never on Swift's cooperative pool.
    static func attempt(_ request: TrackingRequest, transport: any HTTPTransport, ledger: (any TrackingLedger)?,
                        wallClock: @escaping @Sendable () -> Int64, blocking: BlockingPool = .shared) async -> TrackingStep {
        if let ledger {
            do {
                if try await blocking.run(throwing: { try ledger.wasDelivered(request) }) { return .alreadySent }
            } catch is CancellationError {
                return .retry(.cancelled)
            } catch {
                return .unknown("the state \(ledger.location) cannot be read (\(error)), so it is not known whether it was sent")
            }
        }
        switch await AdobeSender.send(request, transport: transport) {
        case .retry(let failure):
            return .retry(failure)
        case .rejected(let why):
            return .rejected(why)
        case .delivered:
            guard let ledger else { return .delivered }
            let at = wallClock()
            // Remembered to the end, cancelled or not: it was delivered.
            let failure = await blocking.runToEnd { () -> String? in
                do {
                    try ledger.recordDelivered(request, at: at)
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            if let failure { return .deliveredNotRecorded("the state \(ledger.location) cannot be written (\(failure))") }
            return .delivered
        }
    }
}
