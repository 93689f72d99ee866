extension String {
    /// This text with every control character written as an escape (SPEC §12), for printing text
    /// that comes from a configuration file or a server in a line a person reads: `\n`, `\r`,
    /// `\t`, and `\xHH` for the other characters of C0, for DEL and for C1 (U+0080–U+009F). So no
    /// value can end a log line and forge the next one, end a `#` comment of a shell script, or
    /// send a terminal an escape sequence. Everything else, backslashes included, is kept as it
    /// is: this is for reading, not for parsing back.
    public var displayEscaped: String {
        // C1 characters are C2 80–C2 9F in UTF-8: a C2 byte is worth a closer look.
        guard utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }) else { return self }
        var out = ""
        out.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            switch scalar.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x00..<0x20, 0x7F...0x9F:
                let hex = String(scalar.value, radix: 16)
                out += (hex.count == 1 ? "\\x0" : "\\x") + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
