import PushConfig
import Testing
import PushTestThreads

/// SPEC §12: control characters in text that is printed are written as escapes.
@Suite(.blockingThreads) struct ControlCharacterEscapingTests {
    @Test(arguments: [
        ("plain text, é, \u{A0}, ©, 日本, \\ and %", "plain text, é, \u{A0}, ©, 日本, \\ and %"),
        ("a\nb\r\tc", #"a\nb\r\tc"#),
        ("\u{0}\u{1B}[31m\u{7F}", #"\x00\x1b[31m\x7f"#),
        ("C1: \u{80}\u{85}\u{9B}\u{9F} but not \u{A0}", "C1: \\x80\\x85\\x9b\\x9f but not \u{A0}"),
    ])
    func controlCharactersAreEscapedAndNothingElse(text: String, printed: String) {
        #expect(text.displayEscaped == printed)
    }

    @Test func escapingTwiceChangesNothingMore() {
        let once = "id\n\u{1B}x".displayEscaped
        #expect(once.displayEscaped == once)
    }
}
