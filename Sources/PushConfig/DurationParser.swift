/// Reads durations as configurations write them: `500ms`, `5s`, `15m`, `24h`, or a plain number
/// of seconds (`30`, `1.5`).
public enum DurationParser {
    /// The duration `text` names, or nil when it is not one.
    public static func parse(_ text: String) -> Duration? {
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.scale
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let milliseconds = (value * scale * 1000).rounded()
        guard milliseconds < 1e15 else { return nil }
        return .milliseconds(Int64(milliseconds))
    }
}
