import FoundationEssentials
import PushBackend
import PushConfig
import PushScheduler
import PushTemplates
import PushTransport

/// One batch of changes to one device group, sent and judged (SPEC §9.3, SPEC §10's errors):
/// create the group, or retrieve its key when FCM says it exists, add tokens, remove tokens,
/// and create it again when FCM no longer finds it.
struct FCMSender {
    let target: FCMTarget
    /// The `notification_key_name`.
    let group: String
    let memory: FCMMemory
    let transport: any HTTPTransport
    let timeout: Duration
    let wallClock: @Sendable () -> Int64

    var id: GroupID { target.group(group) }

    /// What FCM answered a device-group request.
    enum Answer {
        /// 200 with the group's `notification_key`.
        case key(String)
        /// 400 `notification_key already exists`.
        case alreadyExists
        /// 400 `notification_key not found`.
        case notFound
        /// 400 `no valid registration ids`.
        case noValidIDs
        /// Anything else: what it means for the request (a retry, a stopped service).
        case outcome(Outcome)
    }

    // MARK: Adding

    /// Adds `tokens` (distinct) to the group, creating it when its key is unknown (`withOthers`:
    /// with every other member the configuration wants in it): one outcome per token, in order.
    func add(_ tokens: [String], withOthers: Bool = true) async -> [Outcome] {
        var key = memory.key(id)
        var created = false
        var withOthers = withOthers
        while true {
            if let known = key {
                switch await post("add", key: known, tokens: tokens) {
                case .key(let answer):
                    return delivered(tokens, key: answer)
                case .notFound:
                    // FCM lost the group (emptied, or expired): it is created again.
                    memory.forgetKey(id)
                    guard !created else { return tokens.map { _ in retry("FCM did not find the device group it had just given a key for") } }
                    key = nil
                case .noValidIDs:
                    return await invalid(tokens)
                case .alreadyExists:
                    return tokens.map { _ in retry("FCM answered 'notification_key already exists' to an add") }
                case .outcome(let outcome):
                    return tokens.map { _ in outcome }
                }
            } else {
                guard !created else { return tokens.map { _ in retry("FCM did not find the device group it said exists") } }
                created = true
                // A group made (again) gets every member the configuration wants in it, not only
                // the ones due now.
                let others = withOthers ? memory.wanted(id).filter { !tokens.contains($0) } : []
                let members = Array((tokens + others).prefix(max(tokens.count, FCMPlanner.memberLimit)))
                switch await post("create", key: nil, tokens: members) {
                case .key(let answer):
                    return delivered(tokens, key: answer)
                case .alreadyExists:
                    switch await retrieve() {
                    case .key(let answer):
                        memory.setKey(answer, for: id)
                        key = answer
                    case .notFound:
                        return tokens.map { _ in retry("FCM said the device group exists, then did not find its key") }
                    case .outcome(let outcome):
                        return tokens.map { _ in outcome }
                    case .alreadyExists, .noValidIDs:
                        return tokens.map { _ in retry("FCM answered the retrieval of a key with an error") }
                    }
                case .noValidIDs where members.count > tokens.count:
                    // None valid among all: try the tokens due now alone.
                    withOthers = false
                    created = false
                case .noValidIDs:
                    return await invalid(tokens)
                case .notFound:
                    return tokens.map { _ in retry("FCM answered 'notification_key not found' to a create") }
                case .outcome(let outcome):
                    return tokens.map { _ in outcome }
                }
            }
        }
    }

    /// `tokens` of which FCM says none is valid: one alone is rejected; several are split in
    /// halves, each added again, until the bad ones stand alone.
    private func invalid(_ tokens: [String]) async -> [Outcome] {
        guard tokens.count > 1 else {
            return [.rejected("FCM: no valid registration ids (it does not accept this device token)")]
        }
        let middle = tokens.count / 2
        return await add(Array(tokens[..<middle]), withOthers: false) + add(Array(tokens[middle...]), withOthers: false)
    }

    private func delivered(_ tokens: [String], key: String) -> [Outcome] {
        memory.setKey(key, for: id)
        let kept = KeptGroup(id, key: key).text
        return tokens.map { _ in .deliveredKeeping(kept) }
    }

    // MARK: Removing

    /// Removes `tokens` (distinct) from the group: one outcome per token, in order. A token
    /// another account of the group still has is left (nothing to remove); a group FCM does not
    /// know has nothing to remove either, and one it lost is created again with the members
    /// still wanted.
    func remove(_ tokens: [String]) async -> [Outcome] {
        let wanted = Set(memory.wanted(id))
        let gone = tokens.filter { !wanted.contains($0) }
        guard !gone.isEmpty else { return tokens.map { _ in .delivered } }
        let outcome = await removeAll(gone)
        return tokens.map { wanted.contains($0) ? .delivered : outcome }
    }

