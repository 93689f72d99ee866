import Foundation
import PushTemplates
import PushTestSupport
import Testing
import PushTestThreads

/// A check of many accounts renders a template only when values can change whether rendering
/// fails or whether the output is well-formed: what `valueSensitivity` says must hold for every value.
@Suite("Value sensitivity: what values can change about rendering", .blockingThreads)
struct ValueSensitivityTests {
    private func sensitivity(_ source: String, _ kind: TemplateKind) throws -> ValueSensitivity {
        var scope = TestScope()
        let compiled = Template.compile(source, kind: kind, scope: &scope)
        let template = try #require(compiled.template, "\(source): \(compiled.issues.map(\.message))")
        return template.valueSensitivity
    }

    @Test("each kind and position, as the encodings decide")
    func classification() throws {
        // The shipped Acrobits templates: none of them needs rendering to be checked.
        #expect(try sensitivity("https://h.example/t/?u=%account[username]%&s=%selector%&t=%pushTokenOther%", .url) == .none)
        #expect(try sensitivity(#"{"u": "%account[username]%", "t": %pushToken%}"#, .body(.json)) == .none)
        #expect(try sensitivity("u=%account[username]%&t=%pushToken%", .body(.form)) == .none)
        #expect(try sensitivity("%account[user]%", .plain) == .none)
        #expect(try sensitivity("https://h.example/%raw(%v%)%?a=%json(%v%)%", .url) == .none)
        #expect(try sensitivity(#"{"a": "%urlencode(%v%)%", "b": "%json(%v%)%"}"#, .body(.json)) == .none)
        #expect(try sensitivity("plain %raw(%v%)%", .body(.raw)) == .none)

        // Header values: the slots whose values are inserted as they are.
        #expect(try sensitivity("%hmac_sha256(%appId%,%account[username]%:%selector%)%", .headerValue) == .none)
        #expect(try sensitivity("%appId% %sha1(%v%)% %base64(%v%)% %urlencode(%v%)% %json(%v%)%", .headerValue)
            == .lineBreaks(inSlots: [7]))
        #expect(try sensitivity("%upper(%selector%)%-%default(%account[k]%,%v%)%-%selector%", .headerValue)
            == .lineBreaks(inSlots: [0, 1000, 9]))

        // Only rendering tells.
        #expect(try sensitivity("<a>%v%</a>", .body(.xml)) == .unknown)
        #expect(try sensitivity("https://h.example/?x=%xml(%v%)%", .url) == .unknown)
        #expect(try sensitivity(#"{"a": "%raw(%v%)%"}"#, .body(.json)) == .unknown)
        #expect(try sensitivity(#"{"a": %urlencode(%v%)%}"#, .body(.json)) == .unknown)
        #expect(try sensitivity(#"{"a": %json(%v%)%}"#, .body(.json)) == .unknown)
        #expect(try sensitivity("%upper(%xml(%v%)%)%", .headerValue) == .unknown)
        // A value that finishes an escape the template began: "\n" is JSON, "\x" is not.
        #expect(try sensitivity(#"{"a": "\%v%"}"#, .body(.json)) == .unknown)
        #expect(try sensitivity(#"{"a": "\u00%v%"}"#, .body(.json)) == .unknown)
        #expect(try sensitivity(#"{"a": "\n%v%", "b": "\\%v%"}"#, .body(.json)) == .unknown)
    }

    /// Templates of every sensitivity short of `unknown`, over random values.
    static let cases: [(source: String, kind: TemplateKind)] = [
        ("https://h.example/a/%v%?q=%selector%&r=%raw(%v%)%&s=%json(%v%)%", .url),
        (#"{"a": "%v%", "b": %selector%, "c": "%urlencode(%v%)%", "d": "%json(%selector%)%", "e": [%upper(%v%)%]}"#, .body(.json)),
        ("x=%v%&y=%raw(%selector%)%", .body(.form)),
        ("%v% and %selector%", .plain),
        ("t=%v%; s=%sha256(%selector%)%; u=%upper(%trim(%selector%)%)%", .headerValue),
        ("%hmac_sha256(%v%,%selector%)% %base64(%v%)% %json(%selector%)%", .headerValue),
    ]

    @Test("rendering fails only when a named slot's value holds CR, LF or NUL, and JSON stays JSON")
    func contractHoldsForRandomValues() throws {
        var rng = SeededGenerator(seed: 0x5EED)
        for (source, kind) in Self.cases {
            var scope = TestScope()
            let template = try #require(Template.compile(source, kind: kind, scope: &scope).template)
            let slots: [Int]
            switch template.valueSensitivity {
            case .none: slots = []
            case .lineBreaks(let found): slots = found
            case .unknown:
                Issue.record("\(source) should not need rendering")
                continue
            }
            for _ in 0..<500 {
                let values = ["v": EncodingPropertyTests.randomValue(&rng, allowControls: true),
                              "selector": EncodingPropertyTests.randomValue(&rng, allowControls: true)]
                let testValues = TestValues(scope: scope, values: values)
                let breaks = slots.contains { slot in
                    testValues.value(at: slot).utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
                }
                do {
                    // A named slot's line break may still be trimmed away, or not chosen by default().
                    let output = try template.render(testValues)
                    if kind == .body(.json) {
                        let parsed = try? JSONSerialization.jsonObject(with: Data(output.utf8), options: [.fragmentsAllowed])
                        #expect(parsed != nil, "not JSON: \(output)")
                    }
                } catch {
                    #expect(breaks, "\(source) failed for values without line breaks: \(values)")
                }
            }
        }
    }
}
