import PushAgent
@testable import PushAcrobits
import PushBackend
import PushConfig
import Testing
import PushTestThreads

@Suite("ConfigWatcher", .ownThreads)
struct ConfigWatcherTests {
    @Test("a directory that cannot be watched is said at once, with why")
    func unwatchable() async {
        let watcher = ConfigWatcher(paths: ["/nonexistent-pushreporter-test/config.yaml"])
        do throws(ConfigWatcher.Failure) {
            try await watcher.changes {}
            Issue.record("changes returned without a failure")
        } catch {
            #expect(error.message == "/nonexistent-pushreporter-test cannot be watched: no such file or directory")
        }
    }
}
