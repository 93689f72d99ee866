import _CryptoExtras
import FoundationEssentials
import PushConfig

/// The parts of a Google service-account JSON key that OAuth 2 needs (SPEC §9.3): who signs,
/// with what, and where the signed assertion is exchanged for an access token.
///
/// The key file is a secret as a whole; so is every value of this type (it is kept in state
/// only inside a cleanup, as sending it needs).
struct ServiceAccountKey: Sendable, Codable, Hashable {
    /// `client_email`: the JWT's issuer.
    var clientEmail: String
    /// `private_key`: an RSA private key in PEM (PKCS#8, as Google writes it, or PKCS#1).
    var privateKey: String
    /// `private_key_id`: sent as the JWT's `kid` when the file has one.
    var privateKeyId: String?
    /// `token_uri`, or the service's `tokenUri` over it.
    var tokenURI: String

    /// Why a text is not a usable key, as a sentence that never quotes the key.
    struct Problem: Error, Equatable {
        var message: String
    }

    /// Reads a key file's text; `tokenURI` (the service's `tokenUri`) goes over its `token_uri`.
    static func parse(_ text: String, tokenURI override: String?) throws(Problem) -> ServiceAccountKey {
        struct File: Decodable {
            var type: String?
            var client_email: String?
            var private_key: String?
            var private_key_id: String?
            var token_uri: String?
        }
        guard let file = try? JSONDecoder().decode(File.self, from: Data(text.utf8)) else {
            throw Problem(message: "is not a service-account JSON key (it does not parse as a JSON object of strings)")
        }
        if let type = file.type, type != "service_account" {
            throw Problem(message: "is a JSON key of type '\(type.displayEscaped)', not 'service_account'")
        }
        guard let email = file.client_email, !email.isEmpty else {
            throw Problem(message: "has no client_email")
        }
        guard let pem = file.private_key, !pem.isEmpty else {
            throw Problem(message: "has no private_key")
        }
        do {
            _ = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw Problem(message: "has a private_key that is not an RSA private key of 2048 bits or more in PEM")
        }
        guard let uri = override ?? file.token_uri, !uri.isEmpty else {
            throw Problem(message: "has no token_uri (give tokenUri)")
        }
        return ServiceAccountKey(clientEmail: email, privateKey: pem, privateKeyId: file.private_key_id, tokenURI: uri)
    }

    /// What identifies the access tokens of this key: its account and where they come from.
    var tokenCacheKey: String { clientEmail + "\u{0}" + tokenURI }
}
