/// Google's end of device group messaging (SPEC §10), in one place: `validate` and `run` warn
/// with it on every `fcm-device-group` service.
///
/// Source: Firebase's device-group page
/// (<https://firebase.google.com/docs/cloud-messaging/android/device-group>): "New projects cannot
/// onboard device groups after December 1, 2026" and device groups "will be removed on September 29,
/// 2027". The legacy HTTP API (and with it the server keys of `serverKey`) was shut down from July 2024.
public enum DeviceGroupDeprecation {
    /// The last day a new Firebase project may start using device groups.
    public static let lastOnboarding = "2026-12-01"
    /// The day Google removes device groups.
    public static let removal = "2027-09-29"
    /// Where Google says so.
    public static let source = "https://firebase.google.com/docs/cloud-messaging/android/device-group"

    /// The warning every `fcm-device-group` service gets.
    public static let warning = "Google deprecates Firebase device group messaging: new projects cannot onboard device groups after "
        + "\(lastOnboarding), and device groups will be removed on \(removal) (\(source))"

    /// The warning a service with the legacy `serverKey` gets.
    public static let legacyKeyWarning = "Google has shut the legacy FCM server keys down (from July 2024, \(source)), "
        + "so FCM is likely to refuse serverKey: use serviceAccount (OAuth 2)"
}
