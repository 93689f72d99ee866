import PushBackend
@testable import PushJourneys
import Testing
import PushTestThreads

/// A stored cleanup's text is compared with the state's at each reload: written by hand, it must
/// be the bytes JSONEncoder (sorted keys, slashes kept) wrote before, and read back whole.
@Suite(.blockingThreads) struct StoredCleanupTests {
    static let items = [
        JourneysItem(kind: .cleanup, url: "https://public-eur.mkt.dynamics.com/api/v1.0/orgs/1/pushdevicecleanup",
                     batchURL: "https://public-eur.mkt.dynamics.com/api/v1.0/orgs/1/pushdevicecleanup/batch",
                     object: #"{"ApiToken":"tok\"en","UserId":"alice","DeviceToken":"a/b+c=="}"#,
                     headers: [], tracked: false, secrets: []),
        JourneysItem(kind: .registration, url: "http://127.0.0.1:8080/devices", batchURL: "http://127.0.0.1:8080/devices/batch",
                     object: "{\"UserId\":\"Zoë 👋\",\"Note\":\"tab\\there\\nline\"}",
                     headers: [.init(name: "x-ms-track-registration", value: "true"),
                               .init(name: "x-ms-callback", value: "https://hooks.example.com/cb?a=1&b=\\2")],
                     tracked: true, secrets: ["s3cr\"et", "other\\one"]),
        // The characters JSONText escapes unlike JSONEncoder, in a token and in the object.
        JourneysItem(kind: .cleanup, url: "http://127.0.0.1:8080/devices/cleanup", batchURL: "http://127.0.0.1:8080/devices/cleanup/batch",
                     object: "{\"UserId\":\"bell\u{8}feed\u{C}del\u{7F}c1\u{85}ls\u{2028}ps\u{2029}£\"}",
                     headers: [], tracked: false, secrets: ["tok\u{C}en"]),
        JourneysItem(kind: .cleanup, url: "http://127.0.0.1:8080/devices/cleanup", batchURL: "http://127.0.0.1:8080/devices/cleanup/batch",
                     object: "{}", headers: [], tracked: false, secrets: ["only\u{2028}here"]),
    ]

    @Test(arguments: items)
    func theTextIsWhatJSONEncoderWroteAndReadsBack(_ item: JourneysItem) throws {
        let cleanup = StoredCleanup(item: item, batchSize: 100)
        #expect(cleanup.text == StoredJSON.encode(cleanup))
        let read = try #require(StoredCleanup(text: cleanup.text))
        #expect(read.item.object == item.object)
        #expect(read.item.headers == item.headers)
        #expect(read.item.secrets == item.secrets)
        #expect(read.item.tracked == item.tracked && read.item.kind == item.kind && read.batchSize == 100)
    }
}
