import PushConfig

/// The headers that authorise a device-group request (SPEC §9.3, Firebase's device-group page):
/// `Authorization: Bearer …` with `access_token_auth: true` for a service account, or the legacy
/// `Authorization: key=…`; `project_id` with either.
enum FCMAuthorization {
    /// The shell variable `preview --format curl` names the access token with.
    static let accessTokenVariable = "FCM_ACCESS_TOKEN"

    /// The headers of a request sent with `credential` and, for a service account, `accessToken`.
    static func headers(_ credential: FCMCredential, accessToken: String?, projectId: String) -> [(name: String, value: String)] {
        switch credential {
        case .serviceAccount:
            [("Authorization", "Bearer " + (accessToken ?? "")), ("access_token_auth", "true"), ("project_id", projectId)]
        case .serverKey(let key):
            [("Authorization", "key=" + key), ("project_id", projectId)]
        }
    }

    /// The headers `preview` shows for `settings`: the server key as `display` shows a secret; the
    /// access token, which only a token endpoint gives, as `********`, `<access token>` with
    /// `--show-secrets`, or `"$FCM_ACCESS_TOKEN"` in curl.
    static func previewHeaders(_ settings: FCMSettings, display: SecretDisplay) -> [(name: String, value: String)] {
        switch settings.credential {
        case .serviceAccount:
            let token = switch display {
            case .asSent: "<access token>"
            case .stars: "********"
            case .shellVariables: AccountTemplates.secretMarker(accessTokenVariable)
            }
            return headers(settings.credential, accessToken: token, projectId: settings.projectId)
        case .serverKey:
            let key = settings.credentialValue.displayed(display, key: "serverKey", maySendSecrets: true)
            return headers(.serverKey(key), accessToken: nil, projectId: settings.projectId)
        }
    }
}
