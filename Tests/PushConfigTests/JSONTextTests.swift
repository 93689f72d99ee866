import PushConfig
import Testing
import PushTestThreads

/// `JSONText.string` reads bytes; these hold it to the rule it implements, written scalar by
/// scalar as it first was.
@Suite(.blockingThreads) struct JSONTextTests {
    /// The rule: quote, backslash and the usual controls as short escapes; other C0 controls, DEL,
    /// C1 controls, U+2028 and U+2029 as `\u` and four lower-case hex digits; U+0001 kept when
    /// markers are; everything else as it is.
    static func reference(_ text: String, keepingMarkers: Bool) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\u{1}" where keepingMarkers: out.unicodeScalars.append(scalar)
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    @Test(arguments: ["", "QVBBOTFiRzlhcVd2bW54bllCWldHOWh4dnRrZ3pUWFNvcGZpdWZ6bWM2dFAzS2J", "a\"b\\c\nd\re\tf",
                      "\u{0}\u{1}\u{1f}\u{7f}", "\u{80}\u{85}\u{9f}\u{a0}é", "line\u{2028}para\u{2029}\u{2027}\u{202a}",
                      "€ ✓ 😀 \u{C2}", "https://push.example.com/v1/token/johndow?x=%41"])
    func escapesAsTheRuleSays(_ text: String) {
        for markers in [false, true] {
            #expect(JSONText.string(text, keepingMarkers: markers) == Self.reference(text, keepingMarkers: markers))
        }
    }

    @Test func everyScalarUpToU2100AndTheLineSeparatorsAlone() {
        let scalars = (0...0x2100).compactMap(Unicode.Scalar.init) + ["\u{2028}", "\u{2029}", "\u{10FFFF}"]
        for scalar in scalars {
            let text = "a" + String(Character(scalar)) + "b"
            #expect(JSONText.string(text) == Self.reference(text, keepingMarkers: false), "U+\(String(scalar.value, radix: 16))")
        }
    }
}
