import PushAdobe
import PushConfig
import Testing
import PushTestThreads

/// `payload`'s message files: every key read, each problem said at its place.
@Suite(.blockingThreads) struct TestPushMessageTests {
    static func parse(_ yaml: String) -> (TestPushMessage?, [String]) {
        var diagnostics = DiagnosticList()
        let message = TestPushMessage.parse(Array(yaml.utf8), file: "m.yaml", diagnostics: &diagnostics)
        return (message, diagnostics.all.map(\.formatted))
    }

    @Test func trackingAndContentAvailableAreWrittenAsTheAppReadsThem() throws {
        let message = try #require(Self.parse("tracking: OFF\ncontentAvailable: yes\nbadge: 0\n").0)
        #expect(message.json(for: .ios) == """
            {
              "aps": {
                "content-available": 1,
                "badge": 0
              },
              "_acsDeliveryTracking": "off"
            }

            """)
        #expect(message.json(for: .android).contains(#""_acsDeliveryTracking": "off","#))
        #expect(message.json(for: .android).contains(#""badge": "0""#))
    }

    @Test func valuesAreEscapedForJSON() throws {
        let message = try #require(Self.parse("title: 'say \"hi\"\\n'\ncustom: {\"k\\\\\": \"v\\t\"}\n").0)
        #expect(message.json(for: .ios).contains(#""title": "say \"hi\"\\n""#))
    }

    @Test func problemsAreSaidAtTheirPlace() {
        let (message, lines) = Self.parse("badge: -1\npriority: urgent\nsound: !env SOUND\ncustom: [a]\n")
        #expect(message == nil)
        #expect(lines == [
            "m.yaml:1:8: error: badge must be a whole number, 0 or more, not '-1'",
            "m.yaml:2:11: error: priority must be high or normal, not 'urgent'",
            "m.yaml:3:13: error: sound cannot be tagged !env in a message: write the value itself",
            "m.yaml:4:9: error: custom must be a mapping of keys to values, not a sequence",
        ])
        #expect(Self.parse("- a\n").1 == ["m.yaml:1:1: error: a message is a YAML mapping of title, body, badge, sound, category, contentAvailable, mediaUrl, uri, deliveryId, messageId, tracking, collapseKey, priority, custom"])
    }
}
