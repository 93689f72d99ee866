import PushBackend
import PushConfig
import PushTemplates
import PushSystem

/// `<prefix>CustomHeaders`: header lines compiled as templates.
extension RequestBuilder {
    /// A header line of a custom headers value: its name, and its value's text and byte offset.
    struct HeaderLine {
        var name: String
        var valueOffset: Int
        var valueText: String
    }


    mutating func customHeaders(_ value: ConfigValue, account: Account,
                                        diagnostics: inout DiagnosticList) -> [HeaderTemplate]? {
        var failed = false
        let lines: [HeaderLine]
        if let known = headerLineAnswers.answer(to: value.text) {
            lines = known
        } else {
            // Into a list of its own: `diagnostics` drops a repeat (another account's same
            // warning), which would look like a text read without a word said.
            var found = DiagnosticList()
            (lines, failed) = headerLines(value, diagnostics: &found)
            diagnostics.append(contentsOf: found.all)
            // Only a text read without a word said is read alike for another account.
            if !failed && found.all.isEmpty {
                headerLineAnswers.remember(lines, for: value.text)
            }
        }
        var result: [HeaderTemplate] = []
        result.reserveCapacity(lines.count)
        for line in lines {
            guard let template = templates.compile(value, kind: .headerValue, baseOffset: line.valueOffset,
                                                   text: line.valueText, diagnostics: &diagnostics) else {
                failed = true
                continue
            }
            result.append(HeaderTemplate(name: line.name, value: PlacedTemplate(template: template, origin: value)))
        }
        return failed ? nil : result
    }

    /// The `Name: value` lines of a custom headers value, and whether one could not be read
    /// (problems added to `diagnostics`).
    func headerLines(_ value: ConfigValue, diagnostics: inout DiagnosticList) -> (lines: [HeaderLine], failed: Bool) {
        var lines: [HeaderLine] = []
        var failed = false
        var lineStart = 0
        let bytes = Array(value.text.utf8)
        // Split on LF bytes (a String split would keep "\r\n" together as one character).
        for lineBytes in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            defer { lineStart += lineBytes.count + 1 }
            let line = lineBytes.last == 0x0D ? lineBytes.dropLast() : lineBytes[...]
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                let shown = value.isSecret ? "********" : String(decoding: line, as: UTF8.self)
                templates.report(.error, "a custom header line must read 'Name: value', not '\(shown)'", at: value, offset: lineStart, diagnostics: &diagnostics)
                failed = true
                continue
            }
            var nameBytes = line[..<colon]
            while let first = nameBytes.first, first == 0x20 || first == 0x09 { nameBytes = nameBytes.dropFirst() }
            while let last = nameBytes.last, last == 0x20 || last == 0x09 { nameBytes = nameBytes.dropLast() }
            let name = String(decoding: nameBytes, as: UTF8.self)
            if let percent = nameBytes.firstIndex(of: UInt8(ascii: "%")) {
                templates.report(.error, "a placeholder cannot stand in a header name", at: value, offset: percent, diagnostics: &diagnostics)
                failed = true
                continue
            }
            guard !name.isEmpty, nameBytes.allSatisfy(Self.isTokenByte) else {
                templates.report(.error, "'\(value.isSecret ? "********" : name)' is not a valid header name", at: value, offset: lineStart,
                       diagnostics: &diagnostics)
                failed = true
                continue
            }
            var valueStart = colon + 1
            while valueStart < line.endIndex, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
            let headerText = String(decoding: line[valueStart...], as: UTF8.self)
            switch name.lowercased() {
            case "user-agent":
                templates.report(.warning, "User-Agent is always \(Self.userAgent); this header is not sent",
                       at: value, offset: lineStart, diagnostics: &diagnostics)
                continue
            case "content-type":
                templates.report(.warning, "set the body's type with the ContentType key, so that values are encoded for it",
                       at: value, offset: lineStart, diagnostics: &diagnostics)
            default:
                break
            }
            if lines.contains(where: { $0.name.lowercased() == name.lowercased() }) {
                templates.report(.warning, "the header \(name) is given twice; both lines are sent", at: value, offset: lineStart, diagnostics: &diagnostics)
            }
            lines.append(HeaderLine(name: name, valueOffset: valueStart, valueText: headerText))
        }
        return (lines, failed)
    }
}
