extension FakeJourneysServer {
    /// The platform of a registration, told by which device-token key its object has.
    public enum Platform: String, Sendable, Hashable {
        /// `ApnsDeviceToken`.
        case ios
        /// `FcmDeviceToken`.
        case android

        /// The body key that carries this platform's device token.
        public var tokenKey: String {
            switch self {
            case .ios: "ApnsDeviceToken"
            case .android: "FcmDeviceToken"
            }
        }
    }

    /// One of the five endpoints under `/api/v1.0/orgs/{orgId}/pushdeviceregistration/`; the raw
    /// value is the rest of the path, as the seed writes it.
    public enum Endpoint: String, Sendable, Hashable, CaseIterable {
        /// `devices`: one registration object.
        case register = "devices"
        /// `devices/batch`: an array of 1 to 100 registration objects.
        case registerBatch = "devices/batch"
        /// `devices/status/` (also served without the trailing slash).
        case status = "devices/status/"
        /// `devices/cleanup`: one cleanup object.
        case cleanup = "devices/cleanup"
        /// `devices/cleanup/batch`: an array of cleanup objects.
        case cleanupBatch = "devices/cleanup/batch"

        /// The endpoint a path below `pushdeviceregistration/` names, or `nil`.
        init?(pathRest rest: Substring) {
            if rest == "devices/status" {
                self = .status
            } else {
                self.init(rawValue: String(rest))
            }
        }
    }

    /// A `FailureReason` exactly as a status answer writes it.
    ///
    /// The seed prints the reasons with spaces around them (`" DuplicateExists|…|ApiTokenNotValid "`),
    /// so the named ones carry a space on each side and a client must trim. `init(_:)` writes any
    /// other text, e.g. a reason this client does not know.
    public struct FailureReason: Sendable, Hashable, CustomStringConvertible {
        /// The text sent, spaces included.
        public var text: String

        /// A reason sent as `text`, byte for byte.
        public init(_ text: String) {
            self.text = text
        }

        /// `" DuplicateExists "`: the device is already registered.
        public static let duplicateExists = FailureReason(" DuplicateExists ")
        /// `" DryRunSendingFailed "`: the invisible test notification to the device failed.
        public static let dryRunSendingFailed = FailureReason(" DryRunSendingFailed ")
        /// `" DeviceTokenTooLong "`.
        public static let deviceTokenTooLong = FailureReason(" DeviceTokenTooLong ")
        /// `" FailedToStoreDevice "`: a failure on the service's side.
        public static let failedToStoreDevice = FailureReason(" FailedToStoreDevice ")
        /// `" ApiTokenNotValid "`.
        public static let apiTokenNotValid = FailureReason(" ApiTokenNotValid ")

        /// The text, spaces included.
        public var description: String { text }
    }

    /// What a status query answers for one registration request id.
    public enum RegistrationStatus: Sendable, Hashable {
        /// `{"Status":"Success","FailureReason":null}`.
        case success
        /// `{"Status":"Pending","FailureReason":null}`.
        case pending
        /// `{"Status":"Failed","FailureReason":"<reason.text>"}`.
        case failed(FailureReason)

        /// The `Status` value: `Success`, `Pending` or `Failed`.
        public var name: String {
            switch self {
            case .success: "Success"
            case .pending: "Pending"
            case .failed: "Failed"
            }
        }
    }

    /// One registration object the fake accepted (answered 202).
    public struct Registration: Sendable, Hashable {
        /// `UserId`.
        public var userId: String
        /// The value of `ApnsDeviceToken` or `FcmDeviceToken`.
        public var deviceToken: String
        /// Which of the two keys carried it.
        public var platform: Platform
        /// `MobileAppId`.
        public var mobileAppId: String
        /// The `RegistrationRequestId` answered for it; `nil` when the request did not have
        /// `x-ms-track-registration: true` (then nothing was answered and its status stays unknown).
        public var requestId: String?
        /// The number of objects in its request when it came to `devices/batch`; `nil` when it came
        /// alone to `devices`.
        public var batchSize: Int?
        /// The object's keys in the order received, e.g. `["MobileAppId", "UserId", "ApiToken", "ApnsDeviceToken"]`.
        public var keyOrder: [String]
        /// The request's `x-ms-callback-url`, if it had one.
        public var callbackURL: String?
        /// The request's `x-ms-status-callback-url`, if it had one.
        public var statusCallbackURL: String?
        /// The request's `x-ms-callback-url-headers` as received (a JSON object of strings), if it had one.
        public var callbackHeaders: String?
        /// The index of its HTTP request among all the server received (see `requests`); registrations
        /// of one batch share it.
        public var requestIndex: Int
    }

    /// One cleanup object the fake accepted (answered 202).
    public struct Cleanup: Sendable, Hashable {
        /// `UserId`.
        public var userId: String
        /// `DeviceToken`, which the seed calls optional; `nil` when the object had none.
        public var deviceToken: String?
        /// `MobileAppId`.
        public var mobileAppId: String
        /// The number of objects in its request when it came to `devices/cleanup/batch`; `nil`
        /// when it came alone to `devices/cleanup`.
        public var batchSize: Int?
        /// The object's keys in the order received.
        public var keyOrder: [String]
        /// The index of its HTTP request among all the server received.
        public var requestIndex: Int
    }

    /// One status query the fake answered (200).
    public struct StatusQuery: Sendable, Hashable {
        /// `RegistrationRequestIds`, in the order asked.
        public var requestIds: [String]
        /// `MobileAppId`.
        public var mobileAppId: String
        /// What was answered for each id, in the same order.
        public var answers: [RegistrationStatus]
        /// The index of its HTTP request among all the server received.
        public var requestIndex: Int
    }
}