    private func removeAll(_ tokens: [String]) async -> Outcome {
        var key = memory.key(id)
        if key == nil {
            switch await retrieve() {
            case .key(let answer):
                memory.setKey(answer, for: id)
                key = answer
            case .notFound:
                return .delivered
            case .outcome(let outcome):
                return outcome
            case .alreadyExists, .noValidIDs:
                return retry("FCM answered the retrieval of a key with an error")
            }
        }
        switch await post("remove", key: key ?? "", tokens: tokens) {
        case .key:
            return .delivered
        case .noValidIDs:
            // FCM knows none of them: none is a member.
            return .delivered
        case .notFound:
            memory.forgetKey(id)
            let members = memory.wanted(id)
            guard !members.isEmpty else { return .delivered }
            let outcomes = await add(members)
            return outcomes.first { if case .retry = $0 { true } else if case .stopped = $0 { true } else { false } } ?? .delivered
        case .alreadyExists:
            return retry("FCM answered 'notification_key already exists' to a remove")
        case .outcome(let outcome):
            return outcome
        }
    }

    // MARK: Requests

    /// `POST {endpoint}` with `{"operation","notification_key_name"[,"notification_key"],"registration_ids"}`.
    private func post(_ operation: String, key: String?, tokens: [String]) async -> Answer {
        var fields = [("operation", JSONText.string(operation)), ("notification_key_name", JSONText.string(group))]
        if let key { fields.append(("notification_key", JSONText.string(key))) }
        fields.append(("registration_ids", "[" + tokens.map { JSONText.string($0) }.joined(separator: ",") + "]"))
        return await call("POST", url: target.endpoint, body: JSONText.compactObject(fields))
    }

    /// `GET {endpoint}?notification_key_name=…`: the group's key.
    private func retrieve() async -> Answer {
        await call("GET", url: target.endpoint + "?notification_key_name=" + TextEncoding.queryValue(group), body: nil)
    }

    /// Sends one request with the service's credentials. A service account's access token
    /// refused (401, 403) is fetched anew once and the request sent again; refused again, or a
    /// server key refused, the service stops.
    private func call(_ method: String, url: String, body: String?) async -> Answer {
        var refreshed = false
        while true {
            var accessToken: String?
            if case .serviceAccount(let key) = target.credential {
                switch await token(for: key) {
                case .token(let token): accessToken = token.value
                case .failed(let outcome): return .outcome(outcome)
                }
            }
            var headers: [(name: String, value: String)] = [("User-Agent", PushReporterVersion.userAgent)]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            headers += FCMAuthorization.headers(target.credential, accessToken: accessToken, projectId: target.projectId)
            var request = TransportRequest(method: method, url: url, headers: headers, body: body.map { Array($0.utf8) },
                                           timeout: timeout)
            request.secretHeaders = ["authorization"]
            let response: TransportResponse
            do {
                response = try await transport.send(request)
            } catch {
                return .outcome(ReceiverAnswer.outcome(of: error))
            }
            if response.status == 401 || response.status == 403 {
                if case .serviceAccount(let key) = target.credential, let accessToken, !refreshed {
                    memory.forgetAccessToken(key.tokenCacheKey, ifItIs: accessToken)
                    refreshed = true
                    continue
                }
                let refused = refreshed ? "a freshly fetched access token too" : "the server key"
                return .outcome(.stopped("HTTP \(response.status): FCM refused \(refused)"))
            }
            return judge(response, secrets: target.credential.secrets + [accessToken].compactMap { $0 })
        }
    }

    /// The service account's access token: the one kept, or a new one from its token endpoint.
    private func token(for key: ServiceAccountKey) async -> TokenFetch {
        let now = wallClock()
        if let kept = memory.accessToken(key.tokenCacheKey, now: now) {
            return .token(AccessToken(value: kept, usableUntil: now))
        }
        let (transport, timeout, wallClock) = (transport, timeout, wallClock)
        return await memory.fetchAccessToken(key.tokenCacheKey) {
            await TokenEndpoint.fetch(key, transport: transport, timeout: timeout, now: wallClock())
        }
    }

    /// What an answer says (SPEC §9.3): only 200 with a `notification_key` is success; FCM's
    /// three errors are matched without case; 429, 5xx and anything else are retried.
    func judge(_ response: TransportResponse, secrets: [String]) -> Answer {
        struct Body: Decodable {
            var notification_key: String?
            var error: String?
        }
        let body = try? JSONDecoder().decode(Body.self, from: Data(response.body))
        switch response.status {
        case 200:
            guard let key = body?.notification_key, !key.isEmpty else {
                return .outcome(.retry(AttemptFailure(status: 200, reason: "HTTP 200, but the answer has no notification_key")))
            }
            return .key(key)
        case 400:
            let error = body?.error.map { ReceiverAnswer.trimmed($0).lowercased() }
            switch error {
            case "notification_key already exists": return .alreadyExists
            case "notification_key not found": return .notFound
            case "no valid registration ids": return .noValidIDs
            default:
                let said = ReceiverAnswer.excerpt(response.body, hiding: secrets)
                return .outcome(.retry(ReceiverAnswer.failure(response, reason: "HTTP 400" + (said.map { ": \($0)" } ?? ""))))
            }
        default:
            return .outcome(.retry(ReceiverAnswer.failure(response)))
        }
    }

    private func retry(_ reason: String) -> Outcome {
        .retry(AttemptFailure(status: nil, reason: reason))
    }
}
