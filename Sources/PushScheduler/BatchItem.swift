/// One report of a batch handed to ``ReportScheduler``'s `performBatch`: which, and which attempt.
public struct BatchItem<Key: Sendable>: Sendable {
    /// The report.
    public var key: Key
    /// The number of this attempt of the report, counted from 1 for each submission.
    public var attempt: Int

    /// An item for attempt number `attempt` of the report `key`.
    public init(key: Key, attempt: Int) {
        self.key = key
        self.attempt = attempt
    }
}

extension BatchItem: Equatable where Key: Equatable {}
extension BatchItem: Hashable where Key: Hashable {}
