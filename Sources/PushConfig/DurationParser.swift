/// Reads durations as configurations write them: `500ms`, `5s`, `15m`, `24h`, or a plain number
/// of seconds (`30`, `1.5`).
public enum DurationParser {
    /// The duration `text` names, or nil when it is not one.
    public static func parse(_ text: String) -> Duration? {
        // Over the UTF-8 bytes, without building anything: a request's timeout is read for
        // every account.
        let bytes = text.utf8
        var numberEnd = bytes.endIndex
        var scale = 1.0
        if let last = bytes.last, !isNumberByte(last) {
            numberEnd = bytes.index(before: numberEnd)
            switch last {
            case UInt8(ascii: "s"):
                scale = 1
                if numberEnd > bytes.startIndex, bytes[bytes.index(before: numberEnd)] == UInt8(ascii: "m") {
                    numberEnd = bytes.index(before: numberEnd)
                    scale = 0.001
                }
            case UInt8(ascii: "m"): scale = 60
            case UInt8(ascii: "h"): scale = 3600
            case UInt8(ascii: "d"): scale = 86400
            default: return nil
            }
        }
        let number = Substring(text.utf8[..<numberEnd])
        guard !number.isEmpty, number.utf8.allSatisfy(isNumberByte),
              let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let milliseconds = (value * scale * 1000).rounded()
        guard milliseconds < 1e15 else { return nil }
        return .milliseconds(Int64(milliseconds))
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
    }
}
