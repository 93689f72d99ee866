import Foundation
import PushTestSupport
import Testing
import PushTestThreads

/// `pushreporter payload` (SPEC §9.4): the test pushes of seed 003, byte for byte, and `track`
/// reads what it prints.
@Suite(.blockingThreads) struct PayloadTests {
    /// The iOS sample of seed 003 as a message.
    static let iosMessage = """
        title: Push Notification Title
        body: This is the content of my push notification
        badge: 2
        sound: default
        category: NEW_MESSAGE_CATEGORY
        contentAvailable: true
        mediaUrl: https://2.img-dpreview.com/files/p/articles/9440145363/Creative_Cloud.jpeg
        uri: https://mydeeplinkurl.com
        deliveryId: 56c4
        messageId: h138a
        tracking: on
        custom:
          custom_field1: custom_value1
          custom_field2: custom_value2
        """

    /// The Android sample of seed 003 as a message.
    static let androidMessage = """
        collapseKey: "1476005"
        deliveryId: d57fd6
        messageId: h1685a5
        title: adobe title 123
        body: adobe body 123
        category: adobe category 123
        custom:
          custom key 1: value 1
          custom key 2: test value 2
          custom key 3: foo bar android
        mediaUrl: http://adobegiphy.com?test=123
        sound: http://testcampaign.instance.com/r/?id=s1685a5,d57fd6,d57ff5
        uri: http://testcampaign.instance.com/r/?id=d1685a5,d57fd6,d57ff6
        badge: 1817
        """

    static let iosGolden = """
        {
          "aps": {
            "alert": {
              "body": "This is the content of my push notification",
              "title": "Push Notification Title"
            },
            "content-available": 1,
            "category": "NEW_MESSAGE_CATEGORY",
            "badge": 2,
            "mutable-content": 1,
            "sound": "default"
          },
          "custom_field1": "custom_value1",
          "custom_field2": "custom_value2",
          "media-attachment-url": "https://2.img-dpreview.com/files/p/articles/9440145363/Creative_Cloud.jpeg",
          "uri": "https://mydeeplinkurl.com",
          "_dId": "56c4",
          "_mId": "h138a",
          "_acsDeliveryTracking": "on"
        }

        """

    static let androidGolden = """
        {
          "collapseKey": "1476005",
          "priority": "high",
          "data": {
            "_dId": "d57fd6",
            "_mId": "h1685a5",
            "body": "adobe body 123",
            "category": "adobe category 123",
            "custom key 1": "value 1",
            "custom key 2": "test value 2",
            "custom key 3": "foo bar android",
            "media-attachment-url": "http://adobegiphy.com?test=123",
            "sound": "http://testcampaign.instance.com/r/?id=s1685a5,d57fd6,d57ff5",
            "title": "adobe title 123",
            "uri": "http://testcampaign.instance.com/r/?id=d1685a5,d57fd6,d57ff6",
            "badge": "1817"
          }
        }

        """

    static func payload(_ platform: String, _ message: String) throws -> ProcessOutput {
        let directory = TemporaryDirectory()
        let path = directory.write("message.yaml", message)
        return try ProcessRunner.pushreporter(["payload", "--platform", platform, path])
    }

    @Test func theIOSPayloadIsTheSeedsSample() throws {
        let result = try Self.payload("ios", Self.iosMessage)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == Self.iosGolden)
        #expect(result.stderr.isEmpty)
        #expect(try Self.payload("ios", Self.iosMessage).stdout == result.stdout, "byte-stable")
    }

    @Test func theAndroidPayloadIsTheSeedsSampleWithEveryDataValueAString() throws {
        let result = try Self.payload("android", Self.androidMessage)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == Self.androidGolden)
    }

    @Test func aKeyThePlatformDoesNotCarryIsNoted() throws {
        let ios = try Self.payload("ios", Self.androidMessage)
        #expect(ios.status == 0)
        #expect(ios.stderr == "payload: note: collapseKey is an FCM option (APNs takes it as a request header), so the iOS payload does not carry it\n")
        let android = try Self.payload("android", Self.iosMessage)
        #expect(android.stderr == "payload: note: contentAvailable is an iOS flag (aps.content-available), so the Android payload does not carry it\n")
        #expect(android.stdout.contains(#""_acsDeliveryTracking": "on","#))
    }

    @Test func aMinimalMessageHasOnlyWhatItGives() throws {
        let result = try Self.payload("ios", "body: hi\n")
        #expect(result.stdout == "{\n  \"aps\": {\n    \"alert\": {\n      \"body\": \"hi\"\n    }\n  }\n}\n")
        let android = try Self.payload("android", "priority: normal\n")
        #expect(android.stdout == "{\n  \"priority\": \"normal\",\n  \"data\": {}\n}\n")
    }

    @Test func unknownKeysAndBadValuesAreErrorsAtTheirPlace() throws {
        let directory = TemporaryDirectory()
        let path = directory.write("message.yaml", """
            titel: Hello
            badge: lots
            tracking: maybe
            custom:
              uri: https://elsewhere.example
              nested: {a: 1}
            """)
        let result = try ProcessRunner.pushreporter(["payload", "--platform", "ios", path])
        #expect(result.status == 78)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == """
            \(path):1:1: error: unknown key 'titel' in a message; did you mean 'title'?
            \(path):2:8: error: badge must be a whole number, 0 or more, not 'lots'
            \(path):3:11: error: tracking must be on or off, not 'maybe'
            \(path):5:3: error: custom key 'uri' is one the payload writes itself; give it another name
            \(path):6:11: error: custom key 'nested' must be a single value, not a mapping

            """)
    }

    @Test(arguments: ["ios", "android"])
    func trackReadsWhatPayloadPrints(platform: String) throws {
        let adobe = try FakeAdobeServer()
        let printed = try Self.payload(platform, platform == "ios" ? Self.iosMessage : Self.androidMessage)
        #expect(printed.status == 0)
        let result = try TrackTests.track(config: TrackTests.config(adobe.baseURL),
                                          ["--service", "adobe", "--event", "open", "--account", "dana"], stdin: printed.stdout)
        #expect(result.status == 0, "\(result.stderr)")
        let ids = platform == "ios" ? "h138a,56c4" : "h1685a5,d57fd6"
        #expect(adobe.hits.map(\.target) == ["/r/?id=\(ids),2&mcId=\(TrackTests.ecid)", "/r/?id=\(ids),1&mcId=\(TrackTests.ecid)"])
        #expect(result.stdout.hasPrefix("stdin:1: action 2 (click) delivered"))
    }
}
