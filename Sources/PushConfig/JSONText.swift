/// A small JSON writer that keeps keys in the order given, for output people and tools read
/// (previews, diagnostics, logs, status).
public enum JSONText {
    /// `text` as a JSON string. With `keepingMarkers`, U+0001 stays as it is: a preview's
    /// secret markers (``AccountTemplates/secretMarker(_:)``) inside a body.
    public static func string(_ text: String, keepingMarkers: Bool = false) -> String {
        var text = text
        return text.withUTF8 { bytes in
            // Most texts (tokens, ids, URLs) need no escape: they are taken whole.
            guard mayNeedEscapes(bytes) else { return "\"" + String(decoding: bytes, as: UTF8.self) + "\"" }
            return escaped(bytes, keepingMarkers: keepingMarkers)
        }
    }

    /// Appends ``string(_:keepingMarkers:)`` of `text` to `out`, without a string of its own
    /// between (a stored cleanup is a dozen of them, written for each of 100,000 plans).
    public static func append(_ text: String, to out: inout String) {
        var text = text
        if text.withUTF8({ !mayNeedEscapes($0) }) {
            out.append("\"")
            out.append(text)
            out.append("\"")
        } else {
            text.withUTF8 { out.append(escaped($0, keepingMarkers: false)) }
        }
    }

    /// Whether `bytes` have one that may start an escape: a quote, a backslash, a control
    /// character, DEL, or the first byte of a C1 control (C2 80–9F) or of U+2028/U+2029
    /// (E2 80 A8/A9).
    private static func mayNeedEscapes(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }
    }

    /// `string(_:keepingMarkers:)` byte by byte (a Swift string's bytes are valid UTF-8).
    private static func escaped(_ bytes: UnsafeBufferPointer<UInt8>, keepingMarkers: Bool) -> String {
        var out: [UInt8] = [0x22]
        out.reserveCapacity(bytes.count + 16)
        func escape(_ value: UInt32) {
            out.append(contentsOf: "\\u".utf8)
            let hex = String(value, radix: 16)
            out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 4 - hex.utf8.count))
            out.append(contentsOf: hex.utf8)
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case 0x01 where keepingMarkers: out.append(byte)
            case 0x22: out.append(contentsOf: "\\\"".utf8)
            case 0x5C: out.append(contentsOf: "\\\\".utf8)
            case 0x0A: out.append(contentsOf: "\\n".utf8)
            case 0x0D: out.append(contentsOf: "\\r".utf8)
            case 0x09: out.append(contentsOf: "\\t".utf8)
            // DEL and C1 too: valid in JSON, but a terminal showing the line would obey them.
            case 0x00..<0x20, 0x7F: escape(UInt32(byte))
            case 0xC2 where index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1]):
                escape(UInt32(bytes[index + 1]))
                index += 2
                continue
            case 0xE2 where index + 2 < bytes.count && bytes[index + 1] == 0x80 && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9):
                escape(bytes[index + 2] == 0xA8 ? 0x2028 : 0x2029)
                index += 3
                continue
            default: out.append(byte)
            }
            index += 1
        }
        out.append(0x22)
        return String(decoding: out, as: UTF8.self)
    }

    public static func object(_ fields: [(String, String)], indent: String = "") -> String {
        guard !fields.isEmpty else { return "{}" }
        let inner = indent + "  "
        return "{\n" + fields.map { inner + string($0.0) + ": " + $0.1 }.joined(separator: ",\n") + "\n" + indent + "}"
    }

    /// `{"key":value,…}` on one line, keys in the order given; values are JSON already.
    public static func compactObject(_ fields: [(String, String)], keepingMarkers: Bool = false) -> String {
        "{" + fields.map { string($0.0, keepingMarkers: keepingMarkers) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    /// `[…]` with an item a line; `indent` starts each line but the first (for an array
    /// inside an object), as ``object(_:indent:)``'s does.
    public static func array(_ items: [String], indent: String = "") -> String {
        guard !items.isEmpty else { return "[]" }
        let inner = indent + "  "
        return "[\n" + items.map { inner + $0.replacing("\n", with: "\n" + inner) }.joined(separator: ",\n") + "\n" + indent + "]"
    }
}
