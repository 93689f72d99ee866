import Foundation

extension NSCondition {
    /// Waits, with the lock held, until `outcome` says `true` (done) or `false` (give up), or
    /// `timeout` has passed; returns whether it said `true`.
    ///
    /// `outcome` is asked first at once, then after every `broadcast`/`signal`, always with the lock
    /// held; `nil` means "not yet". The caller must hold the lock, and still holds it afterwards.
    func wait(timeout: Duration, until outcome: () -> Bool?) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if let done = outcome() { return done }
            let remaining = clock.now.duration(to: deadline)
            if remaining <= .zero { return false }
            let seconds = Double(remaining.components.seconds) + Double(remaining.components.attoseconds) * 1e-18
            _ = wait(until: Date(timeIntervalSinceNow: min(seconds, 3600)))
        }
    }
}
