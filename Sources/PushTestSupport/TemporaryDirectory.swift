import Foundation

/// A directory under the system temporary folder, removed when the value is deinitialised.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's absolute path.
    public let path: String

    public init(prefix: String = "pushreporter-test") {
        // NSTemporaryDirectory() ends in "/" already: paths in messages read /tmp/name, not /tmp//name.
        let base = NSTemporaryDirectory()
        let template = (base.hasSuffix("/") ? base : base + "/") + "\(prefix)-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let created = mkdtemp(&bytes) else { fatalError("mkdtemp failed for \(template)") }
        path = String(cString: created)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Writes `contents` to `name` (subdirectories are created) and returns the file's path.
    @discardableResult
    public func write(_ name: String, _ contents: String) -> String {
        write(name, bytes: Array(contents.utf8))
    }

    /// Writes raw bytes to `name` and returns the file's path.
    @discardableResult
    public func write(_ name: String, bytes: [UInt8]) -> String {
        let file = path + "/" + name
        let directory = (file as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        precondition(FileManager.default.createFile(atPath: file, contents: Data(bytes)), "cannot write the test file \(file)")
        return file
    }

    /// Creates a subdirectory and returns its path.
    @discardableResult
    public func makeDirectory(_ name: String) -> String {
        let directory = path + "/" + name
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }
}

/// Where the package's own folders are, found from this source file.
public enum RepositoryPaths {
    /// The repository root (the folder holding Package.swift).
    public static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The shipped `templates/` folder.
    public static var templates: String { root + "/templates" }
    /// The `examples/` folder.
    public static var examples: String { root + "/examples" }
}
