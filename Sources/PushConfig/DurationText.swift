/// A duration as a person reads it: `250ms`, `4.2s`, `20s`, `12m`, `3m 20s`, `1h 5m`.
public struct DurationText: CustomStringConvertible, Sendable {
    public let duration: Duration

    public init(_ duration: Duration) { self.duration = duration }

    public var description: String {
        let milliseconds = max(0, duration.milliseconds)
        if milliseconds < 1000 { return "\(milliseconds)ms" }
        if milliseconds < 60_000 {
            let tenths = (milliseconds + 50) / 100
            return tenths % 10 == 0 ? "\(tenths / 10)s" : "\(tenths / 10).\(tenths % 10)s"
        }
        let total = (milliseconds + 500) / 1000
        if total < 3600 {
            return total % 60 == 0 ? "\(total / 60)m" : "\(total / 60)m \(total % 60)s"
        }
        let minutes = (total % 3600) / 60
        return minutes == 0 ? "\(total / 3600)h" : "\(total / 3600)h \(minutes)m"
    }
}
