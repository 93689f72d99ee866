import FoundationEssentials
import PushConfig

/// The tracking values of a received push notification (seeds 001 and 003): `_mId` (the
/// broadlog id), `_dId` (the delivery id) and `_acsDeliveryTracking`. Both shapes Adobe Campaign
/// sends are read: iOS puts them at the top level beside `aps`; Android inside `data`, also
/// when the message is wrapped with `"to"` (the FCM tester's form) or under `message` (FCM's
/// HTTP v1 form).
///
/// A spool file (``TrackingSpool``) is such a payload with the instructions `event`, and
/// optionally `service`, `account` and `ecid`, at its top level; its payload may also stand
/// under `payload`.
public struct PushPayload: Sendable {
    /// Where the tracking values were found.
    public enum Shape: String, Sendable {
        /// At the top level, beside `aps`.
        case ios
        /// Inside `data`.
        case android
        /// Nowhere: the payload carries none of them.
        case none
    }

    /// `_mId`, the broadlog id.
    public var messageId: String?
    /// `_dId`, the delivery id.
    public var deliveryId: String?
    /// `_acsDeliveryTracking`: `on` or `off`; absent for deliveries before Campaign 21.1.
    public var deliveryTracking: String?
    public var shape: Shape
    /// The spool's instructions (each nil when absent).
    public var event, service, account, ecid: String?
    /// Values that are there but cannot be used (a `_mId` that is an object, say), as sentences.
    public var problems: [String] = []

    /// The largest payload read: APNs and FCM take 4 KiB, and SPEC §12 caps a value at 1 MiB.
    public static let maximumSize = 1 << 20

    /// Why `bytes` cannot be read as a payload, as a sentence that follows its name.
    public struct Unreadable: Error, Sendable {
        public var reason: String
    }

    /// Reads one JSON document.
    public init(json bytes: [UInt8]) throws(Unreadable) {
        guard bytes.count <= Self.maximumSize else {
            throw Unreadable(reason: "is \(bytes.count) bytes, more than the limit of 1 MiB for a payload")
        }
        if let problem = JSONValidator.problem(in: bytes) { throw Unreadable(reason: "is not JSON (\(problem))") }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else {
            throw Unreadable(reason: "is not JSON that can be read")
        }
        guard case .object(let root) = value else {
            throw Unreadable(reason: "is not a JSON object (a push payload is one)")
        }
        var problems: [String] = []
        func text(_ key: String, in object: [String: JSONValue]) -> String? {
            guard let value = object[key] else { return nil }
            switch value {
            case .string(let text): return text
            case .integer(let number): return String(number)
            case .null: return nil
            default:
                problems.append("\(key) is \(value.kind), not text")
                return nil
            }
        }
        event = text("event", in: root)
        service = text("service", in: root)
        account = text("account", in: root)
        ecid = text("ecid", in: root)
        var payload = root
        if case .object(let wrapped)? = root["payload"] { payload = wrapped }
        let keys = ["_mId", "_dId", "_acsDeliveryTracking"]
        var places: [(Shape, [String: JSONValue])] = [(.ios, payload)]
        if case .object(let data)? = payload["data"] { places.append((.android, data)) }
        if case .object(let message)? = payload["message"], case .object(let data)? = message["data"] { places.append((.android, data)) }
        let found = places.first { place in keys.contains { place.1[$0] != nil } }
        shape = found?.0 ?? .none
        let values = found?.1 ?? [:]
        messageId = text("_mId", in: values)
        deliveryId = text("_dId", in: values)
        deliveryTracking = text("_acsDeliveryTracking", in: values)
        self.problems = problems
    }

    /// Why the payload itself says it is not tracked (SPEC §9.4), as sentences; empty when
    /// it is tracked: it carries `_mId` and `_dId`, and `_acsDeliveryTracking` is `on` (in any
    /// case) or absent.
    public var whyNotTracked: [String] {
        var reasons = problems.filter { $0.hasPrefix("_") }
        let missing = [("_mId", messageId), ("_dId", deliveryId)].filter { $0.1 == nil || $0.1?.isEmpty == true }.map(\.0)
        if missing.count == 2 && !problems.contains(where: { $0.hasPrefix("_mId") || $0.hasPrefix("_dId") }) {
            reasons.append("the payload carries no _mId and no _dId (neither at the top level, as iOS has them, nor in data, as Android has them)")
        } else {
            for key in missing where !problems.contains(where: { $0.hasPrefix(key) }) {
                reasons.append("the payload carries no \(key)")
            }
        }
        if let tracking = deliveryTracking, tracking.lowercased() != "on" {
            reasons.append("_acsDeliveryTracking is '\(tracking.displayEscaped)', not on")
        }
        return reasons
    }
}

/// A JSON value as read, for finding the tracking values in a payload.
enum JSONValue: Decodable, Sendable {
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case object([String: JSONValue])
    case array([JSONValue])
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    /// A noun for messages: `a number`, `an object`, ….
    var kind: String {
        switch self {
        case .string: "text"
        case .integer, .number: "a number"
        case .bool: "true or false"
        case .object: "an object"
        case .array: "an array"
        case .null: "null"
        }
    }
}

extension PushPayload {
    /// The JSON documents of a stream, each with the line it starts on: one a line (JSON lines),
    /// indented over several lines (as `pushreporter payload` prints them), or one after the
    /// other. A document ends where its outermost object or array closes (or, for anything
    /// else, at the next space); blank text between documents is skipped.
    public static func documents(in bytes: [UInt8]) -> [(line: Int, bytes: ArraySlice<UInt8>)] {
        var documents: [(line: Int, bytes: ArraySlice<UInt8>)] = []
        var line = 1
        var index = bytes.startIndex
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        while index < bytes.endIndex {
            if isSpace(bytes[index]) {
                if bytes[index] == 0x0A { line += 1 }
                index += 1
                continue
            }
            let start = index, startLine = line
            guard bytes[index] == UInt8(ascii: "{") || bytes[index] == UInt8(ascii: "[") || bytes[index] == UInt8(ascii: "\"") else {
                // Not a JSON object: the rest of its line is one document, said once as not JSON
                // (word by word, `not json` was two).
                while index < bytes.endIndex, bytes[index] != 0x0A { index += 1 }
                documents.append((startLine, bytes[start..<index]))
                continue
            }
            var depth = 0, inString = false, escaped = false
            scan: while index < bytes.endIndex {
                let byte = bytes[index]
                if byte == 0x0A { line += 1 }
                index += 1
                if inString {
                    if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth <= 0 { break scan }
                case _ where depth == 0 && index < bytes.endIndex && isSpace(bytes[index]): break scan
                default: break
                }
            }
            documents.append((startLine, bytes[start..<index]))
        }
        return documents
    }
}
