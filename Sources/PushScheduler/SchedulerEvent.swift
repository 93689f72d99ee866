/// Something the scheduler did with a report, for logs, state and status.
///
/// Events are delivered in order, one at a time, from the task that runs
/// ``ReportScheduler/run()``: `started` always comes before the `delivered` or `failed` of
/// the same attempt. Attempt numbers count from 1 for each submission of a key.
public enum SchedulerEvent<Key: Sendable>: Sendable {
    /// Attempt number `attempt` of the report `Key` has started (its `perform` is being called).
    case started(Key, attempt: Int)
    /// The report was delivered by its attempt number `attempts`; it is no longer scheduled.
    case delivered(Key, attempts: Int)
    /// Attempt number `attempt` failed with `failure`; the next attempt starts `retryIn` later.
    case failed(Key, attempt: Int, failure: AttemptFailure, retryIn: Duration)

    /// The report the event is about.
    public var key: Key {
        switch self {
        case .started(let key, _), .delivered(let key, _), .failed(let key, _, _, _): key
        }
    }
}

extension SchedulerEvent: Equatable where Key: Equatable {}
extension SchedulerEvent: Hashable where Key: Hashable {}
