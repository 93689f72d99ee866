import _CryptoExtras
import Crypto
import Foundation

extension FakeFCMServer {
    /// One device group.
    struct Group {
        var members: [String]
        /// Every key the group was given: at creation, and by each retrieval.
        var keys: [String]
    }

    /// Everything the fake remembers and is scripted with.
    struct State {
        var groups: [String: Group] = [:]
        var invalidIds: Set<String> = []
        var validAccessTokens: Set<String> = []
        var issuedCount = 0
        var keyCount = 0
        var scripts = ReplyScripts<Endpoint>()
        var operations: [Operation] = []
        var tokenRequests: [TokenRequest] = []
        var operationCount = 0
        var tokenRequestCount = 0

        /// A new key: `APA91b`, as FCM's start, then 60 hex digits that differ from every other key's.
        mutating func newKey(for name: String) -> String {
            keyCount += 1
            let digest = SHA256.hash(data: Array("\(name)\u{0}\(keyCount)".utf8))
            let key = "APA91b" + digest.map { String(format: "%02x", $0) }.joined().prefix(60)
            groups[name]?.keys.append(key)
            return key
        }

        mutating func createGroup(_ name: String, members: [String]) -> String {
            groups[name] = Group(members: [], keys: [])
            for member in members where !(groups[name]?.members.contains(member) ?? true) { groups[name]?.members.append(member) }
            return newKey(for: name)
        }

        /// The group `name` if `key` is one it was given.
        func group(_ name: String, key: String) -> Group? {
            guard let group = groups[name], group.keys.contains(key) else { return nil }
            return group
        }
    }

    typealias Ledger = WaitableState<State>

    /// The fake's answers: routing, the checks, and recording. Runs on the connection threads.
    struct API: Sendable {
        let projectId: String
        let clientEmail: String
        let publicKey: _RSA.Signing.PublicKey?
        let serverKey: String?
        let accessTokenPrefix: String
        let accessTokenLifetime: Int
        let checksCredentials: Bool
        let recording: Bool
        let ledger: Ledger
        let tokenURL: @Sendable () -> String

        /// A 400 with FCM's `{"error":…}`, or a 401, in this fake's words.
        struct Refusal: Error {
            var status: Int
            var error: String
        }

        func reply(to request: Request, index: Int) -> Reply? {
            switch request.path {
            case FakeFCMServer.notificationPath:
                guard request.method == "POST" || request.method == "GET" else {
                    return .status(405, contentType: "text/plain; charset=utf-8", body: "only GET and POST are allowed here\n",
                                   headers: [("Allow", "GET, POST")])
                }
                if let scripted = ledger.update({ $0.scripts.take(for: .notification) }) { return scripted }
                return deviceGroup(request, index: index)
            case FakeFCMServer.tokenPath:
                guard request.method == "POST" else {
                    return .status(405, contentType: "text/plain; charset=utf-8", body: "only POST is allowed here\n", headers: [("Allow", "POST")])
                }
                if let scripted = ledger.update({ $0.scripts.take(for: .token) }) { return scripted }
                return token(request, index: index)
            default:
                return nil
            }
        }

        // MARK: Device groups

        private func deviceGroup(_ request: Request, index: Int) -> Reply {
            var operation = Operation(operation: request.method == "GET" ? "retrieve" : "", group: "", key: nil, registrationIds: [],
                                      status: 200, error: nil, authorization: request.header("Authorization"),
                                      accessTokenAuth: request.header("access_token_auth"), projectIdHeader: request.header("project_id"),
                                      keyOrder: [], requestIndex: index)
            let reply: Reply
            do throws(Refusal) {
                try checkCredentials(request)
                let key: String
                if request.method == "GET" {
                    operation.group = try Self.nameFromQuery(request.query)
                    key = try ledger.update { state throws(Refusal) in
                        guard state.groups[operation.group] != nil else { throw Refusal(status: 400, error: "notification_key not found") }
                        return state.newKey(for: operation.group)
                    }
                } else {
                    try readBody(request, into: &operation)
                    key = try ledger.update { state throws(Refusal) in try apply(operation, to: &state) }
                }
                reply = Self.json(200, ["notification_key": key])
            } catch {
                operation.status = error.status
                operation.error = error.error
                reply = Self.json(error.status, ["error": error.error])
            }
            ledger.update { state in
                if recording { state.operations.append(operation) }
                state.operationCount += 1
            }
            return reply
        }

