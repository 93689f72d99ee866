/// A forward-only reader over the bytes of a field value.
struct ByteCursor {
    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    var isAtEnd: Bool { index == bytes.endIndex }

    /// Consumes `literal` if the input continues with exactly it.
    mutating func take(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.endIndex - index >= count else { return false }
        let matches = literal.withUTF8Buffer { expected in
            expected.indices.allSatisfy { expected[$0] == bytes[index + $0] }
        }
        if matches { index += count }
        return matches
    }

    /// Consumes exactly `count` ASCII digits and returns their value.
    mutating func digits(_ count: Int) -> Int? {
        guard bytes.endIndex - index >= count else { return nil }
        var value = 0
        for offset in 0..<count {
            let byte = bytes[index + offset]
            guard byte >= ASCII.digit0, byte <= ASCII.digit9 else { return nil }
            value = value * 10 + Int(byte - ASCII.digit0)
        }
        index += count
        return value
    }

    /// Consumes a run of ASCII letters equal (ignoring case) to one of `names`; returns its position.
    mutating func name(in names: [String]) -> Int? {
        var end = index
        while end < bytes.endIndex, (bytes[end] | 0x20) >= UInt8(ascii: "a"), (bytes[end] | 0x20) <= UInt8(ascii: "z") {
            end += 1
        }
        let word = bytes[index..<end].map { $0 | 0x20 }
        guard let position = names.firstIndex(where: { Array($0.utf8) == word }) else { return nil }
        index = end
        return position
    }

    /// Consumes `HH:MM:SS` (range checks are left to the caller).
    mutating func timeOfDay() -> (hour: Int, minute: Int, second: Int)? {
        guard let hour = digits(2), take(":"), let minute = digits(2), take(":"), let second = digits(2)
        else { return nil }
        return (hour, minute, second)
    }
}

/// ASCII bytes the parsers compare against.
enum ASCII {
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let digit0 = UInt8(ascii: "0")
    static let digit9 = UInt8(ascii: "9")
}
