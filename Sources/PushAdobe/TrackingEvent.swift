/// What happened to a push notification on the device, as Adobe Campaign tracks it (seed 001).
public enum TrackingEvent: String, CaseIterable, Sendable {
    /// The notification reached the device.
    case impression
    /// The user touched the notification.
    case click
    /// The user opened the app from the notification: a click, then an open.
    case open
    /// The user dismissed the notification: tracked as a click, as the SDK does.
    case dismiss

    /// The actions the Adobe SDK sends for the event, in the order it sends them.
    public var actions: [TrackingAction] {
        switch self {
        case .impression: [.impression]
        case .click, .dismiss: [.click]
        case .open: [.click, .open]
        }
    }

    /// `impression, click, open or dismiss`, for messages.
    public static let choices = "impression, click, open or dismiss"
}

/// One tracking request's `action` (seed 001): `7` impression, `2` click, `1` open.
public enum TrackingAction: String, Sendable, Hashable {
    case impression = "7"
    case click = "2"
    case open = "1"

    /// `action 2 (click)`.
    public var description: String {
        switch self {
        case .impression: "action 7 (impression)"
        case .click: "action 2 (click)"
        case .open: "action 1 (open)"
        }
    }
}
