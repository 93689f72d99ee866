import FoundationEssentials
import PushBackend
import PushConfig
import PushScheduler
import PushTemplates
import PushTransport

/// Exchanging a service account's signed assertion for an access token at its `token_uri`
/// (SPEC §9.3, RFC 7523): a form POST of `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
/// and `assertion`, answered `{"access_token","expires_in",…}`.
enum TokenEndpoint {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// How long before it expires an access token is no longer used.
    static let margin: Int64 = 60_000

    /// Asks for an access token for `key` at `now` (Unix milliseconds). The token, or what its
    /// absence means: a retry (no answer, 429, 5xx), or the service stopped (the endpoint
    /// refuses the key).
    static func fetch(_ key: ServiceAccountKey, transport: any HTTPTransport, timeout: Duration, now: Int64) async -> TokenFetch {
        let assertion: String
        do {
            assertion = try ServiceAccountAssertion.make(key, now: now / 1000)
        } catch {
            return .failed(.stopped("the service account's private key cannot sign"))
        }
        let body = "grant_type=" + TextEncoding.formValue(grantType) + "&assertion=" + TextEncoding.formValue(assertion)
        let request = TransportRequest(method: "POST", url: key.tokenURI,
                                       headers: [("User-Agent", PushReporterVersion.userAgent),
                                                 ("Content-Type", "application/x-www-form-urlencoded")],
                                       body: Array(body.utf8), timeout: timeout)
        let host = URLText.hostAndPort(of: key.tokenURI)
        let response: TransportResponse
        do {
            response = try await transport.send(request)
        } catch {
            if case .retry(var failure) = ReceiverAnswer.outcome(of: error), !failure.isCancellation {
                failure.reason = "the token endpoint \(host): \(failure.reason)"
                return .failed(.retry(failure))
            }
            return .failed(ReceiverAnswer.outcome(of: error))
        }
        let secrets = [assertion, key.privateKey]
        struct Answer: Decodable {
            var access_token: String?
            var expires_in: Int64?
            var error: String?
            var error_description: String?
        }
        let answer = try? JSONDecoder().decode(Answer.self, from: Data(response.body))
        switch response.status {
        case 200:
            guard let token = answer?.access_token, !token.isEmpty else {
                return .failed(.retry(AttemptFailure(status: 200, reason: "the token endpoint \(host) answered HTTP 200 without an access_token")))
            }
            let lifetime = max(0, answer?.expires_in ?? ServiceAccountAssertion.lifetime) * 1000
            return .token(AccessToken(value: token, usableUntil: now + lifetime - margin))
        case 400, 401, 403:
            let said = [answer?.error, answer?.error_description].compactMap { $0 }.joined(separator: ": ")
            let why = said.isEmpty ? ReceiverAnswer.excerpt(response.body, hiding: secrets)
                : secrets.contains(where: said.contains) ? nil : String(said.prefix(200)).displayEscaped
            return .failed(.stopped("the token endpoint \(host) refused the service account \(key.clientEmail.displayEscaped) "
                                    + "(HTTP \(response.status)\(why.map { ": \($0)" } ?? ""))"))
        default:
            var failure = ReceiverAnswer.failure(response)
            failure.reason = "the token endpoint \(host) answered \(failure.reason)"
            return .failed(.retry(failure))
        }
    }
}
