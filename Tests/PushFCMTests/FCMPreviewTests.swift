import PushBackend
import PushConfig
@testable import PushFCM
import Testing
import PushTestThreads

/// `preview` of device-group subscriptions, and the plans `run` gets (SPEC §9.3, §9.0, §12).
@Suite(.blockingThreads) struct FCMPreviewTests {
    static let yaml = """
        services:
          fcm: {type: fcm-device-group, projectId: p-1, serviceAccount: !file sa.json}
          legacy: {type: fcm-device-group, endpoint: "https://fcm.example.com/fcm/notification/", projectId: p-1, serverKey: !env FCM_KEY}
        accounts:
          - username: alice
            pushTokenOther: !env ALICE_TOKEN
            services: {fcm: {group: family}, legacy: {}}
          - username: bob
            services: {fcm: {group: family}}

        """

    static func previews(_ display: SecretDisplay) -> [RenderedRequest] {
        let loaded = LoadedFCM(yaml, environment: ["FCM_KEY": "legacy-key-1", "ALICE_TOKEN": "token-alice"])
        var diagnostics = DiagnosticList()
        var planner = FCMBackend().planner(loaded.context, diagnostics: &diagnostics)
        return loaded.result.configuration.accounts.flatMap { planner.preview($0, display: display, diagnostics: &diagnostics) }
    }

    static func text(_ request: RenderedRequest) -> String {
        ([request.reporter + " " + request.method + " " + request.url] + request.headers.map { "\($0.name): \($0.value)" }
            + [request.body ?? ""]).joined(separator: "\n")
    }

    @Test func eachSubscriptionShowsItsCreateAndItsRemovalWithSecretsMasked() {
        let requests = Self.previews(.stars)
        #expect(requests.map(Self.text) == [
            """
            fcm POST https://fcm.googleapis.com/fcm/notification
            User-Agent: \(PushReporterVersion.userAgent)
            Content-Type: application/json
            Authorization: Bearer ********
            access_token_auth: true
            project_id: p-1
            {"operation":"create","notification_key_name":"family","registration_ids":["********"]}
            """,
            """
            fcm POST https://fcm.googleapis.com/fcm/notification
            User-Agent: \(PushReporterVersion.userAgent)
            Content-Type: application/json
            Authorization: Bearer ********
            access_token_auth: true
            project_id: p-1
            {"operation":"remove","notification_key_name":"family","notification_key":"<notification_key>","registration_ids":["********"]}
            """,
            """
            legacy POST https://fcm.example.com/fcm/notification
            User-Agent: \(PushReporterVersion.userAgent)
            Content-Type: application/json
            Authorization: key=********
            project_id: p-1
            {"operation":"create","notification_key_name":"alice","registration_ids":["********"]}
            """,
            """
            legacy POST https://fcm.example.com/fcm/notification
            User-Agent: \(PushReporterVersion.userAgent)
            Content-Type: application/json
            Authorization: key=********
            project_id: p-1
            {"operation":"remove","notification_key_name":"alice","notification_key":"<notification_key>","registration_ids":["********"]}
            """,
        ], "bob has no token yet: nothing to show")
        // Named as the log names them; the removals are the cleanups.
        #expect(requests.map(\.kind) == ["group membership", "group removal", "group membership", "group removal"])
        #expect(requests.map(\.isCleanup) == [false, true, false, true])
    }

    @Test func curlNamesTheSecretsAndShowSecretsRevealsWhatIsKnown() {
        let curl = Self.previews(.shellVariables)
        #expect(curl[0].header("Authorization") == "Bearer \u{1}FCM_ACCESS_TOKEN\u{1}")
        #expect(curl[0].body?.contains(#"["\#u{1}ALICE_TOKEN\#u{1}"]"#) == true)
        #expect(curl[2].header("Authorization") == "key=\u{1}FCM_KEY\u{1}")
        #expect(curl.allSatisfy { $0.hasSecretMarkers })
        let shown = Self.previews(.asSent)
        #expect(shown[0].header("Authorization") == "Bearer <access token>", "only a token endpoint gives one")
        #expect(shown[0].body?.contains(#"["token-alice"]"#) == true)
        #expect(shown[2].header("Authorization") == "key=legacy-key-1")
    }

    @Test func plansAddEachTokenToItsGroupAndKeepItsRemovalAsCleanup() throws {
        let loaded = LoadedFCM(Self.yaml, environment: ["FCM_KEY": "legacy-key-1", "ALICE_TOKEN": "token-alice"])
        var diagnostics = DiagnosticList()
        let backend = FCMBackend()
        var planner = backend.planner(loaded.context, diagnostics: &diagnostics)
        let accounts = loaded.result.configuration.accounts
        let alice = planner.plans(for: accounts[0], diagnostics: &diagnostics)
        #expect(alice.map(\.service) == ["fcm", "legacy"])
        let delivery = try #require(alice[0].delivery)
        #expect(delivery.family == "fcm-device-group")
        #expect(delivery.pauseLabel == "fcm")
        #expect(delivery.host == "fcm.googleapis.com:443")
        #expect(delivery.batch?.limit == 20)
        #expect(delivery.batch?.group.hasPrefix("fcm/add/") == true)
        #expect(alice[0].cleansUpReplaced)
        let cleanup = try #require(alice[0].cleanup.flatMap { backend.cleanupRequest(account: "alice", service: "fcm", stored: $0) })
        #expect(cleanup.purpose == .cleanup)
        #expect(cleanup.batch?.group.hasPrefix("fcm/remove/") == true)
        #expect((cleanup.payload as? FCMItem)?.token == "token-alice")
        #expect(backend.cleanupRequest(account: "alice", service: "fcm", stored: #"{"backend":"customer-insights-journeys"}"#) == nil)

        let bob = planner.plans(for: accounts[1], diagnostics: &diagnostics)
        #expect(bob.first?.delivery == nil)
        #expect(bob.first?.waiting == "no device token yet (deviceToken renders empty)")
    }
}
