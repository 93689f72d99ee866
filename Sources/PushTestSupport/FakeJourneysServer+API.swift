import Foundation
import PushListener

extension FakeJourneysServer {
    /// The fake's answer to each request: routing, the checks of the type's documentation, and
    /// recording what it accepts in the ledger. Runs on the connection threads.
    struct API: Sendable {
        let orgId: String
        let mobileAppId: String
        let apiToken: String
        let checksCredentials: Bool
        let recording: Bool
        let ledger: Ledger

        /// A refusal: the status and a line saying why.
        struct Refusal: Error {
            var status: Int
            var reason: String
        }

        /// The reply to `request`, or `nil` when its path is not a Journeys one.
        func reply(to request: Request, index: Int) -> Reply? {
            guard let route = Self.split(request.path) else { return nil }
            guard !checksCredentials || route.org == orgId else {
                return Self.refuse(Refusal(status: 404, reason: "no organization '\(route.org)' here"))
            }
            guard let endpoint = Endpoint(pathRest: route.rest) else {
                return Self.refuse(Refusal(status: 404, reason: "no endpoint '\(route.rest)' under pushdeviceregistration/"))
            }
            guard request.method == "POST" else {
                return .status(405, contentType: "text/plain; charset=utf-8", body: "only POST is allowed here\n",
                               headers: [("Allow", "POST")])
            }
            if let scripted = ledger.update({ $0.takeScript(for: endpoint) }) { return scripted }
            do throws(Refusal) {
                let mediaType = request.header("Content-Type")?.split(separator: ";").first?.trimmingSpaces().lowercased()
                guard mediaType == "application/json" else {
                    throw Refusal(status: 400, reason: "Content-Type must be application/json, not '\(request.header("Content-Type") ?? "")'")
                }
                let body = try Self.json(request.body)
                switch endpoint {
                case .register, .registerBatch:
                    return try register(body, batch: endpoint == .registerBatch, request: request, index: index)
                case .status:
                    return try status(body, index: index)
                case .cleanup, .cleanupBatch:
                    return try cleanup(body, batch: endpoint == .cleanupBatch, index: index)
                }
            } catch {
                return Self.refuse(error)
            }
        }

        /// The organization and the rest of a path `/api/v1.0/orgs/{org}/pushdeviceregistration[/rest]`.
        static func split(_ path: String) -> (org: Substring, rest: Substring)? {
            let prefix = "/api/v1.0/orgs/", area = "/pushdeviceregistration"
            guard path.hasPrefix(prefix) else { return nil }
            let afterPrefix = path.dropFirst(prefix.count)
            guard let slash = afterPrefix.firstIndex(of: "/"), slash != afterPrefix.startIndex else { return nil }
            let tail = afterPrefix[slash...]
            guard tail.hasPrefix(area) else { return nil }
            let rest = tail.dropFirst(area.count)
            guard rest.isEmpty || rest.first == "/" else { return nil }
            return (afterPrefix[..<slash], rest.dropFirst())
        }

        // MARK: Endpoints