        private func checkCredentials(_ request: Request) throws(Refusal) {
            guard checksCredentials else { return }
            guard request.header("project_id") == projectId else {
                throw Refusal(status: 401, error: "project_id is not \(projectId)")
            }
            let authorization = request.header("Authorization") ?? ""
            if authorization.hasPrefix("Bearer ") {
                let token = String(authorization.dropFirst("Bearer ".count))
                guard request.header("access_token_auth")?.lowercased() == "true" else {
                    throw Refusal(status: 401, error: "a Bearer token needs access_token_auth: true")
                }
                guard ledger.read({ $0.validAccessTokens.contains(token) }) else {
                    throw Refusal(status: 401, error: "the access token is not valid")
                }
            } else if authorization.hasPrefix("key=") {
                guard let serverKey, authorization == "key=" + serverKey else { throw Refusal(status: 401, error: "the server key is not valid") }
            } else {
                throw Refusal(status: 401, error: "no Authorization")
            }
        }

        private static func nameFromQuery(_ query: String?) throws(Refusal) -> String {
            let pairs = (query ?? "").split(separator: "&").map { $0.split(separator: "=", maxSplits: 1).map(String.init) }
            guard pairs.count == 1, pairs[0].count == 2, pairs[0][0] == "notification_key_name",
                  let name = pairs[0][1].removingPercentEncoding, !name.isEmpty else {
                throw Refusal(status: 400, error: "a retrieval takes one notification_key_name")
            }
            return name
        }

        /// Reads a create, add or remove body into `operation`.
        private func readBody(_ request: Request, into operation: inout Operation) throws(Refusal) {
            let mediaType = request.header("Content-Type")?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
            guard mediaType == "application/json" else { throw Refusal(status: 400, error: "Content-Type must be application/json") }
            guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
                throw Refusal(status: 400, error: "the body is not a JSON object")
            }
            operation.keyOrder = JSONObjectKeys.outermost(in: request.body).first ?? []
            operation.operation = object["operation"] as? String ?? ""
            let keys: [String] = switch operation.operation {
            case "create": ["operation", "notification_key_name", "registration_ids"]
            case "add", "remove": ["operation", "notification_key_name", "notification_key", "registration_ids"]
            default: throw Refusal(status: 400, error: "operation must be create, add or remove")
            }
            guard Set(operation.keyOrder) == Set(keys), operation.keyOrder.count == keys.count else {
                throw Refusal(status: 400, error: "\(operation.operation) takes exactly \(keys.joined(separator: ", "))")
            }
            guard let name = object["notification_key_name"] as? String, !name.isEmpty,
                  let ids = object["registration_ids"] as? [Any], !ids.isEmpty, ids.allSatisfy({ $0 is String }) else {
                throw Refusal(status: 400, error: "notification_key_name and registration_ids must be a name and a non-empty list of strings")
            }
            operation.group = name
            operation.registrationIds = ids.compactMap { $0 as? String }
            if keys.contains("notification_key") {
                guard let key = object["notification_key"] as? String, !key.isEmpty else {
                    throw Refusal(status: 400, error: "notification_key must be a non-empty string")
                }
                operation.key = key
            }
        }

