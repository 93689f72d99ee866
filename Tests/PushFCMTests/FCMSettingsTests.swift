import PushBackend
import PushConfig
@testable import PushFCM
import Testing
import PushTestThreads

/// `validate` on `fcm-device-group` services and the accounts naming them (SPEC §9.3, §9.0):
/// every problem at its file, line and column, with a did-you-mean where one helps.
@Suite(.blockingThreads) struct FCMSettingsTests {
    static let accounts = """
        accounts:
          - username: alice
            pushTokenOther: token-a
            services: {fcm: {}}

        """

    @Test func aCompleteServiceWarnsOnlyOfGooglesDeprecation() {
        let loaded = LoadedFCM("""
            services:
              fcm:
                type: fcm-device-group
                projectId: p-1
                serviceAccount: !file sa.json
            \(Self.accounts)
            """)
        #expect(loaded.lines == ["config.yaml:3:5: warning: \(DeviceGroupDeprecation.warning)"])
        #expect(DeviceGroupDeprecation.warning.contains("after 2026-12-01, and device groups will be removed on 2027-09-29"))
    }

    @Test func unknownMissingAndConflictingSettingsAreErrorsAtTheirKeys() {
        let loaded = LoadedFCM("""
            services:
              fcm:
                type: fcm-device-group
                endpoint: http://fcm.example.com/fcm/notification
                projectID: p-1
                serviceAccount: !file sa.json
                serverKey: k
              bare:
                type: fcm-device-group
            accounts:
              - username: alice
                pushTokenOther: token-a
                services: {fcm: {gruop: family}, bare: {}}

            """)
        #expect(loaded.problems == [
            "config.yaml:2:3: error: service 'fcm' needs 'projectId' (fcm-device-group: projectId, and serviceAccount or serverKey)",
            "config.yaml:4:15: error: service 'fcm': endpoint must be https (plain http only to a loopback address), not 'http://fcm.example.com/fcm/notification'",
            "config.yaml:5:5: error: service 'fcm': unknown setting 'projectID' of a fcm-device-group service; did you mean 'projectId'?",
            "config.yaml:7:16: error: service 'fcm': give serviceAccount or serverKey, not both",
            "config.yaml:8:3: error: service 'bare' needs 'projectId' (fcm-device-group: projectId, and serviceAccount or serverKey)",
            "config.yaml:8:3: error: service 'bare' needs a credential: serviceAccount (a Google service-account JSON key) or the legacy serverKey",
            // The accounts of a service with bad settings are still checked: every problem at once.
            "config.yaml:13:22: error: unknown key 'gruop' for the service 'fcm' (fcm-device-group takes group, deviceToken); did you mean 'group'? [account alice]",
        ])
    }

    @Test func aServiceAccountKeyIsCheckedWithoutBeingShown() {
        let loaded = LoadedFCM("""
            services:
              notJSON: {type: fcm-device-group, projectId: p, serviceAccount: "-----BEGIN PRIVATE KEY----- abc"}
              noEmail: {type: fcm-device-group, projectId: p, serviceAccount: '{"private_key": "x", "token_uri": "https://o.example/t"}'}
              badKey: {type: fcm-device-group, projectId: p, serviceAccount: '{"client_email": "a@b", "private_key": "secret-ish", "token_uri": "https://o.example/t"}'}
              plainToken: {type: fcm-device-group, projectId: p, serviceAccount: !file sa.json}
              fixed: {type: fcm-device-group, projectId: p, serviceAccount: !file sa.json, tokenUri: "http://127.0.0.1:9/token"}
            accounts:
              - username: alice
                pushTokenOther: token-a
                services: {notJSON: {}, noEmail: {}, badKey: {}, plainToken: {}, fixed: {}}

            """, tokenURI: "http://oauth.example.com/token")
        #expect(loaded.problems == [
            "config.yaml:2:67: error: service 'notJSON': serviceAccount is not a service-account JSON key (it does not parse as a JSON object of strings)",
            "config.yaml:3:67: error: service 'noEmail': serviceAccount has no client_email",
            "config.yaml:4:66: error: service 'badKey': serviceAccount has a private_key that is not an RSA private key of 2048 bits or more in PEM",
            "config.yaml:5:76: error: service 'plainToken': the service account's token_uri must be https (plain http only to a loopback address) (tokenUri overrides it)",
        ])
        #expect(!loaded.lines.joined().contains("secret-ish"))
    }

    @Test func theLegacyServerKeyWarnsThatGoogleShutItDown() {
        let loaded = LoadedFCM("""
            services:
              fcm:
                type: fcm-device-group
                projectId: p-1
                serverKey: !env FCM_KEY
                tokenUri: https://oauth2.googleapis.com/token
            \(Self.accounts)
            """, environment: ["FCM_KEY": "legacy-key"])
        #expect(loaded.problems == [
            "config.yaml:5:21: warning: service 'fcm': \(DeviceGroupDeprecation.legacyKeyWarning)",
            "config.yaml:6:15: warning: service 'fcm': tokenUri is used only with serviceAccount, so it is not used",
        ])
    }

    @Test func perAccountKeysGroupsAndTokensAreChecked() {
        let loaded = LoadedFCM("""
            services:
              fcm: {type: fcm-device-group, projectId: p-1, serviceAccount: !file sa.json}
            accounts:
              - username: alice
                pushTokenOther: token-a
                services: {fcm: {gruop: family}}
              - id: nameless
                pushTokenOther: token-b
                services: {fcm: {}}
              - username: carol
                pushTokenOther: token-c
                services: {fcm: {group: "%account[teem]%"}}
              - username: dave
                secretTeam: hidden
                pushTokenOther: token-d
                services: {fcm: {group: "team-%account[secretTeam]%"}}
              - username: erin
                services: {fcm: {}}

            """)
        #expect(loaded.problems == [
            "config.yaml:6:22: error: unknown key 'gruop' for the service 'fcm' (fcm-device-group takes group, deviceToken); did you mean 'group'? [account alice]",
            "config.yaml:9:16: warning: the account has no key 'username', so %account[username]% renders empty [account nameless]",
            "config.yaml:9:16: error: group renders empty for this account (the default is %account[username]%) [account nameless]",
            "config.yaml:12:30: error: no account has a key 'teem'",
            "config.yaml:16:29: error: group renders from a secret; a group's name is kept in the state and shown by status, so it cannot be one [account dave]",
        ])
    }
}