        private func register(_ body: Body, batch: Bool, request: Request, index: Int) throws(Refusal) -> Reply {
            let objects = try body.objects(batch: batch, limit: FakeJourneysServer.batchLimit)
            let tracked = request.header("x-ms-track-registration")?.lowercased() == "true"
            let callbackHeaders = request.header("x-ms-callback-url-headers")
            if let callbackHeaders { try Self.checkStringMap(callbackHeaders) }
            var accepted: [Registration] = []
            for object in objects {
                let fields = try object.fields(required: ["MobileAppId", "UserId", "ApiToken"],
                                               optional: [Platform.ios.tokenKey, Platform.android.tokenKey])
                let platforms = [Platform.ios, .android].filter { fields[$0.tokenKey] != nil }
                guard platforms.count == 1, let platform = platforms.first, let token = fields[platform.tokenKey] else {
                    throw Refusal(status: 400, reason: "a registration needs exactly one of ApnsDeviceToken and FcmDeviceToken")
                }
                try checkCredentials(fields)
                accepted.append(Registration(
                    userId: fields["UserId"]!, deviceToken: token, platform: platform, mobileAppId: fields["MobileAppId"]!,
                    requestId: nil, batchSize: batch ? objects.count : nil, keyOrder: object.keys,
                    callbackURL: request.header("x-ms-callback-url"), statusCallbackURL: request.header("x-ms-status-callback-url"),
                    callbackHeaders: callbackHeaders, requestIndex: index))
            }
            let ids = try ledger.update { state throws(Refusal) in
                try Self.checkNotRejected(accepted.map(\.deviceToken), in: state)
                var ids: [String] = []
                for var registration in accepted {
                    if tracked {
                        let id = UUID().uuidString.lowercased()
                        registration.requestId = id
                        state.tokenById[id] = registration.deviceToken
                        ids.append(id)
                    }
                    if recording { state.registrations.append(registration) }
                    state.registrationCount += 1
                }
                return ids
            }
            guard tracked else { return .status(202) }
            let answers = ids.map { "{\"RegistrationRequestId\":\(Self.quoted($0))}" }
            return Self.jsonReply(202, batch ? "[" + answers.joined(separator: ",") + "]" : answers[0])
        }

        private func status(_ body: Body, index: Int) throws(Refusal) -> Reply {
            let object = try body.objects(batch: false, limit: 1)[0]
            let fields = try object.fields(required: ["MobileAppId", "ApiToken"], lists: ["RegistrationRequestIds"])
            let ids = object.values["RegistrationRequestIds"] as? [Any] ?? []
            let strings = ids.compactMap { $0 as? String }.filter { !$0.isEmpty }
            guard strings.count == ids.count, (1...FakeJourneysServer.batchLimit).contains(ids.count) else {
                throw Refusal(status: 400, reason: "RegistrationRequestIds must be 1 to \(FakeJourneysServer.batchLimit) non-empty strings")
            }
            try checkCredentials(fields)
            let answers = ledger.update { state in
                let answers = strings.map { state.status(of: $0) }
                if recording {
                    state.statusQueries.append(StatusQuery(requestIds: strings, mobileAppId: fields["MobileAppId"]!,
                                                           answers: answers, requestIndex: index))
                }
                state.statusQueryCount += 1
                return answers
            }
            let items = answers.map { answer in
                let reason = if case .failed(let failure) = answer { Self.quoted(failure.text) } else { "null" }
                return "{\"Status\":\(Self.quoted(answer.name)),\"FailureReason\":\(reason)}"
            }
            return Self.jsonReply(200, "[" + items.joined(separator: ",") + "]")
        }

        private func cleanup(_ body: Body, batch: Bool, index: Int) throws(Refusal) -> Reply {
            let objects = try body.objects(batch: batch, limit: nil)
            var accepted: [Cleanup] = []
            for object in objects {
                let fields = try object.fields(required: ["MobileAppId", "ApiToken", "UserId"], optional: ["DeviceToken"])
                try checkCredentials(fields)
                accepted.append(Cleanup(userId: fields["UserId"]!, deviceToken: fields["DeviceToken"], mobileAppId: fields["MobileAppId"]!,
                                        batchSize: batch ? objects.count : nil, keyOrder: object.keys, requestIndex: index))
            }
            try ledger.update { state throws(Refusal) in
                try Self.checkNotRejected(accepted.compactMap(\.deviceToken), in: state)
                if recording { state.cleanups += accepted }
                state.cleanupCount += accepted.count
            }
            return .status(202)
        }

        // MARK: Checks

        /// Refuses a wrong `ApiToken` with the scripted status, then a wrong `MobileAppId` with 400.
        private func checkCredentials(_ fields: [String: String]) throws(Refusal) {
            guard checksCredentials else { return }
            guard fields["ApiToken"] == apiToken else {
                throw Refusal(status: ledger.read(\.wrongApiTokenStatus), reason: "ApiToken is not valid")
            }
            guard fields["MobileAppId"] == mobileAppId else {
                throw Refusal(status: 400, reason: "no mobile app '\(fields["MobileAppId"] ?? "")'")
            }
        }