        /// Changes the groups as `operation` asks; the key answered.
        private func apply(_ operation: Operation, to state: inout State) throws(Refusal) -> String {
            let valid = operation.registrationIds.filter { !state.invalidIds.contains($0) }
            let name = operation.group
            switch operation.operation {
            case "create":
                guard state.groups[name] == nil else { throw Refusal(status: 400, error: "notification_key already exists") }
                guard !valid.isEmpty else { throw Refusal(status: 400, error: "no valid registration ids") }
                guard Set(valid).count <= FakeFCMServer.memberLimit else { throw Refusal(status: 400, error: "too many registration ids") }
                return state.createGroup(name, members: valid)
            default:
                guard let key = operation.key, var group = state.group(name, key: key) else {
                    throw Refusal(status: 400, error: "notification_key not found")
                }
                guard !valid.isEmpty else { throw Refusal(status: 400, error: "no valid registration ids") }
                if operation.operation == "add" {
                    for id in valid where !group.members.contains(id) { group.members.append(id) }
                    guard group.members.count <= FakeFCMServer.memberLimit else { throw Refusal(status: 400, error: "too many registration ids") }
                    state.groups[name] = group
                } else {
                    group.members.removeAll { valid.contains($0) }
                    // FCM deletes a group whose last member leaves.
                    state.groups[name] = group.members.isEmpty ? nil : group
                }
                return key
            }
        }

        // MARK: Tokens

        private func token(_ request: Request, index: Int) -> Reply {
            let form = Self.form(request.bodyText)
            var record = TokenRequest(assertion: form["assertion"] ?? "", grantType: form["grant_type"], issued: nil, refusal: nil,
                                      requestIndex: index)
            let reply: Reply
            if let refusal = checkTokenRequest(request, form: form) {
                record.refusal = refusal
                reply = Self.json(400, ["error": "invalid_grant", "error_description": refusal])
            } else {
                let token = ledger.update { state in
                    state.issuedCount += 1
                    let token = accessTokenPrefix + String(state.issuedCount)
                    state.validAccessTokens.insert(token)
                    return token
                }
                record.issued = token
                reply = .status(200, contentType: "application/json; charset=utf-8",
                                body: #"{"access_token":"\#(token)","expires_in":\#(accessTokenLifetime),"token_type":"Bearer"}"#)
            }
            ledger.update { state in
                if recording { state.tokenRequests.append(record) }
                state.tokenRequestCount += 1
            }
            return reply
        }

        /// Why the token request is refused, or nil.
        private func checkTokenRequest(_ request: Request, form: [String: String]) -> String? {
            let mediaType = request.header("Content-Type")?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
            guard mediaType == "application/x-www-form-urlencoded" else { return "Content-Type must be application/x-www-form-urlencoded" }
            guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else { return "grant_type must be jwt-bearer" }
            guard let assertion = form["assertion"], let jwt = JWT(assertion) else { return "the assertion is not a JWT" }
            guard checksCredentials else { return nil }
            guard jwt.header["alg"] as? String == "RS256" else { return "alg must be RS256" }
            guard let publicKey,
                  publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: jwt.signature),
                                             for: SHA256.hash(data: Array(jwt.signedPart.utf8)), padding: .insecurePKCS1v1_5) else {
                return "Invalid JWT Signature."
            }
            guard jwt.claims["iss"] as? String == clientEmail else { return "iss is not \(clientEmail)" }
            guard jwt.claims["scope"] as? String == FakeFCMServer.scope else { return "scope is not \(FakeFCMServer.scope)" }
            guard jwt.claims["aud"] as? String == tokenURL() else { return "aud is not \(tokenURL())" }
            guard let iat = (jwt.claims["iat"] as? NSNumber)?.int64Value, let exp = (jwt.claims["exp"] as? NSNumber)?.int64Value else {
                return "iat and exp must be numbers"
            }
            let now = Int64(Date().timeIntervalSince1970)
            guard abs(iat - now) <= 300 else { return "iat is not now" }
            guard exp > now, exp - iat <= 3600 else { return "exp must be within an hour of iat, and not past" }
            return nil
        }

        private static func form(_ text: String) -> [String: String] {
            var fields: [String: String] = [:]
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                }
                if parts.count == 2 { fields[parts[0]] = parts[1] }
            }
            return fields
        }

        private static func json(_ status: Int, _ object: [String: String]) -> Reply {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return .respond(status: status, headers: [("Content-Type", "application/json; charset=UTF-8")], body: Array(data))
        }
    }
}
