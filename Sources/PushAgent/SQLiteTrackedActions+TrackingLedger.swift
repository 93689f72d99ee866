import PushAdobe
import PushState

/// The state database remembers the tracking actions delivered (SPEC §9.4), for `track
/// --state-dir` and the agent's tracking spool.
extension SQLiteTrackedActions: TrackingLedger {
    public var location: String { path }

    public func wasDelivered(_ request: TrackingRequest) throws -> Bool {
        try contains(request.key)
    }

    public func recordDelivered(_ request: TrackingRequest, at epochMilliseconds: Int64) throws {
        try record(TrackedAction(key: request.key, service: request.service, messageId: request.messageId,
                                 deliveryId: request.deliveryId, action: request.action.rawValue, sentAt: epochMilliseconds))
    }
}