        private static func checkNotRejected(_ tokens: [String], in state: State) throws(Refusal) {
            if let token = tokens.first(where: state.rejectedTokens.contains) {
                throw Refusal(status: 400, reason: "device token '\(token)' is refused")
            }
        }

        /// Refuses `text` unless it is a JSON object whose values are all strings.
        private static func checkStringMap(_ text: String) throws(Refusal) {
            let value = try? JSONSerialization.jsonObject(with: Data(text.utf8))
            guard let map = value as? [String: Any], map.values.allSatisfy({ $0 is String }) else {
                throw Refusal(status: 400, reason: "x-ms-callback-url-headers must be a JSON object of strings")
            }
        }

        // MARK: JSON

        private static func json(_ bytes: [UInt8]) throws(Refusal) -> Body {
            guard let value = try? JSONSerialization.jsonObject(with: Data(bytes)) else {
                throw Refusal(status: 400, reason: "the body is not JSON")
            }
            return Body(value: value, keys: JSONObjectKeys.outermost(in: bytes))
        }

        /// `text` as a JSON string. Answers are written piece by piece to keep their keys in the
        /// seed's order, which JSONSerialization's dictionaries do not.
        private static func quoted(_ text: String) -> String {
            let data = try? JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes])
            return data.map { String(decoding: $0, as: UTF8.self) } ?? "null"
        }

        private static func jsonReply(_ status: Int, _ json: String) -> Reply {
            .status(status, contentType: "application/json; charset=utf-8", body: json)
        }

        private static func refuse(_ refusal: Refusal) -> Reply {
            .status(refusal.status, contentType: "text/plain; charset=utf-8", body: refusal.reason + "\n")
        }
    }

    /// A parsed body and the key order of its outermost objects.
    struct Body {
        var value: Any
        /// See `JSONObjectKeys.outermost(in:)`.
        var keys: [[String]]

        /// The body's objects: the body itself, or for a batch the array's elements (1 to `limit`).
        func objects(batch: Bool, limit: Int?) throws(API.Refusal) -> [JSONObject] {
            let values: [Any]
            if batch {
                guard let array = value as? [Any], !array.isEmpty, array.count <= limit ?? .max else {
                    let most = limit.map { "1 to \($0)" } ?? "at least 1"
                    throw API.Refusal(status: 400, reason: "a batch must be a JSON array of \(most) objects")
                }
                values = array
            } else {
                values = [value]
            }
            let objects = values.compactMap { $0 as? [String: Any] }
            guard objects.count == values.count, objects.count == keys.count else {
                throw API.Refusal(status: 400, reason: batch ? "every element of the batch must be a JSON object"
                                                             : "the body must be a JSON object")
            }
            return zip(objects, keys).map { JSONObject(values: $0, keys: $1) }
        }
    }

    /// One JSON object with its keys in the order received.
    struct JSONObject {
        var values: [String: Any]
        var keys: [String]

        /// The string values of `required` and of the `optional` keys present; refuses a missing,
        /// unknown or repeated key, and a value of `required` or `optional` that is not a non-empty
        /// string. Keys in `lists` must be there but are not returned.
        func fields(required: [String], optional: [String] = [], lists: [String] = []) throws(API.Refusal) -> [String: String] {
            if let repeated = keys.enumerated().first(where: { keys[..<$0.offset].contains($0.element) })?.element {
                throw API.Refusal(status: 400, reason: "key '\(repeated)' appears twice")
            }
            if let unknown = keys.first(where: { !(required + optional + lists).contains($0) }) {
                throw API.Refusal(status: 400, reason: "unknown key '\(unknown)'")
            }
            if let missing = (required + lists).first(where: { !keys.contains($0) }) {
                throw API.Refusal(status: 400, reason: "missing key '\(missing)'")
            }
            var fields: [String: String] = [:]
            for key in required + optional where keys.contains(key) {
                guard let text = values[key] as? String, !text.isEmpty else {
                    throw API.Refusal(status: 400, reason: "'\(key)' must be a non-empty string")
                }
                fields[key] = text
            }
            return fields
        }
    }
}
