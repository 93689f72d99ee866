import ArgumentParser
import PushCommandKit
import PushConfig
import PushSystem

/// `pushreporter payload`: render a test push as Adobe Campaign sends it (SPEC §9.4). The
/// Adobe backend's own command (``AdobeBackend/commands``).
public struct PayloadCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Print a test push payload, as Adobe Campaign Standard sends it, from a message file.",
        discussion: """
            MESSAGE.yaml is a mapping of title, body, badge, sound, category, contentAvailable, mediaUrl, uri, \
            deliveryId (written as _dId), messageId (_mId), tracking (on or off: _acsDeliveryTracking), \
            collapseKey, priority (high, the default, or normal) and custom (a mapping of keys to values). iOS \
            puts the alert, badge, sound, category and flags under aps (mutable-content: 1 whenever mediaUrl is \
            set) and the rest at the top level; Android writes collapseKey, priority and a data object whose \
            values are all strings. The output is the same bytes every time, and 'pushreporter track' reads it.
            """
    )

    @Option(help: "The app's platform: ios or android.")
    var platform: TestPushMessage.Platform

    @Argument(help: ArgumentHelp("The message file.", valueName: "message.yaml"))
    var message: String

    public init() {}

    public func run() throws {
        let bytes: [UInt8]
        switch FileSystem.read(message, limit: 1 << 20) {
        case .success(let read): bytes = read
        case .failure(let error):
            printError("payload: \(message.displayEscaped) cannot be read (\(error.message))")
            exitNow(Exit.failure)
        }
        var diagnostics = DiagnosticList()
        guard let parsed = TestPushMessage.parse(bytes, file: message, diagnostics: &diagnostics) else {
            for diagnostic in diagnostics.sorted(fileOrder: [message]) { printError(diagnostic.formatted) }
            exitNow(Exit.configuration)
        }
        if let note = parsed.unused(on: platform) { printError("payload: note: \(note)") }
        print(parsed.json(for: platform), terminator: "")
        exitNow(.success)
    }
}

extension TestPushMessage.Platform: ExpressibleByArgument {}
