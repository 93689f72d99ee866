/// Reads durations as configurations write them: `500ms`, `5s`, `15m`, `24h`, `2d`, compounds of
/// those from the largest unit down (`1h30m`, `2m30s`, `1d12h`), or a plain number of seconds
/// (`30`, `1.5`).
public enum DurationParser {
    /// The units, largest first, with their length in milliseconds.
    private static let units: [(name: String, milliseconds: Double)] = [
        ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1),
    ]

    /// The duration `text` names, or nil when it is not one.
    public static func parse(_ text: String) -> Duration? {
        // Over the UTF-8 bytes, without building anything: a request's timeout is read for
        // every account.
        let bytes = text.utf8
        var index = bytes.startIndex
        var total = 0.0
        // The units used so far must go from larger to smaller: `30m1h` is a slip, not 90 minutes.
        var smallestUnitSoFar = units.count
        var parts = 0
        while index < bytes.endIndex {
            let numberStart = index
            while index < bytes.endIndex, isNumberByte(bytes[index]) { index = bytes.index(after: index) }
            let number = Substring(bytes[numberStart..<index])
            guard !number.isEmpty, let value = Double(number), value.isFinite, value >= 0 else { return nil }
            let unitStart = index
            while index < bytes.endIndex, !isNumberByte(bytes[index]) { index = bytes.index(after: index) }
            parts += 1
            if unitStart == index {
                // A plain number of seconds is a duration only on its own.
                guard parts == 1, index == bytes.endIndex else { return nil }
                total = value * 1000
                break
            }
            let unitBytes = bytes[unitStart..<index]
            guard let unit = units.firstIndex(where: { $0.name.utf8.elementsEqual(unitBytes) }),
                  smallestUnitSoFar == units.count || unit > smallestUnitSoFar else { return nil }
            smallestUnitSoFar = unit
            total += value * units[unit].milliseconds
        }
        guard parts > 0 else { return nil }
        let milliseconds = total.rounded()
        guard milliseconds < 1e15 else { return nil }
        return .milliseconds(Int64(milliseconds))
    }

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
    }
}
