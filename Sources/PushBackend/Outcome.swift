import PushScheduler

/// What a backend says of one subscription after an attempt (SPEC §9.0).
public enum Outcome: Sendable, Equatable {
    /// Delivered: done until the values change (or `reportInterval` passes).
    case delivered
    /// Delivered, and the text is what the backend keeps in state for it (a group's
    /// notification key): read back at the next start with ``Backend/restore(_:)``.
    case deliveredKeeping(String)
    /// Sent and accepted, to be confirmed later (by polling, or a webhook): the text is what the
    /// backend keeps in state to ask about it (a registration request id).
    case accepted(String)
    /// Not delivered; tried again after the backoff of SPEC §5 (`Retry-After` honoured).
    case retry(AttemptFailure)
    /// These values can never succeed: not sent again until they change or the agent restarts.
    /// For a cleanup: given up (the receiver refused it), and forgotten.
    case rejected(String)
    /// The service refused its credentials: no subscription of it is sent until a reload or a
    /// restart.
    case stopped(String)
}
