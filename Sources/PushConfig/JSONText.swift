/// A small JSON writer that keeps keys in the order given, for output people and tools read
/// (previews, diagnostics, logs, status).
public enum JSONText {
    /// `text` as a JSON string. With `keepingMarkers`, U+0001 stays as it is: a preview's
    /// secret markers (``AccountTemplates/secretMarker(_:)``) inside a body.
    public static func string(_ text: String, keepingMarkers: Bool = false) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\u{1}" where keepingMarkers: out.unicodeScalars.append(scalar)
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            // DEL and C1 too: valid in JSON, but a terminal showing the line would obey them.
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
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

    public static func array(_ items: [String]) -> String {
        guard !items.isEmpty else { return "[]" }
        return "[\n" + items.map { "  " + $0.replacing("\n", with: "\n  ") }.joined(separator: ",\n") + "\n]"
    }
}
