import Dispatch
import PushTemplates
import PushSystem
#if canImport(Glibc)
import Glibc
#endif

/// Scalars as values: the `!env`, `!file` and `!credential` tags, secrets, sizes.
extension LoadSession {
    /// Whether a connection URI writes a password (`postgres://user:secret@host/db`).
    static func uriHasPassword(_ uri: String) -> Bool {
        guard let scheme = uri.firstRange(of: "://") else { return false }
        let rest = uri[scheme.upperBound...]
        guard let at = rest.firstIndex(of: "@") else { return rest.contains("password=") }
        return rest[..<at].contains(":") || rest.contains("password=")
    }

    /// The largest value one scalar may hold (SPEC §12): 1 MiB.
    static let maximumScalarSize = 1 << 20

    /// Whether a key names a secret: it contains `password`, `secret` or `apitoken`, in any case.
    static func isSecretKey(_ key: String) -> Bool {
        var key = key
        return key.withUTF8 { bytes in
            containsASCIICaseInsensitive(bytes, "password") || containsASCIICaseInsensitive(bytes, "secret")
                || containsASCIICaseInsensitive(bytes, "apitoken")
        }
    }

    /// Byte-level search for a lower-case ASCII `needle` (called for every value loaded).
    static func containsASCIICaseInsensitive(_ bytes: UnsafeBufferPointer<UInt8>, _ needle: StaticString) -> Bool {
        let count = needle.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        let pattern = needle.utf8Start
        for start in 0...(bytes.count - count) {
            var matched = true
            for i in 0..<count {
                var b = bytes[start + i]
                if b >= 0x41 && b <= 0x5A { b |= 0x20 }
                if b != pattern[i] {
                    matched = false
                    break
                }
            }
            if matched { return true }
        }
        return false
    }

    /// A scalar's value, with `!env`, `!file` and `!credential` resolved. `isSecret` is whether
    /// `key` names a secret, when already known (else ``isSecretKey(_:)`` says: globals, service
    /// settings and template keys are not account keys, whose recent facts it would push out).
    mutating func resolve(_ scalar: YAMLScalar, key: String, isSecret known: Bool? = nil, file: String,
                          account: String?) -> ConfigValue? {
        guard scalar.value.utf8.count <= Self.maximumScalarSize else {
            diagnostics.error("the value of '\(key)' is \(scalar.value.utf8.count) bytes, more than the limit of 1 MiB for one value",
                              file: file, at: scalar.start, account: account)
            return nil
        }
        guard let tag = scalar.tag, tag != "!", tag != "tag:yaml.org,2002:str" else {
            return ConfigValue(text: scalar.value, isSecret: known ?? Self.isSecretKey(key), origin: ValueOrigin(path: path(of: file), scalar: scalar))
        }
        let origin = ValueOrigin(path: path(of: file), scalar: scalar, isVerbatim: false)
        let name = scalar.value
        switch tag {
        case "!env":
            guard let value = environment.variables[name] else {
                diagnostics.error("environment variable '\(name)' is not set (needed by !env for '\(key)')", file: file, at: scalar.start, account: account)
                return nil
            }
            return ConfigValue(text: value, isSecret: true, secretName: ShellVariable.name(keeping: name), origin: origin)
        case "!file":
            let path = name.hasPrefix("/") ? name : FileSystem.join(FileSystem.directory(of: file), name)
            switch FileSystem.read(path, limit: FileSystem.maximumSecretSize) {
            case .failure(let error):
                diagnostics.error("cannot read '\(path)' for !file: \(error.message)", file: file, at: scalar.start, account: account)
                return nil
            case .success(let bytes):
                return ConfigValue(text: Self.withoutTrailingNewline(bytes), isSecret: true,
                                   secretName: ShellVariable.name(from: FileSystem.baseName(of: name)), origin: origin)
            }
        case "!credential":
            guard let directory = environment.variables["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
                diagnostics.error("!credential \(name) needs $CREDENTIALS_DIRECTORY, which systemd sets for LoadCredential=; it is not set",
                                  file: file, at: scalar.start, account: account)
                return nil
            }
            guard !name.isEmpty, !name.contains("/") else {
                diagnostics.error("'\(name)' is not a credential name", file: file, at: scalar.start, account: account)
                return nil
            }
            switch FileSystem.read(FileSystem.join(directory, name), limit: FileSystem.maximumSecretSize) {
            case .failure(let error):
                diagnostics.error("cannot read credential '\(name)' in \(directory): \(error.message)", file: file, at: scalar.start, account: account)
                return nil
            case .success(let bytes):
                return ConfigValue(text: Self.withoutTrailingNewline(bytes), isSecret: true, secretName: ShellVariable.name(from: name), origin: origin)
            }
        default:
            diagnostics.error(unknown("tag", tag, among: ["!env", "!file", "!credential"]), file: file, at: scalar.start, account: account)
            return nil
        }
    }

    /// `file` as a ``SourcePath``; the last one is kept, as the values of a file come together.
    mutating func path(of file: String) -> SourcePath {
        if let last = lastPath, last.file == file { return last.path }
        let path = SourcePath(file)
        lastPath = (file, path)
        return path
    }

    static func withoutTrailingNewline(_ bytes: [UInt8]) -> String {
        var end = bytes.count
        if end > 0, bytes[end - 1] == 0x0A { end -= 1 }
        if end > 0, bytes[end - 1] == 0x0D { end -= 1 }
        return String(decoding: bytes[0..<end], as: UTF8.self)
    }
}
